/// \file
/// Placing a `ShardedArray`: `mark_sharding` (host data → every shard straight to its device),
/// `reshard` (only the bytes that change owner move, device to device), the placement-level
/// `all_gather`, and `to_host`. Each is asynchronous and takes a completion token like every
/// other xdev operation (default: a future). See docs/spmd.md.
///
///     xdev::spmd::VirtualDevice vd(mesh);                                  // 4 devices, axis "data"
///     auto x = vd.place(std::span<const float>(batch), {256, 128});      // stays in host memory
///     auto xs = xdev::spmd::mark_sharding(x, vd.sharding({"data"})).get(); // 64 rows to each device
///     std::vector<float> back = xdev::spmd::to_host(xs).get();
///
/// Every operation here is all-or-nothing: the arguments are checked and the new shards
/// allocated before the call returns (those errors are thrown); when a transfer fails, the
/// operation waits for every transfer it started, frees every buffer it made and completes with
/// that error. No half-made array is ever delivered.
///
/// Lifetimes: what an operation reads (the host data, the source array) must stay alive and
/// unchanged until it completes, as for `copy_to_device`, unless it is passed as an rvalue,
/// which the operation then owns (`mark_sharding(vd.place(...), s)` is safe).
#pragma once

#include <xdev/any/any_device.hpp>
#include <xdev/async/use_future.hpp>
#include <xdev/core/error.hpp>
#include <xdev/core/shape.hpp>
#include <xdev/spmd/detail/copy.hpp>
#include <xdev/spmd/detail/placement.hpp>
#include <xdev/spmd/partition_spec.hpp>
#include <xdev/spmd/sharded_array.hpp>
#include <xdev/spmd/sharding.hpp>
#include <xdev/spmd/virtual_device.hpp>

#include <boost/asio/async_result.hpp>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <exception>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace xdev::spmd {

namespace detail {

// The steps every placement operation shares: once the work already submitted to some devices is
// done, `Op::send()` submits its transfers (joined by `joined()`); when the last one completes,
// `Op::finish(first error)` runs.
template <class Op>
struct PlacementSteps : std::enable_shared_from_this<Op> {
  void start_after(std::span<const AnyDevice> wait_for) {
    after_pending_work(wait_for, [self = this->shared_from_this()](std::exception_ptr ep) {
      if (ep)
        self->finish(std::move(ep));
      else
        self->send();
    });
  }
  std::shared_ptr<Join> joined() {
    return std::make_shared<Join>(
        [self = this->shared_from_this()](std::exception_ptr ep) { self->finish(std::move(ep)); });
  }
};

// Delivers a new sharded array, or the error after freeing its shards (all or nothing: every
// transfer has completed, so freeing is safe).
template <class T, class Handler>
void deliver_array(Delivery<Handler>& deliver, std::exception_ptr ep, const Shape& shape, Sharding& sharding,
                   std::vector<AnyArray<T>>& shards) {
  if (ep) {
    shards.clear();
    deliver(std::move(ep), ShardedArray<T>{});
  } else {
    deliver(nullptr, ShardedArray<T>(shape, std::move(sharding), std::move(shards)));
  }
}

// Sends the shards of the row-major host array `src` (of `shape`) to their devices, once the work
// already submitted to `wait_for` is done: a shard that is one contiguous run of `src` goes
// straight from it; any other is packed into a staging buffer first (a host copy), so each device
// receives exactly its shard's bytes in one transfer. `keep` owns `src` when the caller gave it.
template <class T, class Handler>
struct Scatter : PlacementSteps<Scatter<T, Handler>> {
  Scatter(const T* s, Shape sh, Sharding sg, std::shared_ptr<void> k, Handler h)
      : src(s),
        shape(sh),
        sharding(std::move(sg)),
        shards(allocate_shards<T>(sharding, shape)),
        staging(shards.size()),
        keep(std::move(k)),
        deliver(std::move(h), sharding.mesh().device(0).queue()) {}

  void send() {
    auto join = this->joined();
    const IndexBox whole = full_box(shape);
    for (std::size_t i = 0; i < shards.size(); ++i) {
      const IndexBox box = sharding.shard_box(shape, i);
      if (box.numel() == 0) continue;
      std::size_t runs = 0, first_offset = 0;
      for_each_run(box, whole, box, [&](std::size_t s, std::size_t, std::size_t) {
        if (runs++ == 0) first_offset = s;
      });
      std::span<const T> from(src + first_offset, shards[i].size());
      if (runs > 1) {
        auto& packed = staging[i];
        packed.resize(shards[i].size());
        for_each_run(box, whole, box, [&](std::size_t s, std::size_t d, std::size_t n) {
          std::memcpy(packed.data() + d, src + s, n * sizeof(T));
        });
        from = packed;
      }
      if (!join->submit([&](Join::Arrival a) { shards[i].device().copy_to_device(from, shards[i], std::move(a)); }))
        break;
    }
    join->seal();
  }

