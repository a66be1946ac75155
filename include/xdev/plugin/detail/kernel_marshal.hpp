/// \file
/// User kernels across the plugin boundary (ABI 1.9), both ways: on the host's side
/// `xdev::KernelSource` and `xdev::KernelLaunchArgs` as the C `xdev_kernel_source` and
/// `xdev_kernel_launch` (`to_c`, for `PluginBackend`); on the plugin's side back again, every field
/// checked, so that a backend's `create_kernel` and `launch_kernel` receive what xdev's own `Kernel`
/// would have given them.
#pragma once

#include <xdev/plugin/abi.h>
#include <xdev/backend/user_kernel.hpp>
#include <xdev/core/dtype.hpp>
#include <xdev/core/error.hpp>
#include <xdev/plugin/detail/abi_bridge.hpp>
#include <xdev/plugin/detail/entry_guard.hpp>
#include <xdev/plugin/detail/op_marshal.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace xdev::plugin::detail {

/// `s` as an `xdev_kernel_source`, valid while `s` and `params` (filled here) are.
inline xdev_kernel_source to_c(const KernelSource& s, std::vector<xdev_kernel_param>& params) {
  params.clear();
  for (const KernelParam& p : s.params)
    params.push_back({static_cast<std::uint32_t>(p.kind), static_cast<std::uint32_t>(p.dtype)});
  return {sizeof(xdev_kernel_source),
          s.language.c_str(),
          s.source.data(),
          s.source.size(),
          s.entry.c_str(),
          s.options.c_str(),
          static_cast<std::uint32_t>(params.size()),
          params.data()};
}

/// The size of an `xdev_kernel_launch` of ABI 1.9: everything before `offsets`, which 1.10 appended.
inline constexpr std::size_t kernel_launch_size_v1_9 = offsetof(xdev_kernel_launch, offsets);

/// `a` as an `xdev_kernel_launch`, valid while `args` and `offsets` (filled here) are; `offsets`
/// stays empty, and the launch's null, when no argument is a window.
template <class H>
xdev_kernel_launch to_c(const KernelLaunchArgs<H>& a, std::vector<xdev_kernel_arg>& args,
                        std::vector<std::uint64_t>& offsets) {
  args.clear();
  offsets.clear();
  for (const auto& v : a.args) args.push_back({handle_bits(v.memory), v.scalar_bits});
  if (xdev::detail::first_window(a.args) != a.args.size())
    for (const auto& v : a.args) offsets.push_back(v.offset);
  xdev_kernel_launch l{};
  l.struct_size = sizeof l;
  l.dims = a.global.dims();
  for (std::uint32_t d = 0; d < l.dims && d < NDRange::max_dims; ++d) {
    l.global[d] = a.global[d];
    l.local[d] = a.local.empty() ? 0 : a.local[d];
  }
  l.arg_count = static_cast<std::uint32_t>(args.size());
  l.args = args.data();
  l.offsets = offsets.empty() ? nullptr : offsets.data();
  return l;
}

/// `xdev_kernel_source` as a `KernelSource`.
/// \throws xdev::error `errc::incompatible_abi` for a struct smaller than this plugin knows,
/// `errc::invalid_argument` for a null text, a parameter of no known kind or dtype.
inline KernelSource kernel_source_from(const xdev_kernel_source* c) {
  const auto& s = deref(c, "xdev_kernel_source");
  check_struct_size(s.struct_size, sizeof(xdev_kernel_source), "xdev_kernel_source");
  auto bad = [](const std::string& what) { return error(errc::invalid_argument, "xdev_kernel_source: " + what); };
  if (s.language == nullptr || s.entry == nullptr) throw bad("the language or the entry is null");
  if (s.source == nullptr && s.source_size != 0) throw bad("the source is null");
  if (s.params == nullptr && s.param_count != 0) throw bad("the parameters are null");
  KernelSource out;
  out.language = s.language;
  out.source.assign(s.source != nullptr ? s.source : "", static_cast<std::size_t>(s.source_size));
  out.entry = s.entry;
  out.options = s.options != nullptr ? s.options : "";
  out.params.reserve(s.param_count);
  for (std::uint32_t i = 0; i < s.param_count; ++i) {
    const xdev_kernel_param& p = s.params[i];
    if (p.kind != XDEV_KERNEL_ARG_BUFFER && p.kind != XDEV_KERNEL_ARG_SCALAR)
      throw bad("parameter " + std::to_string(i) + " has kind " + std::to_string(p.kind) +
                ", not a buffer (0) or scalar (1)");
    if (p.dtype >= XDEV_DTYPE_COUNT)
      throw bad("parameter " + std::to_string(i) + " has dtype " + std::to_string(p.dtype) + ", not an XDEV_DTYPE_*");
    out.params.push_back({static_cast<KernelArgKind>(p.kind), static_cast<DType>(p.dtype)});
  }
  return out;
}

/// `xdev_kernel_launch` as a `KernelLaunchArgs<H>` (of ABI 1.9 or later: a 1.9 launch's arguments
/// are whole allocations).
/// \throws xdev::error `errc::incompatible_abi` for a struct smaller than ABI 1.9's,
/// `errc::invalid_argument` for dims outside [1, 3], a zero extent, a work-group that does not
/// divide the range, null arguments.
template <class H>
KernelLaunchArgs<H> kernel_launch_from(const xdev_kernel_launch* c) {
  const auto& l = deref(c, "xdev_kernel_launch");
  check_struct_size(l.struct_size, kernel_launch_size_v1_9, "xdev_kernel_launch");
  const std::uint64_t* offsets = l.struct_size >= sizeof(xdev_kernel_launch) ? l.offsets : nullptr;
  auto bad = [](const std::string& what) { return error(errc::invalid_argument, "xdev_kernel_launch: " + what); };
  if (l.dims < 1 || l.dims > NDRange::max_dims) throw bad(std::to_string(l.dims) + " dims, not 1 to 3");
  if (l.args == nullptr && l.arg_count != 0) throw bad("the arguments are null");
  const bool has_local = l.local[0] != 0 || l.local[1] != 0 || l.local[2] != 0;
  KernelLaunchArgs<H> out;
  const auto e = [&](const std::uint64_t(&v)[3], std::uint32_t d) { return static_cast<std::size_t>(v[d]); };
  if (l.dims == 1) {
    out.global = {e(l.global, 0)};
    if (has_local) out.local = {e(l.local, 0)};
  } else if (l.dims == 2) {
    out.global = {e(l.global, 0), e(l.global, 1)};
    if (has_local) out.local = {e(l.local, 0), e(l.local, 1)};
  } else {
    out.global = {e(l.global, 0), e(l.global, 1), e(l.global, 2)};
    if (has_local) out.local = {e(l.local, 0), e(l.local, 1), e(l.local, 2)};
  }
  for (std::uint32_t d = 0; d < l.dims; ++d) {
    if (l.global[d] == 0) throw bad("global extent " + std::to_string(d) + " is 0");
    if (has_local && (l.local[d] == 0 || l.global[d] % l.local[d] != 0))
      throw bad("the work-group " + describe(out.local) + " does not divide the range " + describe(out.global));
  }
  out.args.reserve(l.arg_count);
  for (std::uint32_t i = 0; i < l.arg_count; ++i)
    out.args.push_back({handle_from<H>(l.args[i].memory), l.args[i].scalar_bits, offsets ? offsets[i] : 0});
  return out;
}

}  // namespace xdev::plugin::detail
