/// \file
/// `xdev::random::GeneratorState`: a device's position in its default random stream.
#pragma once

#include <cstdint>
#include <mutex>
#include <utility>

namespace xdev::random {

/// Seed and offset of a device's default stream. Each random op reserves the raw outputs it
/// consumes, so successive ops continue the stream where the previous one stopped, in submission
/// order, whichever thread submits. `manual_seed` starts a new stream at offset 0.
class GeneratorState {
 public:
  /// The seed a device starts with.
  static constexpr std::uint64_t default_seed = 0;

  /// Returns the (seed, offset) to use for `raw_outputs` outputs and advances the offset past them.
  std::pair<std::uint64_t, std::uint64_t> reserve(std::uint64_t raw_outputs) {
    std::lock_guard lk(m_);
    const std::uint64_t at = offset_;
    offset_ += raw_outputs;
    return {seed_, at};
  }

  void manual_seed(std::uint64_t seed) {
    std::lock_guard lk(m_);
    seed_ = seed;
    offset_ = 0;
  }

  [[nodiscard]] std::uint64_t seed() const {
    std::lock_guard lk(m_);
    return seed_;
  }
  [[nodiscard]] std::uint64_t offset() const {
    std::lock_guard lk(m_);
    return offset_;
  }

 private:
  mutable std::mutex m_;
  std::uint64_t seed_ = default_seed;
  std::uint64_t offset_ = 0;
};

}  // namespace xdev::random
