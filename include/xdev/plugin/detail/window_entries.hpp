/// \file
/// The op-window entries of the table `XDEV_DEFINE_PLUGIN` generates (ABI 1.12): `open_window` and
/// `close_window`, for a backend that moves handles on (`concepts::OffsetsHandles`: the window is
/// the moved handle, closing it does nothing) or opens windows (`concepts::OpensWindows`: its own
/// `open_window` / `close_window`). `Client` is the plugin table's client object (its `backend`).
#pragma once

#include <xdev/plugin/abi.h>
#include <xdev/backend/concepts.hpp>
#include <xdev/core/error.hpp>
#include <xdev/plugin/detail/entry_guard.hpp>
#include <xdev/plugin/detail/op_marshal.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>

namespace xdev::plugin::detail {

/// Whether backend `B` gives the table its op-window entries.
template <class B>
inline constexpr bool has_op_windows = concepts::OffsetsHandles<B> || concepts::OpensWindows<B>;

template <class B, class Client>
struct WindowEntries {
  using H = typename B::memory_handle;
  static B& backend(void* p) noexcept { return static_cast<Client*>(p)->backend; }

  static xdev_status open(void* p, std::uint64_t device, xdev_memory memory, std::uint64_t offset, xdev_memory* out,
                          xdev_error* err) noexcept {
    return guarded(err, [&] {
      if (out == nullptr) throw error(errc::invalid_argument, "the output pointer is null");
      if (memory == 0) throw error(errc::invalid_argument, "the memory handle is 0 (none)");
      *out = 0;
      if constexpr (concepts::OffsetsHandles<B>) {
        *out = handle_bits(backend(p).offset_handle(handle_from<H>(memory), static_cast<std::size_t>(offset)));
      } else if constexpr (concepts::OpensWindows<B>) {
        const std::optional<H> w = backend(p).open_window(static_cast<std::size_t>(device), handle_from<H>(memory),
                                                          static_cast<std::size_t>(offset));
        if (w) *out = handle_bits(*w);
      }
    });
  }
  static void close(void* p, std::uint64_t device, xdev_memory window) noexcept {
    if constexpr (!concepts::OffsetsHandles<B> && concepts::OpensWindows<B>)
      backend(p).close_window(static_cast<std::size_t>(device), handle_from<H>(window));
    else
      (void)p, (void)device, (void)window;
  }
};

}  // namespace xdev::plugin::detail
