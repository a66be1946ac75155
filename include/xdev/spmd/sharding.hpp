/// \file
/// `xdev::spmd::Sharding` (a `Mesh` plus a `PartitionSpec`: which block of an array each device
/// holds) and `xdev::spmd::IndexBox` (a block of indices). See docs/spmd.md.
///
///     xdev::spmd::Mesh mesh(devs, {2, 2}, {"data", "model"});
///     xdev::spmd::Sharding s(mesh, {"data", xdev::spmd::replicated});
///     s.shard_shape({8, 6});       // [4, 6]
///     s.shard_box({8, 6}, 2);      // [4:8, 0:6]: device 2 sits at data=1
///     s.shard_box({7, 6}, 2);      // [4:7, 0:6]: 7 rows split 4 + 3
///     s.replication_factor();      // 2: the model axis is unused, so two devices hold each block
#pragma once

#include <xdev/core/error.hpp>
#include <xdev/core/shape.hpp>
#include <xdev/spmd/mesh.hpp>
#include <xdev/spmd/partition_spec.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace xdev::spmd {

/// A rectangular block of array indices: for each dimension `d` the half-open range
/// `[begin(d), end(d))`. Stored inline, up to `Shape::max_rank` dimensions (no allocation).
///
/// Two boxes are equal when they hold the same indices: the same bounds, or both empty with the
/// same rank (so every empty result of `intersect` compares equal).
///
///     xdev::spmd::IndexBox a({0, 0}, {4, 8}), b({2, 4}, {6, 12});
///     a.intersect(b);              // [2:4, 4:8]
///     a.shape();                   // [4, 8]
///     a.contains({3, 7});          // true
class IndexBox {
 public:
  using value_type = std::int64_t;

  /// The rank-0 box: the single index of a scalar (`numel() == 1`).
  IndexBox() = default;

  /// `[begin[d], end[d])` for each dimension.
  /// \throws xdev::error `errc::invalid_argument` when the lengths differ or exceed `Shape::max_rank`,
  ///         or a bound is negative or `begin[d] > end[d]`.
  IndexBox(std::span<const value_type> begin, std::span<const value_type> end) { assign(begin, end); }
  /// \throws xdev::error as the span constructor.
  IndexBox(std::initializer_list<value_type> begin, std::initializer_list<value_type> end) {
    assign(std::span<const value_type>(begin.begin(), begin.size()),
           std::span<const value_type>(end.begin(), end.size()));
  }

  /// Number of dimensions.
  [[nodiscard]] std::size_t rank() const noexcept { return rank_; }
  /// First index of dimension `d`. \throws xdev::error `errc::invalid_argument` when `d >= rank()`.
  [[nodiscard]] value_type begin(std::size_t d) const { return begin_[check(d)]; }
  /// One past the last index of dimension `d`. \throws xdev::error as `begin(d)`.
  [[nodiscard]] value_type end(std::size_t d) const { return end_[check(d)]; }
  /// `end(d) - begin(d)`. \throws xdev::error as `begin(d)`.
  [[nodiscard]] value_type extent(std::size_t d) const { return end_[check(d)] - begin_[d]; }
  /// Every dimension's first index.
  [[nodiscard]] std::span<const value_type> begins() const noexcept { return {begin_.data(), rank_}; }
  /// Every dimension's end.
  [[nodiscard]] std::span<const value_type> ends() const noexcept { return {end_.data(), rank_}; }

  /// The extents as a shape: the shape of a dense buffer holding exactly this box.
  [[nodiscard]] Shape shape() const {
    std::array<value_type, Shape::max_rank> ext{};
    for (std::size_t d = 0; d < rank_; ++d) ext[d] = end_[d] - begin_[d];
    return Shape(std::span<const value_type>(ext.data(), rank_));
  }
  /// Number of indices in the box (1 for rank 0).
  [[nodiscard]] value_type numel() const noexcept {
    value_type n = 1;
    for (std::size_t d = 0; d < rank_; ++d) n *= end_[d] - begin_[d];
    return n;
  }
  /// True when the box holds no index (some extent is 0).
  [[nodiscard]] bool empty() const noexcept { return numel() == 0; }

  /// The indices in both boxes; an empty box (of the same rank) when they are disjoint.
  /// \throws xdev::error `errc::invalid_argument` when the ranks differ.
  [[nodiscard]] IndexBox intersect(const IndexBox& other) const {
    check_rank(other, "intersect");
    IndexBox out;
    out.rank_ = rank_;
    for (std::size_t d = 0; d < rank_; ++d) {
      out.begin_[d] = std::max(begin_[d], other.begin_[d]);
      out.end_[d] = std::max(out.begin_[d], std::min(end_[d], other.end_[d]));
    }
    return out;
  }

