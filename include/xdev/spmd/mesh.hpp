/// \file
/// `xdev::spmd::Mesh`: devices arranged in an N-dimensional grid with named axes. See docs/spmd.md.
///
///     std::vector<xdev::AnyDevice> devs = ...;                 // 4 devices, any backends
///     xdev::spmd::Mesh mesh(devs, {2, 2}, {"data", "model"});
///     mesh.axis_size("model");                                // 2
///     mesh.at({1, 0});                                        // devs[2] (row-major)
///     mesh.groups("data");                                    // {{0, 2}, {1, 3}}
#pragma once

#include <xdev/any/any_device.hpp>
#include <xdev/core/error.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <numeric>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace xdev::spmd {

/// An N-dimensional arrangement of `AnyDevice`s with one name per axis. Devices are listed in
/// row-major order of the mesh shape: the last axis varies fastest, so in a `{2, 2}` mesh over
/// `{"data", "model"}` the devices `d0 d1 d2 d3` sit at `(0,0) (0,1) (1,0) (1,1)`.
///
/// A mesh is a cheap-to-copy value (its devices are shared handles). Backends may mix: every
/// entry is an `AnyDevice`. Compare meshes with `==` (same devices, shape and names, in order).
class Mesh {
 public:
  /// An empty mesh (no devices, no axes); `size()` is 0.
  Mesh() = default;

  /// `devices` arranged in `shape` with one name per axis.
  /// \throws xdev::error `errc::invalid_argument` naming the problem when: `shape` and `axis_names`
  ///         differ in length, there are no axes, an extent is < 1, the product of `shape` differs
  ///         from the number of devices, a device is invalid or appears twice, an axis name is
  ///         empty or appears twice.
  Mesh(std::vector<AnyDevice> devices, std::vector<std::int64_t> shape, std::vector<std::string> axis_names)
      : devices_(std::move(devices)), shape_(std::move(shape)), names_(std::move(axis_names)) {
    validate();
    strides_ = make_strides(shape_);
  }

  /// A one-axis mesh: every device in order along `axis_name`.
  /// \throws xdev::error as the general constructor (no devices, a device twice, ...).
  Mesh(std::vector<AnyDevice> devices, std::string axis_name)
      : Mesh(devices, {static_cast<std::int64_t>(devices.size())}, {std::move(axis_name)}) {}

  /// Number of devices.
  [[nodiscard]] std::size_t size() const noexcept { return devices_.size(); }
  /// Number of axes.
  [[nodiscard]] std::size_t ndim() const noexcept { return shape_.size(); }
  [[nodiscard]] bool empty() const noexcept { return devices_.empty(); }
  /// Extent of every axis, in axis order.
  [[nodiscard]] const std::vector<std::int64_t>& shape() const noexcept { return shape_; }
  /// Name of every axis, in axis order.
  [[nodiscard]] const std::vector<std::string>& axis_names() const noexcept { return names_; }
  /// Every device in row-major mesh order (the order of the constructor's list).
  [[nodiscard]] const std::vector<AnyDevice>& devices() const noexcept { return devices_; }

  /// True when an axis is called `name`.
  [[nodiscard]] bool has_axis(std::string_view name) const noexcept {
    return std::ranges::find(names_, name) != names_.end();
  }
  /// Position of axis `name`.
  /// \throws xdev::error `errc::invalid_argument` naming the axis and the mesh's axes.
  [[nodiscard]] std::size_t axis_index(std::string_view name) const {
    auto it = std::ranges::find(names_, name);
    if (it == names_.end())
      throw error(errc::invalid_argument,
                  "mesh has no axis '" + std::string(name) + "'; its axes are " + describe_axes());
    return static_cast<std::size_t>(it - names_.begin());
  }
  /// Extent of axis `name`. \throws xdev::error as `axis_index`.
  [[nodiscard]] std::int64_t axis_size(std::string_view name) const { return shape_[axis_index(name)]; }

  /// The device at flat (row-major) position `flat`.
  /// \throws xdev::error `errc::invalid_argument` when `flat >= size()`.
  [[nodiscard]] const AnyDevice& device(std::size_t flat) const {
    if (flat >= devices_.size())
      throw error(errc::invalid_argument, "mesh device index " + std::to_string(flat) + " is out of range for " +
                                              std::to_string(devices_.size()) + " devices");
    return devices_[flat];
  }
  /// The device at mesh coordinates `coords` (one per axis). \throws xdev::error as `flat_index`.
  [[nodiscard]] const AnyDevice& at(std::span<const std::int64_t> coords) const { return devices_[flat_index(coords)]; }
  [[nodiscard]] const AnyDevice& at(std::initializer_list<std::int64_t> coords) const {
    return at(std::span<const std::int64_t>(coords.begin(), coords.size()));
  }

