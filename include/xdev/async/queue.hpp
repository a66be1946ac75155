/// \file
/// What a queue of device work is, for the portable ops and anything else that submits to one: a
/// device handle (its default stream) or a stream handle. Handle types opt in by specializing
/// `enable_device_handle` or `enable_stream_handle` beside their definition — `Device<B>` and
/// `Stream<B>` below this layer's users, `AnyDevice` and `AnyStream` in <xdev/any/any_device.hpp>
/// — so the layers that use queues never name the types of the layers above them.
#pragma once

#include <concepts>

namespace xdev {

/// True for a device handle type (`Device<B>`, `AnyDevice`): specialize it beside the type.
template <class D>
inline constexpr bool enable_device_handle = false;

/// True for a stream handle type (`Stream<B>`, `AnyStream`): specialize it beside the type.
template <class S>
inline constexpr bool enable_stream_handle = false;

namespace concepts {

// clang-format off

/// A handle to one device: a `Device<B>` or an `AnyDevice`.
template <class D>
concept DeviceHandle = requires { typename D::backend_type; } && enable_device_handle<D>;

/// Where device work is submitted: a device handle (its default stream), a `Stream<B>` or an
/// `AnyStream`.
template <class Q>
concept Queue = requires { typename Q::backend_type; } && (DeviceHandle<Q> || enable_stream_handle<Q>);

// clang-format on

}  // namespace concepts
}  // namespace xdev