  /// True when every index of `other` is in this box (always, for an empty `other`).
  /// \throws xdev::error `errc::invalid_argument` when the ranks differ.
  [[nodiscard]] bool contains(const IndexBox& other) const {
    check_rank(other, "contains");
    if (other.empty()) return true;
    for (std::size_t d = 0; d < rank_; ++d)
      if (other.begin_[d] < begin_[d] || end_[d] < other.end_[d]) return false;
    return true;
  }
  /// True when the index `point` (one entry per dimension) is in the box.
  /// \throws xdev::error `errc::invalid_argument` when `point` has the wrong length.
  [[nodiscard]] bool contains(std::span<const value_type> point) const {
    if (point.size() != rank_)
      throw error(errc::invalid_argument, "index of " + std::to_string(point.size()) + " entries tested against box " +
                                              to_string() + " of rank " + std::to_string(rank_));
    for (std::size_t d = 0; d < rank_; ++d)
      if (point[d] < begin_[d] || end_[d] <= point[d]) return false;
    return true;
  }
  /// \throws xdev::error as the span overload.
  [[nodiscard]] bool contains(std::initializer_list<value_type> point) const {
    return contains(std::span<const value_type>(point.begin(), point.size()));
  }

  /// "[0:4, 0:8]"; "[]" for rank 0.
  [[nodiscard]] std::string to_string() const {
    std::string out = "[";
    for (std::size_t d = 0; d < rank_; ++d)
      out += (d ? ", " : "") + std::to_string(begin_[d]) + ":" + std::to_string(end_[d]);
    return out + "]";
  }
  friend std::ostream& operator<<(std::ostream& os, const IndexBox& b) { return os << b.to_string(); }

  friend bool operator==(const IndexBox& a, const IndexBox& b) noexcept {
    if (a.rank_ != b.rank_) return false;
    if (a.empty() || b.empty()) return a.empty() && b.empty();
    return std::equal(a.begin_.begin(), a.begin_.begin() + a.rank_, b.begin_.begin()) &&
           std::equal(a.end_.begin(), a.end_.begin() + a.rank_, b.end_.begin());
  }

 private:
  void assign(std::span<const value_type> begin, std::span<const value_type> end) {
    if (begin.size() != end.size())
      throw error(errc::invalid_argument, "index box has " + std::to_string(begin.size()) + " begins but " +
                                              std::to_string(end.size()) + " ends");
    if (begin.size() > Shape::max_rank)
      throw error(errc::invalid_argument, "index box of rank " + std::to_string(begin.size()) +
                                              " exceeds the maximum rank " + std::to_string(Shape::max_rank));
    for (std::size_t d = 0; d < begin.size(); ++d)
      if (begin[d] < 0 || begin[d] > end[d])
        throw error(errc::invalid_argument, "index box range " + std::to_string(begin[d]) + ":" +
                                                std::to_string(end[d]) + " in dimension " + std::to_string(d) +
                                                " is invalid; it needs 0 <= begin <= end");
    std::copy(begin.begin(), begin.end(), begin_.begin());
    std::copy(end.begin(), end.end(), end_.begin());
    rank_ = begin.size();
  }
  std::size_t check(std::size_t d) const {
    if (d >= rank_)
      throw error(errc::invalid_argument, "dimension " + std::to_string(d) + " is out of range for index box " +
                                              to_string() + " of rank " + std::to_string(rank_));
    return d;
  }
  void check_rank(const IndexBox& other, const char* what) const {
    if (other.rank_ != rank_)
      throw error(errc::invalid_argument, std::string("IndexBox::") + what + " of boxes of different ranks: " +
                                              to_string() + " and " + other.to_string());
  }

  std::array<value_type, Shape::max_rank> begin_{};
  std::array<value_type, Shape::max_rank> end_{};
  std::size_t rank_ = 0;
};