  /// Row-major position of `coords`.
  /// \throws xdev::error `errc::invalid_argument` for the wrong number of coordinates or one out of range.
  [[nodiscard]] std::size_t flat_index(std::span<const std::int64_t> coords) const {
    if (coords.size() != shape_.size())
      throw error(errc::invalid_argument, "mesh coordinates have " + std::to_string(coords.size()) +
                                              " entries, but the mesh has " + std::to_string(shape_.size()) + " axes");
    std::size_t flat = 0;
    for (std::size_t a = 0; a < coords.size(); ++a) {
      if (coords[a] < 0 || coords[a] >= shape_[a])
        throw error(errc::invalid_argument, "mesh coordinate " + std::to_string(coords[a]) + " on axis '" + names_[a] +
                                                "' is out of range [0, " + std::to_string(shape_[a]) + ")");
      flat += static_cast<std::size_t>(coords[a]) * strides_[a];
    }
    return flat;
  }
  /// Mesh coordinates of flat position `flat` (one per axis).
  /// \throws xdev::error `errc::invalid_argument` when `flat >= size()`.
  [[nodiscard]] std::vector<std::int64_t> coords(std::size_t flat) const {
    (void)device(flat);
    std::vector<std::int64_t> out(shape_.size());
    for (std::size_t a = 0; a < out.size(); ++a)
      out[a] = static_cast<std::int64_t>((flat / strides_[a]) % static_cast<std::size_t>(shape_[a]));
    return out;
  }
  /// Coordinate of flat position `flat` along axis `name`. \throws xdev::error as `coords`, `axis_index`.
  [[nodiscard]] std::int64_t coord(std::size_t flat, std::string_view name) const {
    const auto a = axis_index(name);
    (void)device(flat);
    return static_cast<std::int64_t>((flat / strides_[a]) % static_cast<std::size_t>(shape_[a]));
  }

  /// Flat position of `dev` in the mesh, or nullopt when it is not a member.
  [[nodiscard]] std::optional<std::size_t> index_of(const AnyDevice& dev) const noexcept {
    auto it = std::ranges::find(devices_, dev);
    if (it == devices_.end()) return std::nullopt;
    return static_cast<std::size_t>(it - devices_.begin());
  }

  /// The device groups of a collective over `axes`: devices whose coordinates agree on every other
  /// axis form one group, listed (as flat positions) in row-major order of their coordinates on
  /// `axes` (in the order given). Every device is in exactly one group; groups are ordered by their
  /// first member. An empty `axes` gives one group per device.
  /// \throws xdev::error `errc::invalid_argument` for an unknown axis or one named twice.
  [[nodiscard]] std::vector<std::vector<std::size_t>> groups(std::span<const std::string> axes) const {
    // Per named axis, in the order given: its index and its stride in a group (row-major on `axes`).
    struct Along {
      std::size_t axis;
      std::size_t stride = 1;
    };
    std::vector<Along> along;
    along.reserve(axes.size());
    for (const auto& name : axes) {
      const auto a = axis_index(name);
      if (std::ranges::any_of(along, [a](const Along& x) { return x.axis == a; }))
        throw error(errc::invalid_argument, "axis '" + name + "' is named twice in a collective's axes");
      along.push_back({a});
    }
    std::size_t group_size = 1;
    for (std::size_t i = along.size(); i-- > 0;) {
      along[i].stride = group_size;
      group_size *= static_cast<std::size_t>(shape_[along[i].axis]);
    }
    // A device's group is numbered by its coordinates on the other axes, row-major in mesh order:
    // the order of the groups' first members (those coordinates with every one on `axes` 0).
    std::vector<std::vector<std::size_t>> out;
    out.reserve(devices_.size() / group_size);
    for (std::size_t g = 0; g < devices_.size() / group_size; ++g) out.emplace_back(group_size);
    for (std::size_t flat = 0; flat < devices_.size(); ++flat) {
      std::size_t group = 0;
      std::size_t pos = 0;
      for (std::size_t a = 0; a < shape_.size(); ++a) {
        const auto extent = static_cast<std::size_t>(shape_[a]);
        const std::size_t c = (flat / strides_[a]) % extent;
        const auto x = std::ranges::find(along, a, &Along::axis);
        if (x != along.end())
          pos += c * x->stride;
        else
          group = group * extent + c;
      }
      out[group][pos] = flat;
    }
    return out;
  }
  /// `mesh.groups({"data", "model"})`. (Without this overload the braces would pick the
  /// `string_view` one through its two-pointer constructor.)
  [[nodiscard]] std::vector<std::vector<std::size_t>> groups(std::initializer_list<std::string> axes) const {
    return groups(std::span<const std::string>(axes.begin(), axes.size()));
  }
  /// `groups({axis})`.
  [[nodiscard]] std::vector<std::vector<std::size_t>> groups(std::string_view axis) const {
    const std::string one(axis);
    return groups(std::span<const std::string>(&one, 1));
  }

