/// \file
/// `xdev::spmd::VirtualDevice`: one device that stands for a whole mesh. Data placed on it stays in
/// host memory until `mark_sharding` says how it is split; then every shard travels straight to
/// its own device (see <xdev/spmd/placement.hpp> and docs/spmd.md).
///
///     xdev::spmd::VirtualDevice vd(mesh);                       // "SPMD:0" over 4 devices
///     auto x = vd.place(std::span<const float>(host), {1024, 128});   // host memory, no transfer
///     auto xs = xdev::spmd::mark_sharding(x, vd.sharding({"data", xdev::spmd::replicated})).get();
#pragma once

#include <xdev/any/any_device.hpp>
#include <xdev/any/detail/reaper.hpp>
#include <xdev/backends/host.hpp>
#include <xdev/core/error.hpp>
#include <xdev/core/shape.hpp>
#include <xdev/device/runtime.hpp>
#include <xdev/memory/array.hpp>
#include <xdev/spmd/mesh.hpp>
#include <xdev/spmd/partition_spec.hpp>
#include <xdev/spmd/sharding.hpp>

#include <cstddef>
#include <cstring>
#include <memory>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace xdev::spmd {

/// The name of the SPMD virtual device's device type: it prints as "SPMD:0".
inline constexpr std::string_view virtual_device_type = "SPMD";

/// The SPMD virtual device (`VirtualDevice` is this template over the host backend): one logical
/// device (`device()`, printed "SPMD:0") that stands for every physical device of `mesh()`.
/// Copies share the same virtual device.
///
/// Counting: `device_count()` is the number of physical devices (the mesh's size), not 1;
/// `logical_device_count()` is 1. `accelerator::device_count()` reports the same physical count
/// when SPMD is on.
///
/// Memory placed on the virtual device is host memory: nothing reaches a physical device until
/// `mark_sharding`. Its allocator's statistics (`device().memory_stats()`) count it; no physical
/// device's `transfer_stats()` changes.
///
/// `Backend` holds the virtual device's memory: a host backend (`backends::Host` or a class
/// derived from it) made with one device named "SPMD". It is a template parameter only so that
/// the cost of erasing it is paid where a virtual device is made, not by every file that includes
/// this header.
template <class Backend = backends::Host>
class BasicVirtualDevice {
 public:
  /// A virtual device over `mesh`.
  /// \throws xdev::error `errc::invalid_argument` for an empty mesh.
  explicit BasicVirtualDevice(Mesh mesh) {
    if (mesh.empty()) throw error(errc::invalid_argument, "an SPMD virtual device needs a mesh with devices");
    auto state = std::make_shared<State>();
    state->mesh = std::move(mesh);
    // Reaped: a completion may hold the runtime last, on one of the runtime's own worker threads.
    state->runtime = xdev::detail::make_reaped<Runtime<Backend>>(
        RuntimeOptions{}, typename Backend::Options{.devices = 1, .name = std::string(virtual_device_type)});
    state->device = AnyDevice(state->runtime->device(0), state->runtime);
    state_ = std::move(state);
  }

  /// The mesh of physical devices it stands for.
  [[nodiscard]] const Mesh& mesh() const noexcept { return state_->mesh; }
  /// The logical device itself ("SPMD:0"): arrays placed on the virtual device live on it.
  [[nodiscard]] const AnyDevice& device() const noexcept { return state_->device; }
  /// The physical devices, in mesh order.
  [[nodiscard]] const std::vector<AnyDevice>& physical_devices() const noexcept { return state_->mesh.devices(); }
  /// Number of physical devices (the mesh's size).
  [[nodiscard]] std::size_t device_count() const noexcept { return state_->mesh.size(); }
  /// Number of logical devices a program sees: 1.
  [[nodiscard]] static constexpr std::size_t logical_device_count() noexcept { return 1; }

  /// A sharding over this device's mesh. \throws xdev::error as `Sharding`'s constructor.
  [[nodiscard]] Sharding sharding(PartitionSpec spec) const { return Sharding(state_->mesh, std::move(spec)); }

  /// A new array of `shape` on the virtual device (host memory), contents unspecified.
  /// \throws xdev::error `errc::out_of_memory` as `AnyDevice::allocate`.
  template <class T>
  [[nodiscard]] AnyArray<T> empty(Shape shape) const {
    return xdev::empty<T>(state_->device, shape);
  }

  /// A new array of `shape` on the virtual device holding a copy of `data` (row-major). The copy
  /// is a host memory copy, not a device transfer: no physical device is touched.
  /// \throws xdev::error `errc::invalid_argument` when `data.size() != shape.numel()`, or
  ///         `errc::out_of_memory`.
  template <class T>
  [[nodiscard]] AnyArray<T> place(std::span<const T> data, Shape shape) const {
    if (data.size() != static_cast<std::size_t>(shape.numel()))
      throw error(errc::invalid_argument, "place: " + std::to_string(data.size()) + " elements cannot fill shape " +
                                              to_string(shape) + " (" + std::to_string(shape.numel()) + " elements)");
    auto a = empty<T>(shape);
    if (!data.empty()) std::memcpy(host_data(a), data.data(), data.size_bytes());
    return a;
  }

  /// True when `dev` is a virtual device (of any `VirtualDevice`).
  [[nodiscard]] static bool is_virtual(const AnyDevice& dev) noexcept {
    return dev.type_name() == virtual_device_type && dev.template target<Backend>() != nullptr;
  }

  /// The host address of an array on a virtual device.
  /// \throws xdev::error `errc::invalid_argument` when `a` is not on a virtual device.
  template <class T>
  [[nodiscard]] static T* host_data(AnyArray<T>& a) {
    return const_cast<T*>(host_data(static_cast<const AnyArray<T>&>(a)));
  }
  template <class T>
  [[nodiscard]] static const T* host_data(const AnyArray<T>& a) {
    const auto* typed = a.device().template target<Backend>();
    if (typed == nullptr || a.device().type_name() != virtual_device_type)
      throw error(errc::invalid_argument, "the array is on " +
                                              (a.device().valid() ? a.device().name() : std::string("no device")) +
                                              ", not on an SPMD virtual device");
    if (a.size() == 0) return nullptr;
    return static_cast<const T*>(typed->backend().host_address(
        xdev::detail::unerase_handle<typename Backend::memory_handle>(a.buffer().native_handle())));
  }

  friend bool operator==(const BasicVirtualDevice& a, const BasicVirtualDevice& b) noexcept {
    return a.state_ == b.state_;
  }
  /// "SPMD:0 over Mesh(data=4: HOST:0 HOST:1 HOST:2 HOST:3)".
  friend std::ostream& operator<<(std::ostream& os, const BasicVirtualDevice& v) {
    return os << v.device().name() << " over " << v.mesh();
  }

 private:
  struct State {
    Mesh mesh;
    std::shared_ptr<Runtime<Backend>> runtime;
    AnyDevice device;
  };
  std::shared_ptr<const State> state_;
};

/// The SPMD virtual device (see `BasicVirtualDevice`).
using VirtualDevice = BasicVirtualDevice<>;

}  // namespace xdev::spmd