  void finish(std::exception_ptr ep) {
    staging.clear();
    keep.reset();
    deliver_array(deliver, std::move(ep), shape, sharding, shards);
  }

  const T* src;
  Shape shape;
  Sharding sharding;
  std::vector<AnyArray<T>> shards;
  std::vector<std::vector<T>> staging;
  std::shared_ptr<void> keep;
  Delivery<Handler> deliver;
};

// The initiations own what they need (a token may launch them after the call returned); only
// the source the caller keeps alive is borrowed.
template <class T>
struct scatter_initiation {
  const T* src;
  Shape shape;
  Sharding sharding;
  std::shared_ptr<void> keep;
  std::vector<AnyDevice> wait_for;

  template <class Handler>
  void operator()(Handler&& handler) const {
    auto op =
        std::make_shared<Scatter<T, std::decay_t<Handler>>>(src, shape, sharding, keep, std::forward<Handler>(handler));
    initiate_placement([&] { op->start_after(wait_for); });
  }
};

template <class T, class Token>
auto scatter(const T* src, const Shape& shape, const Sharding& sharding, std::shared_ptr<void> keep,
             std::vector<AnyDevice> wait_for, Token&& token) {
  sharding.validate(shape);
  return boost::asio::async_initiate<Token, void(std::exception_ptr, ShardedArray<T>)>(
      scatter_initiation<T>{src, shape, sharding, std::move(keep), std::move(wait_for)}, token);
}

// Builds every new shard of `to` from the old shards of `from`, once the work already submitted
// to the old shards' devices is done. The copy regions are worked out when the call is made.
template <class T, class Handler>
struct Reshard : PlacementSteps<Reshard<T, Handler>> {
  Reshard(const ShardedArray<T>& from, const Sharding& to, std::shared_ptr<void> k, Handler h)
      : shape(from.shape()),
        sharding(to),
        shards(allocate_shards<T>(to, shape)),
        regions(shards.size()),
        wait_for(from.mesh().devices()),
        keep(std::move(k)),
        deliver(std::move(h), to.mesh().device(0).queue()) {
    // The distinct old boxes (they tile the array) and which old shards hold each.
    struct Holding {
      IndexBox box;
      std::vector<std::size_t> holders;  // positions in the old mesh
    };
    std::vector<Holding> held;
    for (std::size_t i = 0; i < from.mesh().size(); ++i) {
      IndexBox box = from.shard_box(i);
      auto it = std::find_if(held.begin(), held.end(), [&](const Holding& x) { return x.box == box; });
      if (it == held.end())
        held.push_back({std::move(box), {i}});
      else
        it->holders.push_back(i);
    }
    for (std::size_t j = 0; j < shards.size(); ++j) {
      const IndexBox dst_box = to.shard_box(shape, j);
      const AnyDevice& dst = shards[j].device();
      for (const auto& h : held) {
        const IndexBox part = dst_box.intersect(h.box);
        if (part.numel() == 0) continue;
        // The device itself when it already holds the part, else one holder, spread by position.
        std::size_t src = h.holders[j % h.holders.size()];
        for (auto k : h.holders)
          if (from.mesh().device(k) == dst) src = k;
        const AnyArray<T>& old = from.shard(src);
        for_each_run(part, h.box, dst_box, [&](std::size_t s, std::size_t d, std::size_t n) {
          regions[j].push_back({old.device(), old.buffer().native_handle(), s * sizeof(T), dst,
                                shards[j].buffer().native_handle(), d * sizeof(T), n * sizeof(T)});
        });
      }
    }
  }

  void send() {
    auto join = this->joined();
    for (std::size_t j = 0; j < shards.size(); ++j) {
      if (regions[j].empty()) continue;
      if (!join->submit(
              [&](Join::Arrival a) { (void)submit_copies(shards[j].device(), std::move(regions[j]), std::move(a)); }))
        break;
    }
    join->seal();
  }

  void finish(std::exception_ptr ep) {
    regions.clear();
    keep.reset();
    deliver_array(deliver, std::move(ep), shape, sharding, shards);
  }

