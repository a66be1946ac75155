/// \file
/// The umbrella header: everything in xdev's core (not the optional MPI component).
#pragma once

#include <xdev/async/device_queue.hpp>
#include <xdev/async/event.hpp>
#include <xdev/async/stream.hpp>
#include <xdev/async/submit.hpp>
#include <xdev/async/throttle.hpp>
#include <xdev/async/use_future.hpp>
#include <xdev/backend/completion.hpp>
#include <xdev/backend/concepts.hpp>
#include <xdev/backends/host.hpp>
#include <xdev/core/dtype.hpp>
#include <xdev/core/env.hpp>
#include <xdev/core/error.hpp>
#include <xdev/core/shape.hpp>
#include <xdev/device/device.hpp>
#include <xdev/device/runtime.hpp>
#include <xdev/fwd.hpp>
#include <xdev/memory/allocator.hpp>
#include <xdev/memory/buffer.hpp>
#include <xdev/policy/capabilities.hpp>
#include <xdev/policy/capability_set.hpp>
#include <xdev/policy/policies.hpp>
#include <xdev/version.hpp>
