/// \file
/// The element-wise work of the collectives (combining two chunks, scaling for a mean) on one
/// device of any backend: the portable op when it exists for the element type (`ops::add`,
/// `ops::minimum`, `ops::maximum`, `ops::scale`), else a host-staged kernel. Internal to
/// <xdev/spmd/collectives.hpp>.
#pragma once

#include <xdev/any/any_device.hpp>
#include <xdev/async/device_queue.hpp>
#include <xdev/async/submit.hpp>
#include <xdev/backend/completion.hpp>
#include <xdev/core/metrics.hpp>
#include <xdev/ops/fallback.hpp>
#include <xdev/ops/host_kernels.hpp>
#include <xdev/ops/op_args.hpp>
#include <xdev/ops/ops.hpp>

#include <cstddef>
#include <exception>
#include <memory>
#include <utility>
#include <vector>

namespace xdev::spmd::detail {

/// An erased device seen as a backend by the CPU fallback (`ops::detail::Fallback`): its two
/// transfers go to the device's model, and every byte is counted in the device's `TransferStats`.
struct ErasedStaging {
  using memory_handle = xdev::detail::erased_handle;
  AnyDevice dev;

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

using HostOperand = ops::detail::Staged<xdev::detail::erased_handle>;
using HostCompute = ops::detail::Fallback<ErasedStaging>::Compute;

/// Submits, on `dev`'s default stream (in-flight slot, stream order, token), `compute` on host
/// copies of some of its arrays, through the CPU fallback's staging (read operands copied in,
/// `compute` on the fallback pool, written ones copied back). The portable ops exist only for f32
/// and f64; this is how an i32 sum or a bf16 mean still reduces exactly. Each run counts in the
/// metric `collective.host_kernel`.
template <class Token>
void submit_host_kernel(const AnyDevice& dev, std::vector<HostOperand> operands, HostCompute compute, Token&& token) {
  auto launch = [dev, operands = std::move(operands), compute = std::move(compute)](Completion done) mutable {
    metrics::counter("collective.host_kernel").add();
    // The staging backend lives until the fallback delivers `done`: the completion holds it.
    auto staging = std::make_shared<ErasedStaging>(ErasedStaging{dev});
    auto& backend = *staging;
    std::make_shared<ops::detail::Fallback<ErasedStaging>>(
        backend, 0, std::move(operands), std::move(compute),
        Completion([staging = std::move(staging), done = std::move(done)](std::exception_ptr ep) mutable {
          done(std::move(ep));
        }))
        ->start();
  };
  xdev::detail::submit<void>(dev.queue(), dev.queue()->default_chain(), nullptr, std::move(launch),
                             std::forward<Token>(token));
}

/// `out = a op b` element-wise on `dev` (all three on `dev`, same shape; `out` may be `a`).
template <class T, class Token>
void submit_combine(const AnyDevice& dev, ops::BinaryOp op, const AnyArray<T>& a, const AnyArray<T>& b,
                    AnyArray<T>& out, Token&& token) {
  // The portable op when it takes T (today: f32 and f64), so a backend's own kernel runs.
  constexpr bool has_add = requires(const AnyDevice& q, const AnyArray<T>& x, AnyArray<T>& y) {
    ops::add(q, x, x, y);
  };
  constexpr bool has_min = requires(const AnyDevice& q, const AnyArray<T>& x, AnyArray<T>& y) {
    ops::minimum(q, x, x, y);
  };
  constexpr bool has_max = requires(const AnyDevice& q, const AnyArray<T>& x, AnyArray<T>& y) {
    ops::maximum(q, x, x, y);
  };
  if constexpr (has_add) {
    if (op == ops::BinaryOp::add) return ops::add(dev, a, b, out, std::forward<Token>(token));
  }
  if constexpr (has_min) {
    if (op == ops::BinaryOp::min) return ops::minimum(dev, a, b, out, std::forward<Token>(token));
  }
  if constexpr (has_max) {
    if (op == ops::BinaryOp::max) return ops::maximum(dev, a, b, out, std::forward<Token>(token));
  }
  const std::size_t n = a.size();
  const bool in_place = a.buffer().native_handle() == out.buffer().native_handle();
  std::vector<HostOperand> operands{{a.buffer().native_handle(), n * sizeof(T), true, in_place},
                                    {b.buffer().native_handle(), n * sizeof(T), true, false}};
  if (!in_place) operands.push_back({out.buffer().native_handle(), n * sizeof(T), false, true});
  submit_host_kernel(
      dev, std::move(operands),
      [op, n, in_place](std::vector<std::byte*>& p) {
        auto* o = reinterpret_cast<T*>(in_place ? p[0] : p[2]);
        ops::host::binary(ops::detail::fallback_parallel(), op, reinterpret_cast<const T*>(p[0]),
                          reinterpret_cast<const T*>(p[1]), o, n);
      },
      std::forward<Token>(token));
}

/// `x *= alpha` element-wise on `dev`.
template <class T, class Token>
void submit_scale(const AnyDevice& dev, AnyArray<T>& x, T alpha, Token&& token) {
  constexpr bool has_scale = requires(const AnyDevice& q, AnyArray<T>& y, T s) {
    ops::scale(q, y, s);
  };
  if constexpr (has_scale) {
    return ops::scale(dev, x, alpha, std::forward<Token>(token));
  } else {
    const std::size_t n = x.size();
    submit_host_kernel(
        dev, {{x.buffer().native_handle(), n * sizeof(T), true, true}},
        [n, alpha](std::vector<std::byte*>& p) {
          ops::host::scale(ops::detail::fallback_parallel(), reinterpret_cast<T*>(p[0]), n, alpha);
        },
        std::forward<Token>(token));
  }
}

}  // namespace xdev::spmd::detail
