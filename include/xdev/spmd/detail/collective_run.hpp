/// \file
/// The step programs of the collectives (ring and direct) on top of `CollectiveDriver`. Internal
/// to <xdev/spmd/collectives.hpp>; the algorithms are described there.
#pragma once

#include <xdev/any/any_device.hpp>
#include <xdev/async/device_queue.hpp>
#include <xdev/async/submit.hpp>
#include <xdev/backend/completion.hpp>
#include <xdev/core/shape.hpp>
#include <xdev/ops/elementwise.hpp>
#include <xdev/ops/op_args.hpp>
#include <xdev/spmd/detail/all_to_all_runs.hpp>
#include <xdev/spmd/detail/collective_driver.hpp>
#include <xdev/spmd/detail/collective_plan.hpp>
#include <xdev/spmd/detail/copy.hpp>
#include <xdev/spmd/detail/shared_reduce.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <list>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace xdev::spmd::detail {

/// `n` pointers, one per member of a group: on the stack up to 16 members, else on the heap (a
/// shared-memory step runs per participant per call, and must not allocate for the usual meshes).
template <class P>
class MemberPointers {
 public:
  explicit MemberPointers(std::size_t n) : heap_(n > on_stack ? n : 0) {}
  [[nodiscard]] P* data() noexcept { return heap_.empty() ? stack_ : heap_.data(); }
  P& operator[](std::size_t i) noexcept { return data()[i]; }

 private:
  static constexpr std::size_t on_stack = 16;
  P stack_[on_stack]{};
  std::vector<P> heap_;
};

/// A collective over arrays of `T`: one participant per mesh device (its flat index), each with
/// the step program of its algorithm (see collectives.hpp for the algorithms and their costs).
template <class T>
class CollectiveRun final : public CollectiveDriver {
 public:
  explicit CollectiveRun(CollectivePlan plan)
      : CollectiveDriver(std::move(plan)), plan_(CollectiveDriver::plan()), members_(plan_.in.size()) {
    for (std::size_t g = 0; g < plan_.groups.size(); ++g)
      for (std::size_t r = 0; r < plan_.groups[g].size(); ++r) {
        members_[plan_.groups[g][r]].group = g;
        members_[plan_.groups[g][r]].rank = r;
        set_steps(plan_.groups[g][r], steps_of(plan_, plan_.groups[g].size(), r));
      }
    lay_out();
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
    std::size_t offset = 0;  // elements
  };

  // The length of the program of the member at position `r` of a group of `k`.
  static std::size_t steps_of(const CollectivePlan& pl, std::size_t k, std::size_t r) {
    std::size_t steps = 1;  // the arrival
    switch (pl.kind) {
      case CollectiveKind::all_reduce:
        if (k > 1) steps += pl.route == Route::ring ? 2 * (k - 1) : pl.route == Route::direct ? 2 : 1;
        break;
      case CollectiveKind::all_gather:
      case CollectiveKind::reduce_scatter:
        steps += pl.route == Route::ring && k > 1 ? k - 1 : 1;
        break;
      case CollectiveKind::broadcast:
        if (k > 1 && r != pl.root) steps += pl.route == Route::ring ? k : 1;
        break;
      case CollectiveKind::reduce:  // shared memory: every device reduces its chunk; else the root
        if (k > 1 && (pl.route == Route::shared_memory || r == pl.root)) steps += 1;
        break;
      case CollectiveKind::all_to_all:
      case CollectiveKind::permute:
        steps += 1;
        break;
    }
    return steps;
  }

  [[nodiscard]] std::size_t k_of(std::size_t p) const { return plan_.groups[members_[p].group].size(); }
  [[nodiscard]] std::size_t rank_of(std::size_t p) const { return members_[p].rank; }
  [[nodiscard]] std::size_t member(std::size_t p, std::size_t rank) const {
    return plan_.groups[members_[p].group][rank % k_of(p)];
  }
  [[nodiscard]] std::size_t pred(std::size_t p) const { return member(p, rank_of(p) + k_of(p) - 1); }

