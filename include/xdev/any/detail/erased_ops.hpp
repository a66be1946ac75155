/// \file
/// The op path of an erased device (`xdev::AnyDevice` is `D`): `ErasedStaging<D>`, the device as
/// the CPU fallback's backend, and `erased_op_launcher<D>`, what `ops::op_launcher<AnyDevice>` is.
/// Users never touch these.
#pragma once

#include <xdev/any/detail/model.hpp>
#include <xdev/async/device_queue.hpp>
#include <xdev/backend/completion.hpp>
#include <xdev/core/detail/hooks.hpp>
#include <xdev/ops/dispatch.hpp>
#include <xdev/ops/fallback.hpp>
#include <xdev/ops/op_args.hpp>

#include <cstddef>
#include <exception>
#include <memory>
#include <utility>
#include <vector>

namespace xdev::detail {

/// An erased device seen as a backend by the CPU fallback (`ops::detail::Fallback`): its two
/// transfers go to the device's model, and every byte is counted in the device's `TransferStats`.
template <class D>
struct ErasedStaging {
  using memory_handle = erased_handle;
  D dev;

  void copy_to_host(std::size_t, memory_handle src, std::size_t offset, void* dst, std::size_t bytes,
                    Completion done) const {
    dev.queue()->note_transfer(TransferDirection::to_host, bytes);
    dev.model().copy_to_host(src, offset, dst, bytes, dev.keep_alive(std::move(done)));
  }
  void copy_to_device(std::size_t, const void* src, memory_handle dst, std::size_t offset, std::size_t bytes,
                      Completion done) const {
    dev.queue()->note_transfer(TransferDirection::from_host, bytes);
    dev.model().copy_to_device(src, dst, offset, bytes, dev.keep_alive(std::move(done)));
  }
};

/// The erased entry of every op: the arguments, their dtypes and the op's kind go through one
/// virtual call to the device's model, which rebuilds the typed arguments and starts the backend's
/// member when `ops::runs_natively` says so (the typed path's decision); otherwise the CPU fallback
/// runs here, over the erased arguments.
template <class D>
struct erased_op_launcher {
  template <class Args>
  static void launch(const D& dev, const Args& args, const ops::detail::OperandOffsets& offsets, Completion done) {
    using info = ops::detail::op_info<Args>;
    static_assert(info::known,
                  "xdev ops on AnyArray<T>: every element type must have a DType (bool, std::uint8_t, std::int32_t, "
                  "std::int64_t, xdev::f16, xdev::bf16, float, double)");
    Completion kept = dev.keep_alive(std::move(done));
    if (!dev.model().run(info::kind, info::dtype, info::dtype2, &args, offsets, kept))
      launch_fallback(dev, args, offsets, std::move(kept));
  }

  /// The CPU fallback on an erased device (counted in `fallback.<op>`): its operands travel
  /// through the device's own transfers (`ErasedStaging`), so the backend's type is never needed.
  template <class Args>
  static void launch_fallback(const D& dev, const Args& args, const ops::detail::OperandOffsets& offsets,
                              Completion done) {
    using traits = ops::op_traits<Args>;
    if (tools::active()) tools::detail::instant(tools::Category::fallback, traits::name(args), dev.name());
    // The staging backend lives until the fallback delivers `done`: the completion holds it.
    auto staging = std::make_shared<ErasedStaging<D>>(ErasedStaging<D>{dev});
    auto& backend = *staging;
    ops::detail::run_fallback<ErasedStaging<D>>(
        traits::name(args), backend, 0, ops::detail::staged_operands(args, offsets),
        [args](std::vector<std::byte*>& p) { traits::compute(args, p); },
        Completion([staging = std::move(staging), done = std::move(done)](std::exception_ptr ep) mutable {
          done(std::move(ep));
        }));
  }
};

}  // namespace xdev::detail