/// A `Mesh` with a `PartitionSpec`: which block of a global array each device of the mesh holds.
///
/// Rule (as JAX places an uneven array): dimension `d` of extent `n`, split over axes
/// `(a1, a2, ...)`, is cut into `k = size(a1) * size(a2) * ...` blocks of `ceil(n / k)` indices;
/// the last blocks are shorter, or empty, when `k` does not divide `n` (10 rows over 4 devices:
/// 3, 3, 3, 1; 5 rows over 4: 2, 2, 1, 0). Nothing is padded: a shard holds exactly its block,
/// so the logical shape is kept and the bytes placed equal the array's size. A device's block
/// along `d` is the row-major index of its coordinates on `(a1, a2, ...)`, `a1` outermost, like
/// JAX. Dimensions the spec leaves out or marks replicated are held whole, and so are the spec's
/// trailing dimensions past its length: `('data',)` on a rank-2 array equals `('data', None)`.
/// Devices that differ only along axes the spec does not use hold the same block.
///
///     // 2x2 mesh over ("x", "y"), devices d0 d1 d2 d3 at (0,0) (0,1) (1,0) (1,1):
///     Sharding s(mesh, {{"x", "y"}, replicated});
///     s.shard_box({8, 2}, 1);      // [2:4, 0:2]: index x*2 + y = 1
///     Sharding t(mesh, {"y", "x"});
///     t.shard_box({4, 4}, 1);      // [2:4, 0:2]: y=1 picks the row block, x=0 the column block
///     s.shard_box({7, 2}, 3);      // [6:7, 0:2]: blocks of 2 rows, the last one shorter
class Sharding {
 public:
  /// A sharding over no devices: what a default-constructed or moved-from `ShardedArray` holds.
  /// Only assignment, comparison and `to_string` are meaningful on it; asking for a device's box
  /// throws, as for any position outside the mesh.
  Sharding() = default;

  /// \throws xdev::error `errc::invalid_argument` when the mesh is empty or the spec uses an axis
  ///         the mesh does not have (the message names it and lists the mesh's axes).
  Sharding(Mesh mesh, PartitionSpec spec) : mesh_(std::move(mesh)), spec_(std::move(spec)) {
    if (mesh_.empty())
      throw error(errc::invalid_argument, "a Sharding needs a non-empty mesh; spec " + spec_.to_string());
    dim_axes_.reserve(spec_.size());
    for (const auto& axes : spec_.dims()) {
      std::vector<std::size_t> indices;
      for (const auto& name : axes) {
        if (!mesh_.has_axis(name)) {
          std::string known;
          for (const auto& n : mesh_.axis_names()) known += (known.empty() ? "'" : ", '") + n + "'";
          throw error(errc::invalid_argument, "PartitionSpec " + spec_.to_string() + " uses axis '" + name +
                                                  "', which the mesh does not have; the mesh's axes are " + known +
                                                  " (" + mesh_.to_string() + ")");
        }
        indices.push_back(mesh_.axis_index(name));
      }
      dim_axes_.push_back(std::move(indices));
    }
  }

  /// The devices the array is spread over.
  [[nodiscard]] const Mesh& mesh() const noexcept { return mesh_; }
  /// How each array dimension maps to mesh axes.
  [[nodiscard]] const PartitionSpec& spec() const noexcept { return spec_; }

  /// Checks that an array of shape `global` can be placed with this sharding: the spec must not
  /// have more dimensions than the array. (Any extent splits; see the class comment.)
  /// \throws xdev::error `errc::invalid_argument`, naming the sharding and the shape ("rank
  ///         mismatch: spec ('a', None, None) has 3 dimensions but the array [8, 4] has rank 2").
  void validate(const Shape& global) const {
    if (spec_.size() > global.rank())
      throw error(errc::invalid_argument, "rank mismatch: spec " + spec_.to_string() + " has " +
                                              std::to_string(spec_.size()) + " dimensions but the array " +
                                              xdev::to_string(global) + " has rank " + std::to_string(global.rank()) +
                                              " (" + to_string() + ")");
  }

  /// True when every split dimension of `global` divides by its number of blocks, so that every
  /// device holds a block of the same shape.
  /// \throws xdev::error as `validate(global)`.
  [[nodiscard]] bool is_even(const Shape& global) const {
    validate(global);
    for (std::size_t d = 0; d < spec_.size(); ++d)
      if (global[static_cast<std::ptrdiff_t>(d)] % shard_count(d) != 0) return false;
    return true;
  }

  /// Number of blocks dimension `dim` is cut into: the product of its axes' sizes; 1 when it is
  /// replicated or past the spec's length.
  [[nodiscard]] std::int64_t shard_count(std::size_t dim) const noexcept {
    if (dim >= dim_axes_.size()) return 1;
    std::int64_t n = 1;
    for (const std::size_t a : dim_axes_[dim]) n *= mesh_.shape()[a];
    return n;
  }

