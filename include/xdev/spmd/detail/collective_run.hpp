/// \file
/// The step programs of the collectives (ring and direct) on top of `CollectiveDriver`. Internal
/// to <xdev/spmd/collectives.hpp>; the algorithms are described there.
#pragma once

#include <xdev/any/any_device.hpp>
#include <xdev/core/shape.hpp>
#include <xdev/ops/elementwise.hpp>
#include <xdev/ops/op_args.hpp>
#include <xdev/spmd/detail/collective_driver.hpp>
#include <xdev/spmd/detail/copy.hpp>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace xdev::spmd::detail {

enum class CollectiveKind : std::uint8_t { all_reduce, all_gather, reduce_scatter, broadcast };

/// One array of a collective as captured by the call: where its elements live, and how many.
struct ArrayRef {
  AnyDevice device;
  xdev::detail::erased_handle handle;
  std::size_t count = 0;
};

/// What a collective does, validated and resolved (groups, algorithm) by its public function.
struct CollectivePlan {
  CollectiveKind kind = CollectiveKind::all_reduce;
  bool ring = true;
  ops::BinaryOp combine = ops::BinaryOp::add;
  bool mean = false;
  std::size_t root = 0;  ///< broadcast: the root's position in its group
  std::string what;      ///< "all_reduce over axis 'data'", for messages
  std::vector<std::vector<std::size_t>> groups;
  std::vector<ArrayRef> in;   ///< per mesh device; the arrays of all_reduce and broadcast
  std::vector<ArrayRef> out;  ///< per mesh device; all_gather and reduce_scatter only
};

/// `[offset, offset + length)` of chunk `c` when `n` elements are cut into `k` chunks whose
/// lengths differ by at most one (the first `n % k` chunks are one longer).
struct Chunk {
  std::size_t offset;
  std::size_t length;
};
inline Chunk chunk_of(std::size_t n, std::size_t k, std::size_t c) noexcept {
  const std::size_t q = n / k, r = n % k;
  return {c * q + (c < r ? c : r), q + (c < r ? 1 : 0)};
}

/// A collective over arrays of `T`: one participant per mesh device (its flat index), each with
/// the step program of its algorithm (see collectives.hpp for the algorithms and their costs).
template <class T>
class CollectiveRun final : public CollectiveDriver {
 public:
  explicit CollectiveRun(CollectivePlan plan)
      : CollectiveDriver(plan.what, devices_of(plan), steps_of(plan)), plan_(std::move(plan)) {
    const std::size_t n = plan_.in.size();
    group_of_.resize(n);
    rank_of_.resize(n);
    temps_.resize(n);
    for (std::size_t g = 0; g < plan_.groups.size(); ++g)
      for (std::size_t r = 0; r < plan_.groups[g].size(); ++r) {
        group_of_[plan_.groups[g][r]] = g;
        rank_of_[plan_.groups[g][r]] = r;
      }
  }

 private:
  // Names of temporaries, with an index: L and R (own and received chunk of a ring step, indexed
  // by their length), P (a ring reduce-scatter's partial result after step t), X (direct: the
  // copy of group member q's data).
  enum Tag : int { tag_own, tag_received, tag_partial, tag_member };

  struct Temp {
    Tag tag;
    std::size_t index;
    AnyArray<T> array;
  };

  // A place in device memory: the source or destination of a region copy.
  struct Loc {
    AnyDevice device;
    xdev::detail::erased_handle handle;
  };

  static std::vector<AnyDevice> devices_of(const CollectivePlan& pl) {
    std::vector<AnyDevice> out;
    for (const auto& a : pl.in) out.push_back(a.device);
    return out;
  }

  static std::vector<std::size_t> steps_of(const CollectivePlan& pl) {
    std::vector<std::size_t> out(pl.in.size(), 1);
    for (const auto& g : pl.groups) {
      const std::size_t k = g.size();
      for (std::size_t r = 0; r < k; ++r) {
        std::size_t steps = 1;  // the arrival
        switch (pl.kind) {
          case CollectiveKind::all_reduce:
            if (k > 1) steps += pl.ring ? 2 * (k - 1) : 2;
            break;
          case CollectiveKind::all_gather:
          case CollectiveKind::reduce_scatter:
            steps += pl.ring && k > 1 ? k - 1 : 1;
            break;
          case CollectiveKind::broadcast:
            if (k > 1 && r != pl.root) steps += pl.ring ? k : 1;
            break;
        }
        out[g[r]] = steps;
      }
    }
    return out;
  }