  /// "Mesh(data=2, model=2: HOST:0 HOST:1 HOST:2 HOST:3)".
  [[nodiscard]] std::string to_string() const {
    std::string out = "Mesh(" + describe_axes_sized() + ":";
    for (const auto& d : devices_) out += " " + d.name();
    return out + ")";
  }
  friend std::ostream& operator<<(std::ostream& os, const Mesh& m) { return os << m.to_string(); }

  friend bool operator==(const Mesh& a, const Mesh& b) noexcept {
    return a.shape_ == b.shape_ && a.names_ == b.names_ && a.devices_ == b.devices_;
  }

 private:
  static std::size_t product(const std::vector<std::int64_t>& s) {
    return static_cast<std::size_t>(std::accumulate(s.begin(), s.end(), std::int64_t{1}, std::multiplies<>{}));
  }
  // Row-major strides: the last axis has stride 1.
  static std::vector<std::size_t> make_strides(const std::vector<std::int64_t>& s) {
    std::vector<std::size_t> st(s.size(), 1);
    for (std::size_t a = s.size(); a-- > 1;) st[a - 1] = st[a] * static_cast<std::size_t>(s[a]);
    return st;
  }

  std::string describe_axes() const {
    std::string out = "(";
    for (std::size_t a = 0; a < names_.size(); ++a) out += (a ? ", '" : "'") + names_[a] + "'";
    return out + ")";
  }
  std::string describe_axes_sized() const {
    std::string out;
    for (std::size_t a = 0; a < names_.size(); ++a)
      out += (a ? ", " : "") + names_[a] + "=" + std::to_string(shape_[a]);
    return out;
  }
  std::string describe_shape() const {
    std::string out = "[";
    for (std::size_t a = 0; a < shape_.size(); ++a) out += (a ? ", " : "") + std::to_string(shape_[a]);
    return out + "]";
  }

  void validate() const {
    if (shape_.size() != names_.size())
      throw error(errc::invalid_argument, "mesh shape " + describe_shape() + " has " + std::to_string(shape_.size()) +
                                              " axes but " + std::to_string(names_.size()) +
                                              " axis name(s) were given");
    if (shape_.empty()) throw error(errc::invalid_argument, "a mesh needs at least one axis");
    for (std::size_t a = 0; a < shape_.size(); ++a)
      if (shape_[a] < 1)
        throw error(errc::invalid_argument, "mesh axis '" + names_[a] + "' has extent " + std::to_string(shape_[a]) +
                                                "; every extent must be at least 1");
    if (product(shape_) != devices_.size())
      throw error(errc::invalid_argument, "mesh shape " + describe_shape() + " holds " +
                                              std::to_string(product(shape_)) + " devices, but " +
                                              std::to_string(devices_.size()) + " were given");
    for (std::size_t a = 0; a < names_.size(); ++a) {
      if (names_[a].empty())
        throw error(errc::invalid_argument, "mesh axis " + std::to_string(a) + " has an empty name");
      if (std::find(names_.begin(), names_.begin() + static_cast<std::ptrdiff_t>(a), names_[a]) !=
          names_.begin() + static_cast<std::ptrdiff_t>(a))
        throw error(errc::invalid_argument, "mesh axis name '" + names_[a] + "' is used twice in " + describe_axes());
    }
    for (std::size_t i = 0; i < devices_.size(); ++i) {
      if (!devices_[i].valid())
        throw error(errc::invalid_argument, "mesh device " + std::to_string(i) + " is an empty AnyDevice");
      for (std::size_t j = 0; j < i; ++j)
        if (devices_[j] == devices_[i])
          throw error(errc::invalid_argument, "device " + devices_[i].name() + " appears twice in the mesh (at " +
                                                  std::to_string(j) + " and " + std::to_string(i) + ")");
    }
  }

  std::vector<AnyDevice> devices_;
  std::vector<std::int64_t> shape_;
  std::vector<std::string> names_;
  std::vector<std::size_t> strides_;
};

}  // namespace xdev::spmd
