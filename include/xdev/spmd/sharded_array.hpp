/// \file
/// `xdev::spmd::ShardedArray<T>`: one logical array split over a mesh, one buffer per device, and
/// `spmd::empty`. The operations that place one (`mark_sharding`, `reshard`, `all_gather`,
/// `to_host`) are in `<xdev/spmd/placement.hpp>`. See docs/spmd.md.
///
///     auto xs = xdev::spmd::mark_sharding(x, vd.sharding({"data"})).get();   // 64 rows to each device
///     xs.shard(2);                      // rows 128..191, on mesh.device(2)
///     xs.shard_box(2);                  // [128:192, 0:128]
#pragma once

#include <xdev/any/any_device.hpp>
#include <xdev/core/dtype.hpp>
#include <xdev/core/error.hpp>
#include <xdev/core/shape.hpp>
#include <xdev/spmd/mesh.hpp>
#include <xdev/spmd/sharding.hpp>

#include <cstddef>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace xdev::spmd {

/// A logical array of `shape()` split over `sharding().mesh()` as `sharding().spec()` says: shard
/// `i` is a dense row-major `AnyArray<T>` on `mesh().device(i)` holding `shard_box(i)` of the
/// array (replicated dimensions whole). When a split dimension does not divide, the last shards
/// along it are shorter, or empty (`shard(i).size() == 0`); see `Sharding`. Move-only, like the arrays it owns; a
/// default-constructed one is empty (`valid()` is false).
template <class T>
class ShardedArray {
 public:
  using value_type = T;

  ShardedArray() = default;

  /// Assembles a sharded array from existing shards (for example, the outputs of per-device
  /// computation).
  /// \throws xdev::error `errc::invalid_argument` when `sharding` does not fit `shape`, when
  ///         there is not one shard per mesh device, or when a shard is on the wrong device or has
  ///         the wrong shape (each named).
  ShardedArray(Shape shape, Sharding sharding, std::vector<AnyArray<T>> shards)
      : shape_(shape), sharding_(std::move(sharding)), shards_(std::move(shards)) {
    sharding_.validate(shape_);
    const auto& mesh = sharding_.mesh();
    if (shards_.size() != mesh.size())
      throw error(errc::invalid_argument, "a sharded array over " + mesh.to_string() + " needs " +
                                              std::to_string(mesh.size()) + " shards, but " +
                                              std::to_string(shards_.size()) + " were given");
    for (std::size_t i = 0; i < shards_.size(); ++i) {
      if (shards_[i].device() != mesh.device(i))
        throw error(errc::invalid_argument, "shard " + std::to_string(i) + " is on " + describe(shards_[i].device()) +
                                                " but mesh position " + std::to_string(i) + " is " +
                                                mesh.device(i).name());
      const IndexBox box = sharding_.shard_box(shape_, i);
      if (shards_[i].shape() != box.shape())
        throw error(errc::invalid_argument, "shard " + std::to_string(i) + " on " + mesh.device(i).name() +
                                                " has shape " + to_string(shards_[i].shape()) + " but " +
                                                sharding_.to_string() + " gives it the block " + box.to_string() +
                                                " of " + to_string(shape_) + ", of shape " + to_string(box.shape()));
    }
  }

  ShardedArray(ShardedArray&&) noexcept = default;
  ShardedArray& operator=(ShardedArray&&) noexcept = default;

  /// False for a default-constructed (or moved-from) array.
  [[nodiscard]] bool valid() const noexcept { return !shards_.empty(); }
  /// The global (logical) shape.
  [[nodiscard]] const Shape& shape() const noexcept { return shape_; }
  [[nodiscard]] static constexpr DType dtype() noexcept { return dtype_of<T>; }
  /// Number of elements of the logical array.
  [[nodiscard]] std::size_t size() const noexcept { return static_cast<std::size_t>(shape_.numel()); }
  [[nodiscard]] std::size_t size_bytes() const noexcept { return size() * sizeof(T); }
  [[nodiscard]] const Sharding& sharding() const noexcept { return sharding_; }
  [[nodiscard]] const Mesh& mesh() const noexcept { return sharding_.mesh(); }

  /// Every shard, in mesh order (shard `i` on `mesh().device(i)`).
  [[nodiscard]] std::span<AnyArray<T>> shards() noexcept { return shards_; }
  [[nodiscard]] std::span<const AnyArray<T>> shards() const noexcept { return shards_; }
  /// Shard `i`. \throws xdev::error `errc::invalid_argument` when `i` is out of range.
  [[nodiscard]] AnyArray<T>& shard(std::size_t i) { return shards_[check(i)]; }
  [[nodiscard]] const AnyArray<T>& shard(std::size_t i) const { return shards_[check(i)]; }
  /// The part of the logical array shard `i` holds. \throws xdev::error as `shard`.
  [[nodiscard]] IndexBox shard_box(std::size_t i) const { return sharding_.shard_box(shape_, check(i)); }

  /// Waits for the work submitted to every shard's device (`AnyDevice::synchronize`).
  void synchronize() const {
    for (const auto& s : shards_) s.device().synchronize();
  }

 private:
  static std::string describe(const AnyDevice& d) { return d.valid() ? d.name() : std::string("no device"); }
  std::size_t check(std::size_t i) const {
    if (i >= shards_.size())
      throw error(errc::invalid_argument,
                  "shard " + std::to_string(i) + " is out of range for " + std::to_string(shards_.size()) + " shards");
    return i;
  }

  Shape shape_;
  Sharding sharding_;
  std::vector<AnyArray<T>> shards_;
};

namespace detail {

// Allocates one shard per mesh device, each of its block's shape (all or nothing: a failure frees
// the ones made).
template <class T>
std::vector<AnyArray<T>> allocate_shards(const Sharding& sharding, const Shape& shape) {
  const auto boxes = sharding.shard_boxes(shape);
  std::vector<AnyArray<T>> shards;
  shards.reserve(boxes.size());
  for (std::size_t i = 0; i < boxes.size(); ++i)
    shards.push_back(xdev::empty<T>(sharding.mesh().device(i), boxes[i].shape()));
  return shards;
}

}  // namespace detail

/// A sharded array of `shape` over `sharding`, contents unspecified: one new shard per device.
/// \throws xdev::error `errc::invalid_argument` when `sharding` does not fit `shape`;
///         `errc::out_of_memory` naming the device (every shard already made is freed).
template <class T>
[[nodiscard]] ShardedArray<T> empty(const Sharding& sharding, Shape shape) {
  sharding.validate(shape);
  auto shards = detail::allocate_shards<T>(sharding, shape);
  return ShardedArray<T>(shape, sharding, std::move(shards));
}

}  // namespace xdev::spmd