  void deps(std::size_t p, std::size_t s, std::vector<StepRef>& out) const override {
    const std::size_t k = k_of(p), r = rank_of(p);
    auto every_peer = [&](std::size_t step) {
      for (std::size_t q = 0; q < k; ++q)
        if (q != r) out.push_back({member(p, q), step});
    };
    switch (plan_.kind) {
      case CollectiveKind::all_reduce:
        if (ring())
          out.push_back({pred(p), s - 1});
        else
          // direct: step 2 writes the result back only once every peer has read ours; shared
          // memory: the one step reads and writes every peer's array.
          every_peer(s - 1);
        break;
      case CollectiveKind::all_gather:
      case CollectiveKind::reduce_scatter:
        if (k == 1) break;
        if (ring())
          out.push_back({pred(p), s - 1});
        else
          every_peer(0);
        break;
      case CollectiveKind::broadcast: {
        const std::size_t root = member(p, plan_.root);
        if (ring() && pred(p) != root)
          out.push_back({pred(p), s});  // the chunk our predecessor received in its step s
        else
          out.push_back({root, 0});
        break;
      }
      case CollectiveKind::reduce:
      case CollectiveKind::all_to_all:
        every_peer(0);
        break;
      case CollectiveKind::permute:
        if (const std::int64_t from = plan_.source[r]; from >= 0 && static_cast<std::size_t>(from) != r)
          out.push_back({member(p, static_cast<std::size_t>(from)), 0});
        break;
    }
  }

  [[nodiscard]] bool ring() const noexcept { return plan_.route == Route::ring; }

  void run_step(std::size_t p, std::size_t s) override {
    if (plan_.route == Route::shared_memory) return shared_step(p);
    switch (plan_.kind) {
      case CollectiveKind::all_reduce:
        return ring() ? ring_all_reduce(p, s) : direct_all_reduce(p, s);
      case CollectiveKind::all_gather:
        return ring() ? ring_all_gather(p, s) : direct_all_gather(p);
      case CollectiveKind::reduce_scatter:
        return ring() ? ring_reduce_scatter(p, s) : direct_reduce_scatter(p);
      case CollectiveKind::broadcast:
        return ring() ? ring_broadcast(p, s) : direct_broadcast(p);
      case CollectiveKind::reduce:
        return direct_reduce(p);
      case CollectiveKind::all_to_all:
        return copies(p, 1, all_to_all_regions(p));
      case CollectiveKind::permute:
        return permute(p);
    }
  }

  void release_temporaries() noexcept override {
    for (auto& m : members_) m.temps.clear();
  }

  // ---- helpers ---------------------------------------------------------------------------------

  // The temporary `tag`/`index` of participant `p`, allocated with `length` elements on first use.
  AnyArray<T>& temp(std::size_t p, Tag tag, std::size_t index, std::size_t length) {
    for (auto& t : members_[p].temps)
      if (t.tag == tag && t.index == index) return t.array;
    members_[p].temps.push_back(
        Temp{tag, index, xdev::empty<T>(device(p), Shape{static_cast<Shape::value_type>(length)})});
    return members_[p].temps.back().array;
  }

  static Loc loc(const ArrayRef& a) { return {a.device, a.handle, a.offset}; }
  static Loc loc(const AnyArray<T>& a) { return {a.device(), a.buffer().native_handle(), 0}; }

  // `n` elements from `src` at element `si` to `dst` at element `di`.
  static CopyRegion region(const Loc& src, std::size_t si, const Loc& dst, std::size_t di, std::size_t n) {
    return {src.device,   src.handle, (src.offset + si) * sizeof(T),
            dst.device,   dst.handle, (dst.offset + di) * sizeof(T),
            n * sizeof(T)};
  }