  Shape shape;
  Sharding sharding;
  std::vector<AnyArray<T>> shards;
  std::vector<std::vector<CopyRegion>> regions;  // per new shard
  std::vector<AnyDevice> wait_for;
  std::shared_ptr<void> keep;
  Delivery<Handler> deliver;
};

template <class T>
struct reshard_initiation {
  const ShardedArray<T>* from;
  Sharding to;
  std::shared_ptr<void> keep;

  template <class Handler>
  void operator()(Handler&& handler) const {
    auto op = std::make_shared<Reshard<T, std::decay_t<Handler>>>(*from, to, keep, std::forward<Handler>(handler));
    initiate_placement([&] { op->start_after(op->wait_for); });
  }
};

template <class T, class Token>
auto start_reshard(const char* what, const ShardedArray<T>& array, const Sharding& to, std::shared_ptr<void> keep,
                   Token&& token) {
  if (!array.valid()) throw error(errc::invalid_argument, std::string(what) + ": the sharded array is empty");
  to.validate(array.shape());
  return boost::asio::async_initiate<Token, void(std::exception_ptr, ShardedArray<T>)>(
      reshard_initiation<T>{&array, to, std::move(keep)}, token);
}

// `array`'s spec without the axes in `axes`, over the same mesh.
template <class T>
Sharding gathered(const ShardedArray<T>& array, std::span<const std::string> axes) {
  if (!array.valid()) throw error(errc::invalid_argument, "all_gather: the sharded array is empty");
  for (const auto& a : axes)
    if (!array.mesh().has_axis(a))
      throw error(errc::invalid_argument, "all_gather: the mesh " + array.mesh().to_string() + " has no axis '" + a +
                                              "' (gathering " + array.sharding().to_string() + ")");
  std::vector<std::vector<std::string>> dims = array.sharding().spec().dims();
  for (auto& d : dims) std::erase_if(d, [&](const std::string& n) { return std::ranges::find(axes, n) != axes.end(); });
  return Sharding(array.mesh(), PartitionSpec(std::move(dims)));
}

// Reads one replica of every distinct block of `array` into `out` (row-major, `array.size()`
// elements): a block that is contiguous in `out` goes straight there, any other through a staging
// buffer unpacked on the host when every transfer is done. `Out` is `std::span<T>` (the caller's
// memory) or `std::vector<T>` (delivered with the outcome).
template <class T, class Out, class Handler>
struct Gather : PlacementSteps<Gather<T, Out, Handler>> {
  Gather(const ShardedArray<T>& a, Out o, std::shared_ptr<void> k, Handler h)
      : array(&a), out(std::move(o)), keep(std::move(k)), deliver(std::move(h), a.mesh().device(0).queue()) {
    if constexpr (std::is_same_v<Out, std::vector<T>>) out.resize(a.size());
  }

  void send() {
    auto join = this->joined();
    const IndexBox whole = full_box(array->shape());
    std::vector<IndexBox> done;
    staged.reserve(array->shards().size());  // the spans handed to the transfers must stay valid
    for (std::size_t i = 0; i < array->shards().size(); ++i) {
      IndexBox box = array->shard_box(i);
      if (box.numel() == 0 || std::find(done.begin(), done.end(), box) != done.end()) continue;
      std::size_t runs = 0, first_offset = 0;
      for_each_run(box, box, whole, [&](std::size_t, std::size_t d, std::size_t) {
        if (runs++ == 0) first_offset = d;
      });
      const AnyArray<T>& shard = array->shard(i);
      std::span<T> to = std::span<T>(out).subspan(first_offset, shard.size());
      if (runs > 1) {
        staged.emplace_back(i, std::vector<T>(shard.size()));
        to = std::span<T>(staged.back().second);
      }
      done.push_back(std::move(box));
      if (!join->submit([&](Join::Arrival a) { shard.device().copy_to_host(shard, to, std::move(a)); })) break;
    }
    join->seal();
  }

  void finish(std::exception_ptr ep) {
    if (!ep) {
      const IndexBox whole = full_box(array->shape());
      for (const auto& entry : staged) {
        const IndexBox box = array->shard_box(entry.first);
        const T* host = entry.second.data();  // not a structured binding: clang 14 cannot capture those
        T* dst = std::span<T>(out).data();
        for_each_run(box, box, whole, [&](std::size_t s, std::size_t d, std::size_t n) {
          std::memcpy(dst + d, host + s, n * sizeof(T));
        });
      }
    }
    staged.clear();
    keep.reset();
    if constexpr (std::is_same_v<Out, std::vector<T>>) {
      if (ep) out.clear();
      deliver(std::move(ep), std::move(out));
    } else {
      deliver(std::move(ep));
    }
  }

