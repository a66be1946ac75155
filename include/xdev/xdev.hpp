/// \file
/// The umbrella header: everything in xdev's core. Not included (include them where needed): the
/// GoogleTest harness (xdev/testing/), the MPI component (xdev/distributed/), and the parts that pull
/// Boost.DLL: the plugin loader (xdev/plugin/loader.hpp), the registry and the accelerator functions
/// (xdev/any/registry.hpp, xdev/any/accelerator.hpp, and xdev/spmd/spmd.hpp, which turns SPMD on
/// through them); xdev/plugin/define.hpp is for plugin libraries.
#pragma once

#include <xdev/plugin/abi.h>
#include <xdev/any/any_device.hpp>
#include <xdev/async/device_queue.hpp>
#include <xdev/async/event.hpp>
#include <xdev/async/stream.hpp>
#include <xdev/async/submit.hpp>
#include <xdev/async/throttle.hpp>
#include <xdev/async/use_future.hpp>
#include <xdev/backend/completion.hpp>
#include <xdev/backend/concepts.hpp>
#include <xdev/backend/serial_worker.hpp>
#include <xdev/backends/host.hpp>
#include <xdev/core/dtype.hpp>
#include <xdev/core/env.hpp>
#include <xdev/core/error.hpp>
#include <xdev/core/half.hpp>
#include <xdev/core/metrics.hpp>
#include <xdev/core/shape.hpp>
#include <xdev/device/device.hpp>
#include <xdev/device/runtime.hpp>
#include <xdev/fwd.hpp>
#include <xdev/memory/allocator.hpp>
#include <xdev/memory/array.hpp>
#include <xdev/memory/buffer.hpp>
#include <xdev/ops/autocast.hpp>
#include <xdev/ops/fallback.hpp>
#include <xdev/ops/host_kernels.hpp>
#include <xdev/ops/op_args.hpp>
#include <xdev/ops/ops.hpp>
#include <xdev/plugin/plugin_backend.hpp>
#include <xdev/plugin/search_path.hpp>
#include <xdev/policy/capabilities.hpp>
#include <xdev/policy/capability_set.hpp>
#include <xdev/policy/policies.hpp>
#include <xdev/random/generator.hpp>
#include <xdev/random/philox.hpp>
#include <xdev/random/stream.hpp>
#include <xdev/random/threefry.hpp>
#include <xdev/spmd/collectives.hpp>
#include <xdev/spmd/mesh.hpp>
#include <xdev/spmd/partition_spec.hpp>
#include <xdev/spmd/sharded_array.hpp>
#include <xdev/spmd/sharding.hpp>
#include <xdev/spmd/virtual_device.hpp>
#include <xdev/version.hpp>