  void copies(std::size_t p, std::size_t s, CopyRegions regions) {
    submit_copies(device(p), std::move(regions), token(p, s));
  }
  void combine(std::size_t p, std::size_t s, const AnyArray<T>& a, const AnyArray<T>& b, AnyArray<T>& out) {
    ops::combine(device(p), plan_.combine, a, b, out, token(p, s));
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
      ops::scale(device(p), x, alpha, token(p, s));
    }
  }

  // ---- all_reduce --------------------------------------------------------------------------------

  // Steps 1..k-1 reduce-scatter: rank r combines chunk (r - t - 2) mod k, t = s - 1, of its own
  // array with the partial its predecessor finished in step s-1, in place; after step k-1 it owns
  // the reduced chunk r. Steps k..2k-2 all-gather: rank r copies chunk (r - 1 - t) mod k, t = s - k,
  // from its predecessor's array into its own.
  void ring_all_reduce(std::size_t p, std::size_t s) {
    const std::size_t k = k_of(p), r = rank_of(p), n = plan_.in[p].count;
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
      CopyRegions regions;
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
    const std::size_t k = k_of(p), r = rank_of(p), b = plan_.in[p].count;
    CopyRegions regions;
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
    CopyRegions regions;
    for (std::size_t q = 0; q < k; ++q)
      regions.push_back(region(loc(plan_.in[member(p, q)]), 0, loc(plan_.out[p]), q * b, b));
    copies(p, 1, std::move(regions));
  }

  // ---- reduce_scatter ----------------------------------------------------------------------------

  // As the reduce-scatter half of ring_all_reduce, but the inputs are read-only: rank r's partial
  // after step s lives in its temporary P[s] (read by its successor in step s+1, so each is
  // written once), and the last step combines into L and copies L into the output.
  void ring_reduce_scatter(std::size_t p, std::size_t s) {
    const std::size_t k = k_of(p), r = rank_of(p), b = plan_.out[p].count;
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
    for (auto& tmp : members_[q].temps)
      if (tmp.tag == tag_partial && tmp.index == t) return tmp.array;
    throw error(errc::internal,
                "the partial result of step " + std::to_string(t + 1) + " on " + device(q).name() + " is missing");
  }

  // Copies block r of every member's input into X[q] and combines them in group order.
  void direct_reduce_scatter(std::size_t p) {
    const std::size_t k = k_of(p), r = rank_of(p), b = plan_.out[p].count;
    CopyRegions regions;
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

  // ---- reduce, all_to_all, collective_permute ---------------------------------------------------

  // The root copies every member's array into X[q], combines them in group order into X[0] and
  // copies X[0] into its own array (nobody else reads it). The other members only arrive.
  void direct_reduce(std::size_t p) {
    const std::size_t k = k_of(p), n = plan_.in[p].count;
    CopyRegions regions;
    for (std::size_t q = 0; q < k; ++q)
      regions.push_back(region(loc(plan_.in[member(p, q)]), 0, loc(temp(p, tag_member, q, n)), 0, n));
    copies(p, 1, std::move(regions));
    auto& acc = temp(p, tag_member, 0, n);
    for (std::size_t q = 1; q < k; ++q) combine(p, 1, acc, temp(p, tag_member, q, n), acc);
    scale_for_mean(p, 1, acc);
    copies(p, 1, {region(loc(acc), 0, loc(plan_.in[p]), 0, n)});
  }

  // Calls f(q, src_offset, dst_offset, count) for every run participant p receives from member q.
  template <class F>
  void for_each_all_to_all_run(std::size_t p, F&& f) const {
    detail::for_each_all_to_all_run(plan_.in_shapes[p], k_of(p), rank_of(p), plan_.split_axis, plan_.concat_axis,
                                    std::forward<F>(f));
  }

  CopyRegions all_to_all_regions(std::size_t p) const {
    CopyRegions regions;
    for_each_all_to_all_run(p, [&](std::size_t q, std::size_t src, std::size_t dst, std::size_t n) {
      regions.push_back(region(loc(plan_.in[member(p, q)]), src, loc(plan_.out[p]), dst, n));
    });
    return regions;
  }

  // Our output receives the input of the member that sends to us, or zeros.
  void permute(std::size_t p) {
    const std::int64_t from = plan_.source[rank_of(p)];
    const std::size_t n = plan_.out[p].count;
    if (from >= 0)
      return copies(p, 1,
                    {region(loc(plan_.in[member(p, static_cast<std::size_t>(from))]), 0, loc(plan_.out[p]), 0, n)});
    const AnyDevice& d = device(p);
    const std::size_t bytes = n * sizeof(T);
    auto zeros = std::shared_ptr<std::byte[]>(new std::byte[bytes]());
    auto launch = [d, h = plan_.out[p].handle, at = plan_.out[p].offset * sizeof(T), zeros,
                   bytes](Completion done) mutable {
      d.queue()->note_transfer(TransferDirection::from_host, bytes);
      d.model().copy_to_device(
          zeros.get(), h, at, bytes,
          d.keep_alive([zeros, done = std::move(done)](std::exception_ptr ep) mutable { done(std::move(ep)); }));
    };
    xdev::detail::submit<void>(
        d.queue(), d.queue()->default_chain(), nullptr,
        xdev::detail::queue_ordered(
            std::move(launch), xdev::detail::activity_tag{tools::Category::transfer, "copy_to_device", nullptr, bytes}),
        token(p, 1));
  }

  // ---- shared memory -----------------------------------------------------------------------------

  // Every device's memory is host memory: one step per participant, after every member of its
  // group has arrived, reads and writes the members' arrays directly. all_reduce: participant r
  // reduces chunk r of every array (in group order) and writes the result into chunk r of every
  // array, so the chunks are disjoint, nothing is copied twice and no temporary exists.
  // reduce_scatter: r reduces block r of every input into its output. all_gather: r copies every
  // member's input into its output. broadcast: r copies the root's array into its own.
  void shared_step(std::size_t p) {
    const std::size_t k = k_of(p), r = rank_of(p);
    std::size_t touched = 0;  // bytes read and written, for the choice of where the step runs
    auto wrote = [&](std::size_t from, std::size_t to, std::size_t elements) {
      if (from != to) xdev::detail::note_copy(*device(from).queue(), *device(to).queue(), elements * sizeof(T));
    };
    switch (plan_.kind) {
      case CollectiveKind::all_reduce: {
        const std::size_t len = chunk_of(plan_.in[p].count, k, r).length;
        for (std::size_t q = 0; q < k; ++q) wrote(p, member(p, q), len);
        touched = 2 * k * len * sizeof(T);
        break;
      }
      case CollectiveKind::reduce_scatter: {
        const std::size_t b = plan_.out[p].count;
        for (std::size_t q = 0; q < k; ++q) wrote(member(p, q), p, b);
        touched = (k + 1) * b * sizeof(T);
        break;
      }
      case CollectiveKind::all_gather: {
        const std::size_t b = plan_.in[p].count;
        for (std::size_t q = 0; q < k; ++q) wrote(member(p, q), p, b);
        touched = 2 * k * b * sizeof(T);
        break;
      }
      case CollectiveKind::broadcast:
        wrote(member(p, plan_.root), p, plan_.in[p].count);
        touched = 2 * plan_.in[p].count * sizeof(T);
        break;
      case CollectiveKind::reduce: {
        const std::size_t len = chunk_of(plan_.in[p].count, k, r).length;
        wrote(p, member(p, plan_.root), len);
        touched = (k + 1) * len * sizeof(T);
        break;
      }
      case CollectiveKind::all_to_all: {
        const std::size_t b = plan_.out[p].count / k;
        for (std::size_t q = 0; q < k; ++q) wrote(member(p, q), p, b);
        touched = 2 * plan_.out[p].count * sizeof(T);
        break;
      }
      case CollectiveKind::permute:
        if (const std::int64_t from = plan_.source[r]; from >= 0)
          wrote(member(p, static_cast<std::size_t>(from)), p, plan_.out[p].count);
        touched = 2 * plan_.out[p].count * sizeof(T);
        break;
    }
    if (touched <= shared_inline_bytes) {
      // The step's hold (see CollectiveDriver::drive) keeps it from completing before this returns.
      shared_work(p);
      return;
    }
    const AnyDevice& d = device(p);
    auto self = std::static_pointer_cast<CollectiveRun>(shared_from_this());
    auto launch = [d, self = std::move(self), p](Completion done) mutable {
      d.model().execute(HostTask([self = std::move(self), p] { self->shared_work(p); }), d.keep_alive(std::move(done)));
    };
    // Host-ordered (`false`): the task uses other devices' memory.
    xdev::detail::submit<void>(
        d.queue(), d.queue()->default_chain(), nullptr,
        xdev::detail::queue_ordered(
            std::move(launch), false, nullptr,
            xdev::detail::activity_tag{tools::Category::collective, name_of(plan_.kind), nullptr, touched}),
        token(p, 1));
  }

  static T* host_ptr(const ArrayRef& a) noexcept {
    return static_cast<T*>(a.device.model().host_address(a.handle)) + a.offset;
  }

  // The data movement of participant p's shared-memory step (see shared_step).
  void shared_work(std::size_t p) const {
    const std::size_t k = k_of(p), r = rank_of(p);
    switch (plan_.kind) {
      case CollectiveKind::all_reduce: {
        const Chunk c = chunk_of(plan_.in[p].count, k, r);
        MemberPointers<T*> arrays(k);
        for (std::size_t q = 0; q < k; ++q) arrays[q] = host_ptr(plan_.in[member(p, q)]) + c.offset;
        return reduce_into(arrays.data(), k, arrays.data(), k, c.length);
      }
      case CollectiveKind::reduce_scatter: {
        const std::size_t b = plan_.out[p].count;
        MemberPointers<T*> inputs(k);
        for (std::size_t q = 0; q < k; ++q) inputs[q] = host_ptr(plan_.in[member(p, q)]) + r * b;
        T* out = host_ptr(plan_.out[p]);
        return reduce_into(inputs.data(), k, &out, 1, b);
      }
      case CollectiveKind::all_gather: {
        const std::size_t b = plan_.in[p].count;
        T* out = host_ptr(plan_.out[p]);
        for (std::size_t q = 0; q < k; ++q) std::memcpy(out + q * b, host_ptr(plan_.in[member(p, q)]), b * sizeof(T));
        return;
      }
      case CollectiveKind::broadcast:
        std::memcpy(host_ptr(plan_.in[p]), host_ptr(plan_.in[member(p, plan_.root)]), plan_.in[p].count * sizeof(T));
        return;
      case CollectiveKind::reduce: {
        const Chunk c = chunk_of(plan_.in[p].count, k, r);
        MemberPointers<T*> arrays(k);
        for (std::size_t q = 0; q < k; ++q) arrays[q] = host_ptr(plan_.in[member(p, q)]) + c.offset;
        T* at_root = arrays[plan_.root];
        return reduce_into(arrays.data(), k, &at_root, 1, c.length);
      }
      case CollectiveKind::all_to_all: {
        T* out = host_ptr(plan_.out[p]);
        MemberPointers<const T*> in(k);
        for (std::size_t q = 0; q < k; ++q) in[q] = host_ptr(plan_.in[member(p, q)]);
        for_each_all_to_all_run(p, [&](std::size_t q, std::size_t src, std::size_t dst, std::size_t n) {
          std::memcpy(out + dst, in[q] + src, n * sizeof(T));
        });
        return;
      }
      case CollectiveKind::permute: {
        T* out = host_ptr(plan_.out[p]);
        const std::size_t n = plan_.out[p].count;
        if (const std::int64_t from = plan_.source[r]; from >= 0)
          std::memcpy(out, host_ptr(plan_.in[member(p, static_cast<std::size_t>(from))]), n * sizeof(T));
        else
          std::memset(static_cast<void*>(out), 0, n * sizeof(T));
        return;
      }
    }
  }

  void reduce_into(T* const* src, std::size_t nsrc, T* const* dst, std::size_t ndst, std::size_t n) const {
    reduce_host_blocks(plan_.combine, plan_.mean, src, nsrc, dst, ndst, n);
  }

  // A participant: its group, its position in it, and its temporaries. The temporaries are touched
  // only by the driving thread inside run_step, and by release_temporaries once nothing runs any
  // more (the driver's lock orders the two); a list, so that a reference to one stays valid while
  // the next is made, and none is allocated for a run that needs no temporary.
  struct Member {
    std::size_t group = 0;
    std::size_t rank = 0;
    std::list<Temp> temps;
  };

  const CollectivePlan& plan_;  // the driver's (it holds the plan)
  std::vector<Member> members_;
};

}  // namespace xdev::spmd::detail