  const ShardedArray<T>* array;
  Out out;
  std::vector<std::pair<std::size_t, std::vector<T>>> staged;  // shard position, its host copy
  std::shared_ptr<void> keep;
  Delivery<Handler> deliver;
};

template <class T, class Out>
struct gather_initiation {
  const ShardedArray<T>* array;
  Out out;
  std::shared_ptr<void> keep;

  template <class Handler>
  void operator()(Handler&& handler) const {
    auto op =
        std::make_shared<Gather<T, Out, std::decay_t<Handler>>>(*array, out, keep, std::forward<Handler>(handler));
    initiate_placement([&] { op->start_after({}); });  // stream order covers the work ahead
  }
};

template <class T>
void check_readable(const ShardedArray<T>& array) {
  if (!array.valid()) throw error(errc::invalid_argument, "to_host: the sharded array is empty");
}

// Tokens are never host memory: `to_host(xs, vec)` must mean the span overload, not a token.
template <class Token, class T>
concept placement_token = !std::is_convertible_v<Token, std::span<T>>;

}  // namespace detail

/// Splits `array`, which lives on an SPMD virtual device (host memory), as `sharding` says and
/// sends every shard straight from host memory to its device: device `i` receives exactly
/// `sharding.shard_box(shape, i)`, so the bytes moved equal the array's size for a tiled sharding
/// (times the replication factor when some mesh axes replicate). No unpartitioned copy is made on
/// any device. Starts once the work already submitted on `array`'s virtual device is done, and
/// completes with `void(std::exception_ptr, ShardedArray<T>)` when every shard is on its device
/// (default token: `xdev::Future<ShardedArray<T>>`). `array` is left as it was; pass it as an
/// rvalue to hand it over (it is freed when the operation completes), else keep it alive until then.
///
///     auto next = xdev::spmd::mark_sharding(vd.place(batch, shape), sharding);  // starts now
///     step(current);                                                            // overlaps
///     auto xs = next.get();
///
/// \throws xdev::error `errc::invalid_argument` when `array` is not on a virtual device or
///         `sharding` does not fit its shape; `errc::out_of_memory` naming the device, after
///         freeing every shard made. A transfer's error completes the operation instead (all or
///         nothing: every shard is freed).
template <class T, class Token = const use_future_t&>
auto mark_sharding(const AnyArray<T>& array, const Sharding& sharding, Token&& token = use_future) {
  const T* src = VirtualDevice::host_data(array);
  return detail::scatter(src, array.shape(), sharding, nullptr, {array.device()}, std::forward<Token>(token));
}

/// As above, taking `array` over: it stays alive until the operation completes.
template <class T, class Token = const use_future_t&>
auto mark_sharding(AnyArray<T>&& array, const Sharding& sharding, Token&& token = use_future) {
  const T* src = VirtualDevice::host_data(array);
  std::vector<AnyDevice> vd{array.device()};
  auto owned = std::make_shared<AnyArray<T>>(std::move(array));
  return detail::scatter(src, owned->shape(), sharding, owned, std::move(vd), std::forward<Token>(token));
}

/// As above, from row-major host memory `data` of `shape`, which must stay alive and unchanged
/// until the operation completes.
/// \throws xdev::error `errc::invalid_argument` when `data.size() != shape.numel()`, else as above.
template <class T, class Token = const use_future_t&>
auto mark_sharding(std::span<const T> data, Shape shape, const Sharding& sharding, Token&& token = use_future) {
  if (data.size() != static_cast<std::size_t>(shape.numel()))
    throw error(errc::invalid_argument,
                "mark_sharding: " + std::to_string(data.size()) + " elements cannot fill shape " + to_string(shape));
  return detail::scatter(data.data(), shape, sharding, nullptr, {}, std::forward<Token>(token));
}

/// A copy of `array` split as `to` says (over the same or another mesh). Each new shard is
/// assembled on its device from the old shards: the parts the device already held are copied
/// within it, every other part comes device to device from one old holder (between devices of
/// different runtimes, through host memory). So the bytes that move between devices are exactly
/// those that change owner. Starts once the work already submitted to the old shards' devices is
/// done; completes with `void(std::exception_ptr, ShardedArray<T>)` (default: a future). `array`
/// is unchanged; keep it alive until the operation completes, or pass it as an rvalue.
///
///     auto cols = xdev::spmd::reshard(rows, xdev::spmd::Sharding(mesh, {xdev::spmd::replicated, "data"})).get();
///
/// \throws xdev::error `errc::invalid_argument` for an empty `array` or when `to` does not fit its
///         shape; `errc::out_of_memory` after freeing every new shard. A transfer's error
///         completes the operation instead (every new shard freed, `array` intact).
template <class T, class Token = const use_future_t&>
auto reshard(const ShardedArray<T>& array, const Sharding& to, Token&& token = use_future) {
  return detail::start_reshard("reshard", array, to, nullptr, std::forward<Token>(token));
}

