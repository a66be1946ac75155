/// \file
/// `xdev::spmd::ShardedArray<T>`: one logical array split over a mesh, one buffer per device; and
/// the operations that make one: `mark_sharding` (host data → every shard straight to its device),
/// `reshard` (only the bytes that change owner move, device to device), `to_host`. See docs/spmd.md.
///
///     xdev::spmd::VirtualDevice vd(mesh);                                  // 4 devices, axis "data"
///     auto x = vd.place(std::span<const float>(batch), {256, 128});      // stays in host memory
///     auto xs = xdev::spmd::mark_sharding(x, vd.sharding({"data"}));     // 64 rows to each device
///     xs.shard(2);                                                        // rows 128..191, on mesh.device(2)
///
/// Every operation here is all-or-nothing: when one shard's allocation or transfer fails, the call
/// waits for the transfers it started, frees every buffer it made and throws that error; no
/// half-made array is ever returned.
#pragma once

#include <xdev/any/any_device.hpp>
#include <xdev/async/use_future.hpp>
#include <xdev/core/dtype.hpp>
#include <xdev/core/error.hpp>
#include <xdev/core/shape.hpp>
#include <xdev/spmd/detail/copy.hpp>
#include <xdev/spmd/mesh.hpp>
#include <xdev/spmd/sharding.hpp>
#include <xdev/spmd/virtual_device.hpp>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <exception>
#include <future>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace xdev::spmd {

