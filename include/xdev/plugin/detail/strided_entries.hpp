/// \file
/// The strided-transfer entries of the table `XDEV_DEFINE_PLUGIN` generates (ABI 1.11):
/// `copy_to_host_strided`, `copy_to_device_strided` (for a backend with
/// `concepts::StridedTransfers`) and `copy_between_strided` (`concepts::StridedCopies`), each
/// checking the regions it receives. `Client` is the plugin table's client object (its `backend`).
#pragma once

#include <xdev/plugin/abi.h>
#include <xdev/backend/completion.hpp>
#include <xdev/backend/concepts.hpp>
#include <xdev/backend/strided_region.hpp>
#include <xdev/core/error.hpp>
#include <xdev/plugin/detail/abi_bridge.hpp>
#include <xdev/plugin/detail/entry_guard.hpp>
#include <xdev/plugin/detail/op_marshal.hpp>

#include <cstddef>
#include <cstdint>
#include <utility>

namespace xdev::plugin::detail {

template <class B, class Client>
struct StridedEntries {
  using H = typename B::memory_handle;
  static B& backend(void* p) noexcept { return static_cast<Client*>(p)->backend; }

  static xdev_status copy_to_host(void* p, std::uint64_t device, xdev_memory src, const xdev_strided_region* region,
                                  void* dst, const xdev_completion* done, xdev_error* err) noexcept {
    return run_async(err, done, [&](Completion c) {
      if constexpr (concepts::StridedTransfers<B>)
        backend(p).copy_to_host_strided(static_cast<std::size_t>(device), handle_from<H>(src), from_c(region), dst,
                                        std::move(c));
    });
  }
  static xdev_status copy_to_device(void* p, std::uint64_t device, const void* src, xdev_memory dst,
                                    const xdev_strided_region* region, const xdev_completion* done,
                                    xdev_error* err) noexcept {
    return run_async(err, done, [&](Completion c) {
      if constexpr (concepts::StridedTransfers<B>)
        backend(p).copy_to_device_strided(static_cast<std::size_t>(device), src, handle_from<H>(dst), from_c(region),
                                          std::move(c));
    });
  }
  static xdev_status copy_between(void* p, std::uint64_t sd, xdev_memory src, const xdev_strided_region* sr,
                                  std::uint64_t dd, xdev_memory dst, const xdev_strided_region* dr,
                                  const xdev_completion* done, xdev_error* err) noexcept {
    return run_async(err, done, [&](Completion c) {
      if constexpr (concepts::StridedCopies<B>) {
        const StridedRegion from = from_c(sr), to = from_c(dr);
        if (from.row_bytes != to.row_bytes || from.rows != to.rows || from.slices != to.slices)
          throw error(errc::invalid_argument, "the two strided regions do not have the same rows");
        backend(p).copy_between_strided(static_cast<std::size_t>(sd), handle_from<H>(src), from,
                                        static_cast<std::size_t>(dd), handle_from<H>(dst), to, std::move(c));
      }
    });
  }
};

}  // namespace xdev::plugin::detail
