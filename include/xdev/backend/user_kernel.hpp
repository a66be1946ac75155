/// \file
/// The vocabulary of user device code: a kernel's source with its parameter list (`KernelSource`,
/// `KernelParam`), a launch's shape (`NDRange`) and arguments (`KernelLaunchArgs`), and the optional
/// backend capability that compiles and runs such kernels (`concepts::RunsSourceKernels`: the
/// OpenCL plugin, for OpenCL C). Users write kernels with `xdev::Kernel` (<xdev/any/kernel.hpp>).
#pragma once

#include <xdev/backend/completion.hpp>
#include <xdev/core/dtype.hpp>
#include <xdev/core/error.hpp>

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace xdev {

/// The language of OpenCL C kernel source (what the OpenCL plugin compiles).
inline constexpr std::string_view opencl_c = "OpenCL C";

/// What a kernel parameter is: device memory holding elements of a dtype (a `__global T*` in OpenCL
/// C), or one value of a dtype passed by value.
enum class KernelArgKind : std::uint32_t { buffer = 0, scalar = 1 };

/// One parameter of a kernel, in the order of the source's signature.
struct KernelParam {
  KernelArgKind kind = KernelArgKind::buffer;
  DType dtype = DType::f32;

  /// A buffer of `T` elements (`__global T*`).
  template <HasDType T>
  [[nodiscard]] static constexpr KernelParam buffer() noexcept {
    return {KernelArgKind::buffer, dtype_of<T>};
  }
  /// A value of `T`, by value.
  template <HasDType T>
  [[nodiscard]] static constexpr KernelParam scalar() noexcept {
    return {KernelArgKind::scalar, dtype_of<T>};
  }
  friend constexpr bool operator==(const KernelParam&, const KernelParam&) = default;
};

/// "f32 buffer", "f64 scalar".
[[nodiscard]] inline std::string describe(const KernelParam& p) {
  return std::string(name_of(p.dtype)) + (p.kind == KernelArgKind::buffer ? " buffer" : " scalar");
}

/// A user kernel: its source in `language`, the function to run (`entry`), its parameters in
/// order, and build options for the compiler ("-cl-fast-relaxed-math"; may be empty).
/// Every member has a default, so designated initializers may leave any out without a warning.
struct KernelSource {
  std::string language{opencl_c};
  std::string source{};
  std::string entry{};
  std::vector<KernelParam> params{};
  std::string options{};
};

/// The work items of a launch: 1 to 3 extents (`{n}`, `{rows, cols}`). An empty range (no extents)
/// as a work-group size means "the backend's choice".
class NDRange {
 public:
  static constexpr std::size_t max_dims = 3;

  constexpr NDRange() noexcept = default;
  /// More than three extents are kept as a count that a launch rejects.
  constexpr NDRange(std::initializer_list<std::size_t> extents) noexcept
      : dims_(static_cast<std::uint32_t>(extents.size())) {
    std::size_t i = 0;
    for (std::size_t e : extents)
      if (i < max_dims) extents_[i++] = e;
  }

  /// 0 (empty), 1, 2 or 3; above 3 when built from a longer list (never valid).
  [[nodiscard]] constexpr std::uint32_t dims() const noexcept { return dims_; }
  /// Extent `d` (1 beyond `dims()`).
  [[nodiscard]] constexpr std::size_t operator[](std::size_t d) const noexcept {
    return d < dims_ && d < max_dims ? extents_[d] : 1;
  }
  /// The number of work items: the product of the extents (0 for an empty range).
  [[nodiscard]] constexpr std::size_t size() const noexcept {
    if (dims_ == 0) return 0;
    std::size_t n = 1;
    for (std::size_t d = 0; d < dims_ && d < max_dims; ++d) n *= extents_[d];
    return n;
  }
  [[nodiscard]] constexpr bool empty() const noexcept { return dims_ == 0; }
  friend constexpr bool operator==(const NDRange&, const NDRange&) = default;

 private:
  std::uint32_t dims_ = 0;
  std::array<std::size_t, max_dims> extents_{1, 1, 1};
};

/// "{1024}", "{64, 32}".
[[nodiscard]] inline std::string describe(const NDRange& r) {
  std::string s = "{";
  for (std::uint32_t d = 0; d < r.dims(); ++d) {
    if (d != 0) s += ", ";
    s += std::to_string(r[d]);
  }
  return s + "}";
}

/// One argument of a launch, for parameter kind `kind`: `memory` for a buffer, the value's bits for
/// a scalar (low bytes, as `memcpy` writes a value of its dtype). A buffer argument made from a
/// view (`AnyArrayView`) is a window of its allocation: `offset` is the byte offset of the
/// window's first element, which the kernel's pointer must start at (0 for a whole array). xdev
/// passes a nonzero `offset` only to a backend that declares `kernel_arg_offsets` (see
/// `takes_kernel_arg_offsets`) and refuses the launch on any other.
template <class H>
struct KernelArgValue {
  H memory{};
  std::uint64_t scalar_bits = 0;
  std::uint64_t offset = 0;
};

/// Whether backend `B` applies `KernelArgValue::offset` (it declares
/// `static constexpr bool kernel_arg_offsets = true;`): kernels on views of its arrays.
template <class B>
inline constexpr bool takes_kernel_arg_offsets = requires {
  requires B::kernel_arg_offsets;
};

namespace detail {
/// The first argument of `a` that is a window (a nonzero offset), or `a.args.size()`.
template <class H>
std::size_t first_window(const std::vector<KernelArgValue<H>>& args) noexcept {
  for (std::size_t i = 0; i < args.size(); ++i)
    if (args[i].offset != 0) return i;
  return args.size();
}
/// \throws xdev::error `errc::unimplemented` naming `backend` and the argument when one of `args`
/// is a window (for a backend that does not declare `kernel_arg_offsets`).
template <class H>
void refuse_windows(std::string_view backend, const std::vector<KernelArgValue<H>>& args) {
  const std::size_t w = first_window(args);
  if (w == args.size()) return;
  std::string what(backend);
  what += ": kernel argument ";
  what += std::to_string(w);
  what += " is a window (at byte ";
  what += std::to_string(args[w].offset);
  what += " of its array), but this backend's kernels take whole arrays only (pass the offset as a scalar)";
  throw error(errc::unimplemented, what);
}
}  // namespace detail

/// A launch, as a backend receives it: validated by xdev (one argument per parameter, dtypes and
/// devices checked, `global` of 1 to 3 nonzero extents, `local` empty or of the same dims dividing
/// `global`).
template <class H>
struct KernelLaunchArgs {
  NDRange global;
  NDRange local;
  std::vector<KernelArgValue<H>> args;
};

namespace concepts {

/// Optional: the backend compiles and runs user kernels given as source (the OpenCL plugin: OpenCL
/// C). `create_kernel` takes a source (a language it does not run is `errc::unimplemented`),
/// `launch_kernel` runs it on a device like an op (stream order, completion through `done`; it
/// compiles the kernel for that device on first use and keeps it, and a build failure is
/// `errc::invalid_argument` carrying the build log), and `destroy_kernel` lets it go once xdev no
/// longer launches it (launches already handed over still run). A handle is an integer or a pointer.
template <class B>
concept RunsSourceKernels = requires {
  typename B::kernel_handle;
}
&&(std::is_integral_v<typename B::kernel_handle> ||
   std::is_pointer_v<typename B::kernel_handle>)&&sizeof(typename B::kernel_handle) <= sizeof(std::uint64_t) &&
    requires(B& b, const KernelSource& src, std::size_t device, typename B::kernel_handle k,
             KernelLaunchArgs<typename B::memory_handle> args, Completion done) {
  { b.create_kernel(src) } -> std::same_as<typename B::kernel_handle>;
  b.launch_kernel(device, k, std::move(args), std::move(done));
  { b.destroy_kernel(k) }
  noexcept;
};

}  // namespace concepts
}  // namespace xdev