  /// Which block of dimension `dim` mesh device `device` holds: the row-major index of its
  /// coordinates on the dimension's axes (outermost first); 0 for an unsplit dimension.
  /// \throws xdev::error `errc::invalid_argument` when `device >= mesh().size()`.
  [[nodiscard]] std::int64_t shard_index(std::size_t device, std::size_t dim) const {
    return block_index(mesh_.coords(device), dim);
  }

  /// The block of an array of shape `global` that mesh device `device` (flat, row-major) holds
  /// (possibly shorter than the others, or empty, when a split dimension does not divide).
  /// \throws xdev::error as `validate(global)`, or `errc::invalid_argument` when
  ///         `device >= mesh().size()`.
  [[nodiscard]] IndexBox shard_box(const Shape& global, std::size_t device) const {
    validate(global);
    return box_of(global, mesh_.coords(device));
  }

  /// `shard_box(global, i)` for every mesh device `i`, in mesh order.
  /// \throws xdev::error as `validate(global)`.
  [[nodiscard]] std::vector<IndexBox> shard_boxes(const Shape& global) const {
    validate(global);
    std::vector<IndexBox> out;
    out.reserve(mesh_.size());
    for (std::size_t i = 0; i < mesh_.size(); ++i) out.push_back(box_of(global, mesh_.coords(i)));
    return out;
  }

  /// Shape of every device's block, when they all have the same shape (`is_even(global)`).
  /// \throws xdev::error as `validate(global)`, and `errc::invalid_argument` naming the first
  ///         dimension that does not divide when the blocks differ (use `shard_shape(global, i)`).
  [[nodiscard]] Shape shard_shape(const Shape& global) const {
    validate(global);
    Shape out = global;
    for (std::size_t d = 0; d < spec_.size(); ++d) {
      const auto extent = global[static_cast<std::ptrdiff_t>(d)];
      if (extent % shard_count(d) != 0)
        throw error(errc::invalid_argument,
                    "the shards of " + xdev::to_string(global) + " differ in shape: dimension " + std::to_string(d) +
                        " of extent " + std::to_string(extent) + " is split into " + std::to_string(shard_count(d)) +
                        " blocks of at most " + std::to_string(block_length(extent, d)) +
                        "; ask shard_shape(global, device) for one device's (" + to_string() + ")");
      out[static_cast<std::ptrdiff_t>(d)] = extent / shard_count(d);
    }
    return out;
  }

  /// Shape of mesh device `device`'s block: `shard_box(global, device).shape()`.
  /// \throws xdev::error as `shard_box`.
  [[nodiscard]] Shape shard_shape(const Shape& global, std::size_t device) const {
    return shard_box(global, device).shape();
  }

  /// True when every device holds the whole array: the spec uses no axis of size above 1.
  [[nodiscard]] bool is_fully_replicated() const noexcept { return replication_factor() == mesh_.size(); }

  /// How many devices hold each element: the product of the sizes of the mesh axes the spec does
  /// not use (1 for a tiled sharding that uses every axis).
  [[nodiscard]] std::size_t replication_factor() const noexcept {
    std::int64_t n = 1;
    for (std::size_t a = 0; a < mesh_.ndim(); ++a)
      if (!spec_.uses(mesh_.axis_names()[a])) n *= mesh_.shape()[a];
    return static_cast<std::size_t>(n);
  }

  /// "Sharding(Mesh(data=4: HOST:0 HOST:1 HOST:2 HOST:3), ('data', None))".
  [[nodiscard]] std::string to_string() const {
    return "Sharding(" + mesh_.to_string() + ", " + spec_.to_string() + ")";
  }
  friend std::ostream& operator<<(std::ostream& os, const Sharding& s) { return os << s.to_string(); }

  /// Same mesh and same spec. (`('data',)` and `('data', None)` compare unequal although they
  /// place a rank-2 array alike.)
  friend bool operator==(const Sharding& a, const Sharding& b) noexcept {
    return a.mesh_ == b.mesh_ && a.spec_ == b.spec_;
  }

 private:
  std::int64_t block_index(const std::vector<std::int64_t>& coords, std::size_t dim) const {
    if (dim >= dim_axes_.size()) return 0;
    std::int64_t idx = 0;
    for (auto a : dim_axes_[dim]) idx = idx * mesh_.shape()[a] + coords[a];
    return idx;
  }
  // Indices per block of dimension `dim` of extent `extent`: ceil(extent / blocks).
  std::int64_t block_length(std::int64_t extent, std::size_t dim) const noexcept {
    const auto blocks = shard_count(dim);
    return (extent + blocks - 1) / blocks;
  }
  // Assumes validate(global) passed.
  IndexBox box_of(const Shape& global, const std::vector<std::int64_t>& coords) const {
    std::array<std::int64_t, Shape::max_rank> lo{}, hi{};
    for (std::size_t d = 0; d < global.rank(); ++d) {
      const auto extent = global[static_cast<std::ptrdiff_t>(d)];
      const auto block = block_length(extent, d);
      lo[d] = std::min(block_index(coords, d) * block, extent);
      hi[d] = std::min(lo[d] + block, extent);
    }
    return IndexBox(std::span<const std::int64_t>(lo.data(), global.rank()),
                    std::span<const std::int64_t>(hi.data(), global.rank()));
  }