  [[nodiscard]] std::size_t k_of(std::size_t p) const { return plan_.groups[group_of_[p]].size(); }
  [[nodiscard]] std::size_t member(std::size_t p, std::size_t rank) const {
    return plan_.groups[group_of_[p]][rank % k_of(p)];
  }
  [[nodiscard]] std::size_t pred(std::size_t p) const { return member(p, rank_of_[p] + k_of(p) - 1); }

  void deps(std::size_t p, std::size_t s, std::vector<StepRef>& out) const override {
    const std::size_t k = k_of(p), r = rank_of_[p];
    auto every_peer = [&](std::size_t step) {
      for (std::size_t q = 0; q < k; ++q)
        if (q != r) out.push_back({member(p, q), step});
    };
    switch (plan_.kind) {
      case CollectiveKind::all_reduce:
        if (plan_.ring)
          out.push_back({pred(p), s - 1});
        else
          every_peer(s - 1);  // step 2 writes the result back only once every peer has read ours
        break;
      case CollectiveKind::all_gather:
      case CollectiveKind::reduce_scatter:
        if (k == 1) break;
        if (plan_.ring)
          out.push_back({pred(p), s - 1});
        else
          every_peer(0);
        break;
      case CollectiveKind::broadcast: {
        const std::size_t root = member(p, plan_.root);
        if (plan_.ring && pred(p) != root)
          out.push_back({pred(p), s});  // the chunk our predecessor received in its step s
        else
          out.push_back({root, 0});
        break;
      }
    }
  }

  void run_step(std::size_t p, std::size_t s) override {
    switch (plan_.kind) {
      case CollectiveKind::all_reduce:
        return plan_.ring ? ring_all_reduce(p, s) : direct_all_reduce(p, s);
      case CollectiveKind::all_gather:
        return plan_.ring ? ring_all_gather(p, s) : direct_all_gather(p);
      case CollectiveKind::reduce_scatter:
        return plan_.ring ? ring_reduce_scatter(p, s) : direct_reduce_scatter(p);
      case CollectiveKind::broadcast:
        return plan_.ring ? ring_broadcast(p, s) : direct_broadcast(p);
    }
  }

  void release_temporaries() noexcept override {
    for (auto& t : temps_) t.clear();
  }

  // ---- helpers ---------------------------------------------------------------------------------

  // The temporary `tag`/`index` of participant `p`, allocated with `length` elements on first use.
  AnyArray<T>& temp(std::size_t p, Tag tag, std::size_t index, std::size_t length) {
    for (auto& t : temps_[p])
      if (t.tag == tag && t.index == index) return t.array;
    temps_[p].push_back(Temp{tag, index, xdev::empty<T>(devices()[p], Shape{static_cast<Shape::value_type>(length)})});
    return temps_[p].back().array;
  }

  static Loc loc(const ArrayRef& a) { return {a.device, a.handle}; }
  static Loc loc(const AnyArray<T>& a) { return {a.device(), a.buffer().native_handle()}; }

  // `n` elements from `src` at element `si` to `dst` at element `di`.
  static CopyRegion region(const Loc& src, std::size_t si, const Loc& dst, std::size_t di, std::size_t n) {
    return {src.device, src.handle, si * sizeof(T), dst.device, dst.handle, di * sizeof(T), n * sizeof(T)};
  }

