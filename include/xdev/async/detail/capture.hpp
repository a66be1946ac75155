/// \file
/// The recording side of graph capture (`xdev::capture`, <xdev/any/graph.hpp>): while a thread
/// captures a stream, what that thread submits to the stream is recorded as a copyable launch
/// instead of being run, and its token completes at once. `detail::submit` and `StreamCore::wait`
/// ask `capturing(chain)` first; nothing else changes for the stream.
#pragma once

#include <xdev/backend/completion.hpp>

#include <cstddef>
#include <functional>
#include <utility>
#include <vector>

namespace xdev::detail {

class OpChain;

/// What one capture records: each launch submitted to one chain, in order.
class CaptureSink {
 public:
  explicit CaptureSink(const OpChain* chain) noexcept : chain_(chain) {}
  CaptureSink(const CaptureSink&) = delete;
  CaptureSink& operator=(const CaptureSink&) = delete;

  [[nodiscard]] const OpChain* chain() const noexcept { return chain_; }
  void record(std::function<void(Completion)> step) { steps_.push_back(std::move(step)); }
  [[nodiscard]] std::vector<std::function<void(Completion)>> take() noexcept { return std::move(steps_); }

 private:
  const OpChain* chain_;
  std::vector<std::function<void(Completion)>> steps_;
};

/// The capture the calling thread is running, if any.
inline thread_local CaptureSink* active_capture = nullptr;

/// The capture recording `chain` on this thread, or null (the common case: one thread-local load).
[[nodiscard]] inline CaptureSink* capturing(const OpChain* chain) noexcept {
  CaptureSink* s = active_capture;
  return s != nullptr && s->chain() == chain ? s : nullptr;
}

}  // namespace xdev::detail
