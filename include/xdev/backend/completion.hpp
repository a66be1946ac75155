/// \file
/// The callback shapes a backend uses to report asynchronous work: `Completion` and `HostTask`.
#pragma once

#include <xdev/core/detail/unique_function.hpp>

#include <exception>

namespace xdev {

/// Called exactly once by a backend when submitted work has finished: with a null pointer on
/// success, or with the exception that describes the failure. A backend may call it from any
/// thread, including inside the submitting call (xdev then continues without recursing).
/// Natively asynchronous runtimes call it from their own event callback (an OpenCL event
/// callback, a CUDA host function), so no thread blocks per operation.
using Completion = detail::unique_function<void(std::exception_ptr)>;

/// A host function to run in device order (what `Device::execute` submits).
using HostTask = detail::unique_function<void()>;

}  // namespace xdev