/// As above, taking `array` over: it stays alive until the operation completes.
template <class T, class Token = const use_future_t&>
auto reshard(ShardedArray<T>&& array, const Sharding& to, Token&& token = use_future) {
  auto owned = std::make_shared<ShardedArray<T>>(std::move(array));
  const ShardedArray<T>& from = *owned;
  return detail::start_reshard("reshard", from, to, std::move(owned), std::forward<Token>(token));
}

/// `array` with its split dimensions gathered over mesh axes `axes`: every axis in `axes` is taken
/// out of `array`'s spec, and the operation is `reshard(array, that sharding)`, so each device
/// ends up holding whole what the devices along those axes held between them, and only the bytes
/// that change owner move. This is the placement-level `all_gather` (JAX: resharding to a spec
/// without those axes); it works for uneven shards too, where the per-device `all_gather` needs
/// inputs of one shape. An axis the spec does not use changes nothing (the result is still a
/// copy). Completes as `reshard`; keep `array` alive until then.
///
///     // ('data', None) over 4 devices, 10 rows: shards of 3, 3, 3, 1 rows
///     auto whole = xdev::spmd::all_gather(xs, "data").get();   // spec (None, None): 10 rows on each
///
/// \throws xdev::error `errc::invalid_argument` for an empty `array` or an axis the mesh does not
///         have (naming it and the mesh); else as `reshard`.
template <class T, class Token = const use_future_t&>
auto all_gather(const ShardedArray<T>& array, std::span<const std::string> axes, Token&& token = use_future) {
  const Sharding to = detail::gathered(array, axes);
  return detail::start_reshard("all_gather", array, to, nullptr, std::forward<Token>(token));
}

/// `all_gather` over one axis.
template <class T, class Token = const use_future_t&>
auto all_gather(const ShardedArray<T>& array, std::string_view axis, Token&& token = use_future) {
  const std::string one(axis);
  return all_gather(array, std::span<const std::string>(&one, 1), std::forward<Token>(token));
}

/// `all_gather` over the axes in braces: `all_gather(xs, {"data", "model"})`.
template <class T, class Token = const use_future_t&>
auto all_gather(const ShardedArray<T>& array, std::initializer_list<std::string> axes, Token&& token = use_future) {
  return all_gather(array, std::span<const std::string>(axes.begin(), axes.size()), std::forward<Token>(token));
}

/// Copies the logical array into row-major host memory `out` (one replica of every part is read),
/// each shard after the work already submitted to its device's default stream. Completes with
/// `void(std::exception_ptr)` (default: `xdev::Future<void>`); `array` and `out` must stay alive
/// until then.
/// \throws xdev::error `errc::invalid_argument` for an empty `array` or when `out.size()` differs
///         from `array.size()`. A transfer's error completes the operation, after every transfer
///         started has finished (`out` then holds a partial copy).
template <class T, class Token = const use_future_t&>
auto to_host(const ShardedArray<T>& array, std::span<T> out, Token&& token = use_future) {
  detail::check_readable(array);
  if (out.size() != array.size())
    throw error(errc::invalid_argument, "to_host: the array " + to_string(array.shape()) + " has " +
                                            std::to_string(array.size()) + " elements but the destination holds " +
                                            std::to_string(out.size()));
  return boost::asio::async_initiate<Token, void(std::exception_ptr)>(
      detail::gather_initiation<T, std::span<T>>{&array, out, nullptr}, token);
}

/// The logical array in a new host vector (row-major): completes with
/// `void(std::exception_ptr, std::vector<T>)` (default: `xdev::Future<std::vector<T>>`); keep
/// `array` alive until then.
///
///     std::vector<float> back = xdev::spmd::to_host(xs).get();
///
/// \throws xdev::error `errc::invalid_argument` for an empty `array`.
template <class T, class Token = const use_future_t&>
requires detail::placement_token<Token, T>
auto to_host(const ShardedArray<T>& array, Token&& token = use_future) {
  detail::check_readable(array);
  // The vector is made when the operation starts (an initiation is copied, never its result).
  return boost::asio::async_initiate<Token, void(std::exception_ptr, std::vector<T>)>(
      detail::gather_initiation<T, std::vector<T>>{&array, {}, nullptr}, token);
}

}  // namespace xdev::spmd
