/// \file
/// Internal: `SinkSlot`, a replaceable callback that any thread may call while another replaces
/// it (xdev's log sink and the plugin loader's diagnostic sink).
#pragma once

#include <memory>
#include <mutex>
#include <utility>

namespace xdev::detail {

/// Holds a callable of type `Fn` (a `std::function`); empty means "the default". A caller takes a
/// reference to the one installed (`get`) and calls it outside the lock, so a callback may itself
/// replace the slot or write to it, and a replaced callback stays alive until its last call
/// returns. Meant to live in a function-local static that is never destroyed.
template <class Fn>
class SinkSlot {
 public:
  /// Installs `next` (empty: the default) and returns the previous one (empty when it was the
  /// default).
  Fn exchange(Fn next) {
    auto held = next ? std::make_shared<const Fn>(std::move(next)) : nullptr;
    std::shared_ptr<const Fn> previous;
    {
      std::lock_guard lock(m_);
      previous = std::exchange(fn_, std::move(held));
    }
    return previous ? *previous : Fn{};
  }
  /// The installed callable, or null for the default.
  [[nodiscard]] std::shared_ptr<const Fn> get() const {
    std::lock_guard lock(m_);
    return fn_;
  }

 private:
  mutable std::mutex m_;
  std::shared_ptr<const Fn> fn_;
};

}  // namespace xdev::detail