/// A logical array of `shape()` split over `sharding().mesh()` as `sharding().spec()` says: shard
/// `i` is a dense row-major `AnyArray<T>` on `mesh().device(i)` holding `shard_box(i)` of the
/// array (replicated dimensions whole). Move-only, like the arrays it owns; a default-constructed
/// one is empty (`valid()` is false).
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
    const Shape local = sharding_.shard_shape(shape_);
    for (std::size_t i = 0; i < shards_.size(); ++i) {
      if (shards_[i].device() != mesh.device(i))
        throw error(errc::invalid_argument, "shard " + std::to_string(i) + " is on " + describe(shards_[i].device()) +
                                                " but mesh position " + std::to_string(i) + " is " +
                                                mesh.device(i).name());
      if (shards_[i].shape() != local)
        throw error(errc::invalid_argument, "shard " + std::to_string(i) + " on " + mesh.device(i).name() +
                                                " has shape " + to_string(shards_[i].shape()) + " but " +
                                                sharding_.to_string() + " gives every shard of " + to_string(shape_) +
                                                " the shape " + to_string(local));
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

// Waits for every future, then rethrows the first failure (nothing is still running afterwards).
inline void wait_all(std::vector<std::future<void>>& pending) {
  std::exception_ptr first;
  for (auto& f : pending) {
    try {
      f.get();
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  pending.clear();
  if (first) std::rethrow_exception(first);
}

// Runs `submit_all(pending)`, which submits work and collects its futures; whatever happens, waits
// for everything submitted before letting an error out, so no buffer is freed under a transfer.
template <class Submit>
void submit_and_wait(Submit&& submit_all) {
  std::vector<std::future<void>> pending;
  try {
    submit_all(pending);
  } catch (...) {
    try {
      wait_all(pending);
    } catch (...) {  // the submission's own error is the one to report
    }
    throw;
  }
  wait_all(pending);
}

// Orders what follows after all work already submitted to `devices`' default streams.
inline void wait_for_pending_work(const std::vector<AnyDevice>& devices) {
  submit_and_wait([&](std::vector<std::future<void>>& pending) {
    for (const auto& d : devices) pending.push_back(d.execute([] {}, use_future));
  });
}

// Allocates one shard per mesh device (all or nothing: a failure frees the ones made).
template <class T>
std::vector<AnyArray<T>> allocate_shards(const Sharding& sharding, const Shape& shape) {
  const Shape local = sharding.shard_shape(shape);
  std::vector<AnyArray<T>> shards;
  shards.reserve(sharding.mesh().size());
  for (const auto& dev : sharding.mesh().devices()) shards.push_back(xdev::empty<T>(dev, local));
  return shards;
}

// Sends the shards of the row-major host array `src` (of `shape`) to their devices: a shard that is
// one contiguous run of `src` goes straight from it; any other is packed into a staging buffer
// first (a host copy), so each device receives exactly its shard's bytes in one transfer.
template <class T>
ShardedArray<T> scatter_from_host(const T* src, const Shape& shape, const Sharding& sharding) {
  sharding.validate(shape);
  auto shards = allocate_shards<T>(sharding, shape);
  const IndexBox whole = detail::full_box(shape);
  std::vector<std::vector<T>> staging(shards.size());
  submit_and_wait([&](std::vector<std::future<void>>& pending) {
    for (std::size_t i = 0; i < shards.size(); ++i) {
      const IndexBox box = sharding.shard_box(shape, i);
      if (box.numel() == 0) continue;
      std::size_t runs = 0;
      std::size_t first_offset = 0;
      detail::for_each_run(box, whole, box, [&](std::size_t s, std::size_t, std::size_t) {
        if (runs++ == 0) first_offset = s;
      });
      const AnyDevice& dev = shards[i].device();
      if (runs == 1) {
        pending.push_back(dev.copy_to_device(std::span<const T>(src + first_offset, shards[i].size()), shards[i]));
      } else {
        auto& packed = staging[i];
        packed.resize(shards[i].size());
        detail::for_each_run(box, whole, box, [&](std::size_t s, std::size_t d, std::size_t n) {
          std::memcpy(packed.data() + d, src + s, n * sizeof(T));
        });
        pending.push_back(dev.copy_to_device(std::span<const T>(packed), shards[i]));
      }
    }
  });
  return ShardedArray<T>(shape, sharding, std::move(shards));
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

/// Splits `array`, which lives on an SPMD virtual device (host memory), as `sharding` says and
/// sends every shard straight from host memory to its device: device `i` receives exactly
/// `sharding.shard_box(shape, i)`, so the bytes moved equal the array's size for a tiled sharding
/// (times the replication factor when some mesh axes replicate). No unpartitioned copy is made on
/// any device. Waits for the work already submitted on `array`'s virtual device and returns when
/// every shard is on its device. `array` is left as it was (drop it to free its host memory).
///
///     auto xs = xdev::spmd::mark_sharding(x, vd.sharding({"data", xdev::spmd::replicated}));
///
/// \throws xdev::error `errc::invalid_argument` when `array` is not on a virtual device or
///         `sharding` does not fit its shape; `errc::out_of_memory` or a transfer's error, after
///         freeing every shard made (all or nothing).
template <class T>
[[nodiscard]] ShardedArray<T> mark_sharding(const AnyArray<T>& array, const Sharding& sharding) {
  const T* src = VirtualDevice::host_data(array);
  detail::wait_for_pending_work({array.device()});
  return detail::scatter_from_host(src, array.shape(), sharding);
}

/// As above, from row-major host memory `data` of `shape` (which must stay unchanged until the
/// call returns).
/// \throws xdev::error `errc::invalid_argument` when `data.size() != shape.numel()`, else as above.
template <class T>
[[nodiscard]] ShardedArray<T> mark_sharding(std::span<const T> data, Shape shape, const Sharding& sharding) {
  if (data.size() != static_cast<std::size_t>(shape.numel()))
    throw error(errc::invalid_argument,
                "mark_sharding: " + std::to_string(data.size()) + " elements cannot fill shape " + to_string(shape));
  return detail::scatter_from_host(data.data(), shape, sharding);
}

/// A copy of `array` split as `to` says (over the same or another mesh). Each new shard is
/// assembled on its device from the old shards: the parts the device already held are copied
/// within it, every other part comes device to device from one old holder (between devices of
/// different runtimes, through host memory). So the bytes that move between devices are exactly
/// those that change owner. Waits for the work already submitted to the old shards' devices;
/// returns when the new array is complete. `array` is unchanged.
///
///     auto cols = xdev::spmd::reshard(rows, xdev::spmd::Sharding(mesh, {xdev::spmd::replicated, "data"}));
///
/// \throws xdev::error `errc::invalid_argument` for an empty `array` or when `to` does not fit its
///         shape; `errc::out_of_memory` or a transfer's error, after freeing every new shard.
template <class T>
[[nodiscard]] ShardedArray<T> reshard(const ShardedArray<T>& array, const Sharding& to) {
  if (!array.valid()) throw error(errc::invalid_argument, "reshard: the sharded array is empty");
  const Shape& shape = array.shape();
  to.validate(shape);
  const Mesh& from_mesh = array.mesh();

  // The distinct old boxes (they tile the array) and which old shards hold each.
  struct Holding {
    IndexBox box;
    std::vector<std::size_t> holders;  // positions in the old mesh
  };
  std::vector<Holding> held;
  for (std::size_t i = 0; i < from_mesh.size(); ++i) {
    IndexBox box = array.shard_box(i);
    auto it = std::find_if(held.begin(), held.end(), [&](const Holding& h) { return h.box == box; });
    if (it == held.end())
      held.push_back({std::move(box), {i}});
    else
      it->holders.push_back(i);
  }

  detail::wait_for_pending_work(from_mesh.devices());
  auto shards = detail::allocate_shards<T>(to, shape);
  detail::submit_and_wait([&](std::vector<std::future<void>>& pending) {
    for (std::size_t j = 0; j < shards.size(); ++j) {
      const IndexBox dst_box = to.shard_box(shape, j);
      const AnyDevice& dst = shards[j].device();
      std::vector<detail::CopyRegion> regions;
      for (const auto& h : held) {
        const IndexBox part = dst_box.intersect(h.box);
        if (part.numel() == 0) continue;
        // The device itself when it already holds the part, else one holder, spread by position.
        std::size_t src = h.holders[j % h.holders.size()];
        for (auto k : h.holders)
          if (from_mesh.device(k) == dst) src = k;
        const AnyArray<T>& from = array.shard(src);
        detail::for_each_run(part, h.box, dst_box, [&](std::size_t s, std::size_t d, std::size_t n) {
          regions.push_back({from.device(), from.buffer().native_handle(), s * sizeof(T), dst,
                             shards[j].buffer().native_handle(), d * sizeof(T), n * sizeof(T)});
        });
      }
      pending.push_back(detail::submit_copies(dst, std::move(regions), use_future));
    }
  });
  return ShardedArray<T>(shape, to, std::move(shards));
}

/// Copies the logical array into row-major host memory `out` (one replica of every part is read).
/// Waits for the work already submitted to the shards' devices.
/// \throws xdev::error `errc::invalid_argument` for an empty `array` or when `out.size()` differs
///         from `array.size()`; a transfer's error (after every transfer started has finished).
template <class T>
void to_host(const ShardedArray<T>& array, std::span<T> out) {
  if (!array.valid()) throw error(errc::invalid_argument, "to_host: the sharded array is empty");
  if (out.size() != array.size())
    throw error(errc::invalid_argument, "to_host: the array " + to_string(array.shape()) + " has " +
                                            std::to_string(array.size()) + " elements but the destination holds " +
                                            std::to_string(out.size()));
  const Shape& shape = array.shape();
  const IndexBox whole = detail::full_box(shape);
  std::vector<IndexBox> done;
  std::vector<std::pair<std::size_t, std::vector<T>>> staged;  // shard position, its host copy
  staged.reserve(array.shards().size());                       // the spans handed to the transfers must stay valid
  detail::submit_and_wait([&](std::vector<std::future<void>>& pending) {
    for (std::size_t i = 0; i < array.shards().size(); ++i) {
      IndexBox box = array.shard_box(i);
      if (box.numel() == 0 || std::find(done.begin(), done.end(), box) != done.end()) continue;
      std::size_t runs = 0;
      std::size_t first_offset = 0;
      detail::for_each_run(box, box, whole, [&](std::size_t, std::size_t d, std::size_t) {
        if (runs++ == 0) first_offset = d;
      });
      const auto& shard = array.shard(i);
      if (runs == 1) {
        pending.push_back(shard.device().copy_to_host(shard, out.subspan(first_offset, shard.size())));
      } else {
        staged.emplace_back(i, std::vector<T>(shard.size()));
        pending.push_back(shard.device().copy_to_host(shard, std::span<T>(staged.back().second)));
      }
      done.push_back(std::move(box));
    }
  });
  for (const auto& entry : staged) {
    const IndexBox box = array.shard_box(entry.first);
    const T* host = entry.second.data();  // not a structured binding: clang 14 cannot capture those
    detail::for_each_run(box, box, whole, [&](std::size_t s, std::size_t d, std::size_t n) {
      std::memcpy(out.data() + d, host + s, n * sizeof(T));
    });
  }
}

/// The logical array in a new host vector (row-major). \throws xdev::error as `to_host(array, out)`.
template <class T>
[[nodiscard]] std::vector<T> to_host(const ShardedArray<T>& array) {
  std::vector<T> out(array.size());
  to_host(array, std::span<T>(out));
  return out;
}

}  // namespace xdev::spmd