  Mesh mesh_;
  PartitionSpec spec_;
  std::vector<std::vector<std::size_t>> dim_axes_;  // mesh axis indices of each spec dimension
};

namespace detail {

/// The box of a whole array of shape `global`: `[0:e0, 0:e1, ...]`.
inline IndexBox full_box(const Shape& global) {
  std::array<std::int64_t, Shape::max_rank> zeros{};
  return IndexBox(std::span<const std::int64_t>(zeros.data(), global.rank()), global.extents());
}

/// Splits the copy of `region` between two dense row-major buffers, one holding exactly `src_box`
/// and one exactly `dst_box`, into maximal contiguous runs, and calls
/// `f(std::size_t src_offset, std::size_t dst_offset, std::size_t count)` for each (in elements),
/// in increasing `dst_offset` order. Trailing dimensions that `region`, `src_box` and `dst_box`
/// all cover whole merge into one run, so whole consecutive rows copy as one run; nothing is
/// called for an empty region.
/// \throws xdev::error `errc::invalid_argument` when the ranks differ or `region` is not inside
///         both boxes.
///
///     // Column block [0:4, 2:4] of a [4, 4] host array into a [4, 2] shard: four runs of 2.
///     for_each_run(IndexBox({0, 2}, {4, 4}), full_box({4, 4}), IndexBox({0, 2}, {4, 4}),
///                  [](std::size_t s, std::size_t d, std::size_t n) { /* (2,0,2) (6,2,2) ... */ });
template <class F>
void for_each_run(const IndexBox& region, const IndexBox& src_box, const IndexBox& dst_box, F&& f) {
  if (!src_box.contains(region) || !dst_box.contains(region))
    throw error(errc::invalid_argument, "copy region " + region.to_string() + " is not inside both the source box " +
                                            src_box.to_string() + " and the destination box " + dst_box.to_string());
  if (region.empty()) return;
  const std::size_t rank = region.rank();
  if (rank == 0) {
    f(std::size_t{0}, std::size_t{0}, std::size_t{1});
    return;
  }
  const auto ext = [](const IndexBox& b, std::size_t d) { return static_cast<std::size_t>(b.extent(d)); };

  std::array<std::size_t, Shape::max_rank> src_stride{}, dst_stride{};
  src_stride[rank - 1] = dst_stride[rank - 1] = 1;
  for (std::size_t d = rank - 1; d > 0; --d) {
    src_stride[d - 1] = src_stride[d] * ext(src_box, d);
    dst_stride[d - 1] = dst_stride[d] * ext(dst_box, d);
  }

  // Dimension `inner` and everything inside it form one run; a dimension can join only when the
  // ones inside it are whole in all three boxes, otherwise the next row starts elsewhere.
  std::size_t inner = rank - 1;
  std::size_t count = ext(region, inner);
  while (inner > 0 && ext(region, inner) == ext(src_box, inner) && ext(region, inner) == ext(dst_box, inner)) {
    --inner;
    count *= ext(region, inner);
  }

  std::size_t src_off = 0, dst_off = 0;
  for (std::size_t d = 0; d < rank; ++d) {
    src_off += static_cast<std::size_t>(region.begin(d) - src_box.begin(d)) * src_stride[d];
    dst_off += static_cast<std::size_t>(region.begin(d) - dst_box.begin(d)) * dst_stride[d];
  }

  // Odometer over the dimensions outside the run, last fastest, so both offsets only grow.
  std::array<std::size_t, Shape::max_rank> idx{};
  for (;;) {
    f(src_off, dst_off, count);
    std::size_t d = inner;
    for (;;) {
      if (d == 0) return;
      --d;
      if (++idx[d] < ext(region, d)) {
        src_off += src_stride[d];
        dst_off += dst_stride[d];
        break;
      }
      src_off -= (idx[d] - 1) * src_stride[d];
      dst_off -= (idx[d] - 1) * dst_stride[d];
      idx[d] = 0;
    }
  }
}

}  // namespace detail

}  // namespace xdev::spmd
