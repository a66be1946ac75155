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

#include <boost/asio/post.hpp>

#include <atomic>
#include <cstddef>
#include <exception>
#include <memory>
#include <utility>
#include <vector>

namespace xdev::spmd::detail {

/// Runs `compute` on host copies of some device arrays: the read operands are copied to the host,
/// `compute` runs on the CPU fallback pool, the written ones are copied back, then `done` is
/// called once. The portable ops exist only for f32 and f64; this is how an i32 sum or a bf16
/// mean still reduces exactly. Every byte moved is counted in the device's `TransferStats`
/// (to-host and from-host), and each run in the metric `collective.host_kernel`.
class HostStagedKernel : public std::enable_shared_from_this<HostStagedKernel> {
 public:
  struct Operand {
    xdev::detail::erased_handle handle;
    std::size_t bytes;
    bool read;
    bool written;
  };
  using Compute = xdev::detail::unique_function<void(std::vector<std::byte*>&)>;

  HostStagedKernel(AnyDevice dev, std::vector<Operand> operands, Compute compute, Completion done)
      : dev_(std::move(dev)), operands_(std::move(operands)), compute_(std::move(compute)), done_(std::move(done)) {
    for (const auto& o : operands_) {
      storage_.push_back(std::make_unique<std::byte[]>(o.bytes == 0 ? 1 : o.bytes));
      pointers_.push_back(storage_.back().get());
    }
  }

  void start() {
    metrics::counter("collective.host_kernel").add();
    copy_in(0);
  }

 private:
  void copy_in(std::size_t i) {
    while (i < operands_.size() && (!operands_[i].read || operands_[i].bytes == 0)) ++i;
    if (i == operands_.size()) return compute();
    dev_.queue()->note_transfer(TransferDirection::to_host, operands_[i].bytes);
    step(
        [&](Completion next) {
          dev_.model().copy_to_host(operands_[i].handle, 0, pointers_[i], operands_[i].bytes, std::move(next));
        },
        [self = shared_from_this(), i] { self->copy_in(i + 1); });
  }

  void compute() {
    boost::asio::post(ops::detail::fallback_pool(), [self = shared_from_this()] {
      try {
        self->compute_(self->pointers_);
      } catch (...) {
        return self->finish(std::current_exception());
      }
      self->copy_out(0);
    });
  }

  void copy_out(std::size_t i) {
    while (i < operands_.size() && (!operands_[i].written || operands_[i].bytes == 0)) ++i;
    if (i == operands_.size()) return finish(nullptr);
    dev_.queue()->note_transfer(TransferDirection::from_host, operands_[i].bytes);
    step(
        [&](Completion next) {
          dev_.model().copy_to_device(pointers_[i], operands_[i].handle, 0, operands_[i].bytes, std::move(next));
        },
        [self = shared_from_this(), i] { self->copy_out(i + 1); });
  }

  // Starts one backend transfer; on success continues with `then`, on failure finishes.
  template <class Call, class Then>
  void step(Call&& call, Then then) {
    try {
      call(dev_.keep_alive([self = shared_from_this(), then = std::move(then)](std::exception_ptr ep) mutable {
        if (ep) return self->finish(std::move(ep));
        then();
      }));
    } catch (...) {
      finish(std::current_exception());
    }
  }

  void finish(std::exception_ptr ep) {
    if (finished_.exchange(true)) return;
    auto done = std::move(done_);
    done(std::move(ep));
  }

  AnyDevice dev_;
  std::vector<Operand> operands_;
  Compute compute_;
  Completion done_;
  std::vector<std::unique_ptr<std::byte[]>> storage_;
  std::vector<std::byte*> pointers_;
  std::atomic<bool> finished_{false};
};

/// Submits a host-staged kernel on `dev`'s default stream (in-flight slot, stream order, token).
template <class Token>
void submit_host_kernel(const AnyDevice& dev, std::vector<HostStagedKernel::Operand> operands,
                        HostStagedKernel::Compute compute, Token&& token) {
  auto launch = [dev, operands = std::move(operands), compute = std::move(compute)](Completion done) mutable {
    std::make_shared<HostStagedKernel>(dev, std::move(operands), std::move(compute), std::move(done))->start();
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
  std::vector<HostStagedKernel::Operand> operands{{a.buffer().native_handle(), n * sizeof(T), true, in_place},
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