  void copies(std::size_t p, std::size_t s, std::vector<CopyRegion> regions) {
    submit_copies(devices()[p], std::move(regions), token(p, s));
  }
  void combine(std::size_t p, std::size_t s, const AnyArray<T>& a, const AnyArray<T>& b, AnyArray<T>& out) {
    ops::combine(devices()[p], plan_.combine, a, b, out, token(p, s));
  }
  void scale_for_mean(std::size_t p, std::size_t s, AnyArray<T>& x) {
    if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, f16> || std::is_same_v<T, bf16>) {
      const std::size_t k = k_of(p);
      if (!plan_.mean || k == 1) return;
      T alpha;
      if constexpr (std::is_same_v<T, double>)
        alpha = 1.0 / static_cast<double>(k);
      else
        alpha = T(static_cast<float>(1.0 / static_cast<double>(k)));
      ops::scale(devices()[p], x, alpha, token(p, s));
    }
  }

  // ---- all_reduce --------------------------------------------------------------------------------

  // Steps 1..k-1 reduce-scatter: rank r combines chunk (r - t - 2) mod k, t = s - 1, of its own
  // array with the partial its predecessor finished in step s-1, in place; after step k-1 it owns
  // the reduced chunk r. Steps k..2k-2 all-gather: rank r copies chunk (r - 1 - t) mod k, t = s - k,
  // from its predecessor's array into its own.
  void ring_all_reduce(std::size_t p, std::size_t s) {
    const std::size_t k = k_of(p), r = rank_of_[p], n = plan_.in[p].count;
    const ArrayRef& mine = plan_.in[p];
    const ArrayRef& theirs = plan_.in[pred(p)];
    if (s <= k - 1) {
      const std::size_t t = s - 1;
      const Chunk c = chunk_of(n, k, (r + 2 * k - t - 2) % k);
      // An empty chunk still submits an (empty) operation: dependents rely on "step s has
      // completed" meaning "everything before it on this device has completed".
      if (c.length == 0) return copies(p, s, {});
      auto& own_chunk = temp(p, tag_own, c.length, c.length);
      auto& got = temp(p, tag_received, c.length, c.length);
      copies(p, s,
             {region(loc(theirs), c.offset, loc(got), 0, c.length),
              region(loc(mine), c.offset, loc(own_chunk), 0, c.length)});
      combine(p, s, own_chunk, got, own_chunk);
      if (t == k - 2) scale_for_mean(p, s, own_chunk);
      copies(p, s, {region(loc(own_chunk), 0, loc(mine), c.offset, c.length)});
    } else {
      const std::size_t t = s - k;
      const Chunk c = chunk_of(n, k, (r + 2 * k - 1 - t) % k);
      copies(p, s, {region(loc(theirs), c.offset, loc(mine), c.offset, c.length)});
    }
  }

  // Step 1: copy every member's array (own included) into X[q], and combine them in group order
  // into X[0], so every member computes bit-identical results. Step 2, once every peer has
  // finished its step 1 (has read our array): X[0] back into our array.
  void direct_all_reduce(std::size_t p, std::size_t s) {
    const std::size_t k = k_of(p), n = plan_.in[p].count;
    if (s == 1) {
      std::vector<CopyRegion> regions;
      for (std::size_t q = 0; q < k; ++q)
        regions.push_back(region(loc(plan_.in[member(p, q)]), 0, loc(temp(p, tag_member, q, n)), 0, n));
      copies(p, s, std::move(regions));
      auto& acc = temp(p, tag_member, 0, n);
      for (std::size_t q = 1; q < k; ++q) combine(p, s, acc, temp(p, tag_member, q, n), acc);
      scale_for_mean(p, s, acc);
    } else {
      copies(p, s, {region(loc(temp(p, tag_member, 0, n)), 0, loc(plan_.in[p]), 0, n)});
    }
  }

  // ---- all_gather --------------------------------------------------------------------------------

  // Step 1 also copies our own input into block r. Step s = t + 1 copies block (r - 1 - t) mod k
  // from the predecessor: from its input when t = 0 (its own block), else from its output.
  void ring_all_gather(std::size_t p, std::size_t s) {
    const std::size_t k = k_of(p), r = rank_of_[p], b = plan_.in[p].count;
    std::vector<CopyRegion> regions;
    if (s == 1) regions.push_back(region(loc(plan_.in[p]), 0, loc(plan_.out[p]), r * b, b));
    if (k > 1) {
      const std::size_t t = s - 1, blk = (r + 2 * k - 1 - t) % k;
      if (t == 0)
        regions.push_back(region(loc(plan_.in[pred(p)]), 0, loc(plan_.out[p]), blk * b, b));
      else
        regions.push_back(region(loc(plan_.out[pred(p)]), blk * b, loc(plan_.out[p]), blk * b, b));
    }
    copies(p, s, std::move(regions));
  }

  void direct_all_gather(std::size_t p) {
    const std::size_t k = k_of(p), b = plan_.in[p].count;
    std::vector<CopyRegion> regions;
    for (std::size_t q = 0; q < k; ++q)
      regions.push_back(region(loc(plan_.in[member(p, q)]), 0, loc(plan_.out[p]), q * b, b));
    copies(p, 1, std::move(regions));
  }

  // ---- reduce_scatter ----------------------------------------------------------------------------

  // As the reduce-scatter half of ring_all_reduce, but the inputs are read-only: rank r's partial
  // after step s lives in its temporary P[s] (read by its successor in step s+1, so each is
  // written once), and the last step combines into L and copies L into the output.
  void ring_reduce_scatter(std::size_t p, std::size_t s) {
    const std::size_t k = k_of(p), r = rank_of_[p], b = plan_.out[p].count;
    if (k == 1) return copies(p, s, {region(loc(plan_.in[p]), 0, loc(plan_.out[p]), 0, b)});
    const std::size_t t = s - 1, blk = (r + 2 * k - t - 2) % k;
    auto& own_block = temp(p, tag_own, 0, b);
    auto& got = temp(p, tag_received, 0, b);
    const Loc from = t == 0 ? loc(plan_.in[pred(p)]) : loc(partial_of(pred(p), t - 1));
    const std::size_t from_at = t == 0 ? blk * b : 0;
    copies(p, s, {region(from, from_at, loc(got), 0, b), region(loc(plan_.in[p]), blk * b, loc(own_block), 0, b)});
    if (t + 2 < k) {
      combine(p, s, own_block, got, temp(p, tag_partial, t, b));
    } else {
      combine(p, s, own_block, got, own_block);
      scale_for_mean(p, s, own_block);
      copies(p, s, {region(loc(own_block), 0, loc(plan_.out[p]), 0, b)});
    }
  }

  // Participant q's partial after reduce-scatter step t (it exists: step t has completed).
  AnyArray<T>& partial_of(std::size_t q, std::size_t t) {
    for (auto& tmp : temps_[q])
      if (tmp.tag == tag_partial && tmp.index == t) return tmp.array;
    throw error(errc::internal,
                "the partial result of step " + std::to_string(t + 1) + " on " + devices()[q].name() + " is missing");
  }

  // Copies block r of every member's input into X[q] and combines them in group order.
  void direct_reduce_scatter(std::size_t p) {
    const std::size_t k = k_of(p), r = rank_of_[p], b = plan_.out[p].count;
    std::vector<CopyRegion> regions;
    for (std::size_t q = 0; q < k; ++q)
      regions.push_back(region(loc(plan_.in[member(p, q)]), r * b, loc(temp(p, tag_member, q, b)), 0, b));
    copies(p, 1, std::move(regions));
    auto& acc = temp(p, tag_member, 0, b);
    for (std::size_t q = 1; q < k; ++q) combine(p, 1, acc, temp(p, tag_member, q, b), acc);
    scale_for_mean(p, 1, acc);
    copies(p, 1, {region(loc(acc), 0, loc(plan_.out[p]), 0, b)});
  }

  // ---- broadcast ---------------------------------------------------------------------------------

  // A pipelined chain root → root+1 → ...: step i copies chunk i-1 (of k) from the predecessor.
  void ring_broadcast(std::size_t p, std::size_t s) {
    const std::size_t k = k_of(p), n = plan_.in[p].count;
    const Chunk c = chunk_of(n, k, s - 1);
    copies(p, s, {region(loc(plan_.in[pred(p)]), c.offset, loc(plan_.in[p]), c.offset, c.length)});
  }

  void direct_broadcast(std::size_t p) {
    const std::size_t n = plan_.in[p].count;
    copies(p, 1, {region(loc(plan_.in[member(p, plan_.root)]), 0, loc(plan_.in[p]), 0, n)});
  }

  CollectivePlan plan_;
  std::vector<std::size_t> group_of_;
  std::vector<std::size_t> rank_of_;
  // Touched only by the driving thread inside run_step, and by release_temporaries once nothing
  // runs any more (the driver's lock orders the two).
  std::vector<std::deque<Temp>> temps_;
};

}  // namespace xdev::spmd::detail
