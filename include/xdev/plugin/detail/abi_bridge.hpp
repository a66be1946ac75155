/// \file
/// What both sides of the plugin boundary share: `xdev::plugin::ClientOptions` (the C++ mirror of
/// `xdev_client_options`), conversions between xdev's C++ values and the plain structs of
/// <xdev/plugin/abi.h>, and the rules that turn exceptions into status codes and messages and back.
/// Included by <xdev/plugin/define.hpp> (plugin side) and <xdev/plugin/plugin_backend.hpp> (host side).
#pragma once

#include <xdev/plugin/abi.h>
#include <xdev/backend/strided_region.hpp>
#include <xdev/core/dtype.hpp>
#include <xdev/core/error.hpp>
#include <xdev/core/half.hpp>
#include <xdev/policy/capability_set.hpp>
#include <xdev/policy/policies.hpp>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

namespace xdev::plugin {

/// The options of one client (one backend object of a plugin): the C++ mirror of
/// `xdev_client_options`. A plugin's backend type that is constructible from
/// `const xdev::plugin::ClientOptions&` receives them (see `XDEV_DEFINE_PLUGIN`); the host passes
/// them to `PluginBackend`'s constructor.
struct ClientOptions {
  /// The in-flight bound xdev will enforce; unset: the plugin's `MaxInflight` capability.
  std::optional<std::size_t> max_inflight = std::nullopt;
  /// This process's place among the processes on its host (each takes its share of the devices).
  std::uint32_t local_rank = 0;
  std::uint32_t local_world_size = 1;
  /// This process's place among all processes of the job.
  std::uint32_t global_rank = 0;
  std::uint32_t global_world_size = 1;

  friend bool operator==(const ClientOptions&, const ClientOptions&) = default;
};

/// The devices [first, last) that local process `rank` of `size` takes out of `count`: a
/// contiguous block [rank * count / size, (rank + 1) * count / size) when there are at least as
/// many devices as processes; otherwise device `rank % count` alone (processes then share devices).
/// What xdev's OpenCL and CUDA plugins do with `ClientOptions::local_rank` / `local_world_size`.
constexpr std::pair<std::size_t, std::size_t> device_share(std::size_t count, std::size_t rank,
                                                           std::size_t size) noexcept {
  if (size <= 1 || count == 0) return {0, count};
  if (count >= size) return {rank * count / size, (rank + 1) * count / size};
  return {rank % count, rank % count + 1};
}

/// `device_share` for the local place `options` give.
constexpr std::pair<std::size_t, std::size_t> device_share(std::size_t count, const ClientOptions& options) noexcept {
  return device_share(count, options.local_rank, options.local_world_size);
}

namespace detail {

// The C enumerations are the values of the C++ ones (abi.h says so; these keep it true).
static_assert(static_cast<int>(errc::invalid_argument) == XDEV_ERR_INVALID_ARGUMENT &&
                  static_cast<int>(errc::out_of_memory) == XDEV_ERR_OUT_OF_MEMORY &&
                  static_cast<int>(errc::not_found) == XDEV_ERR_NOT_FOUND &&
                  static_cast<int>(errc::unavailable) == XDEV_ERR_UNAVAILABLE &&
                  static_cast<int>(errc::unimplemented) == XDEV_ERR_UNIMPLEMENTED &&
                  static_cast<int>(errc::incompatible_abi) == XDEV_ERR_INCOMPATIBLE_ABI &&
                  static_cast<int>(errc::cancelled) == XDEV_ERR_CANCELLED &&
                  static_cast<int>(errc::deadline_exceeded) == XDEV_ERR_DEADLINE_EXCEEDED &&
                  static_cast<int>(errc::internal) == XDEV_ERR_INTERNAL,
              "xdev::errc and the XDEV_ERR_* codes of <xdev/plugin/abi.h> disagree");
static_assert(static_cast<int>(RngAlgorithm::philox) == XDEV_RNG_PHILOX &&
                  static_cast<int>(RngAlgorithm::three_fry) == XDEV_RNG_THREE_FRY,
              "xdev::RngAlgorithm and XDEV_RNG_* disagree");
static_assert(all_dtypes.size() == XDEV_DTYPE_COUNT, "xdev::DType and XDEV_DTYPE_COUNT disagree");

/// The C++ element type of each dtype, in `DType` order (`dtype_type<XDEV_DTYPE_F32>` is float).
using DTypeTypes = std::tuple<bool, std::uint8_t, std::int32_t, std::int64_t, f16, bf16, float, double>;
template <std::size_t I>
using dtype_type = std::tuple_element_t<I, DTypeTypes>;

template <std::size_t... I>
consteval bool dtype_types_match(std::index_sequence<I...>) {
  return ((dtype_of<dtype_type<I>> == static_cast<DType>(I)) && ...);
}
static_assert(dtype_types_match(std::make_index_sequence<XDEV_DTYPE_COUNT>{}),
              "xdev::plugin::detail::DTypeTypes is not in xdev::DType order");

/// The name of a dtype value received from the other side ("f32", or "dtype 12" when out of range).
inline std::string dtype_name(std::uint32_t t) {
  if (t < XDEV_DTYPE_COUNT) return std::string(name_of(static_cast<DType>(t)));
  return "dtype " + std::to_string(t);
}

/// Calls `f(std::type_identity<T>{})` with the element type of dtype value `t`.
/// \throws xdev::error `errc::invalid_argument` for a value that is no dtype.
template <class F>
void visit_dtype(std::uint32_t t, F&& f) {
  switch (t) {
    case XDEV_DTYPE_BOOL:
      return f(std::type_identity<bool>{});
    case XDEV_DTYPE_U8:
      return f(std::type_identity<std::uint8_t>{});
    case XDEV_DTYPE_I32:
      return f(std::type_identity<std::int32_t>{});
    case XDEV_DTYPE_I64:
      return f(std::type_identity<std::int64_t>{});
    case XDEV_DTYPE_F16:
      return f(std::type_identity<f16>{});
    case XDEV_DTYPE_BF16:
      return f(std::type_identity<bf16>{});
    case XDEV_DTYPE_F32:
      return f(std::type_identity<float>{});
    case XDEV_DTYPE_F64:
      return f(std::type_identity<double>{});
    default:
      throw error(errc::invalid_argument, "dtype value " + std::to_string(t) + " is not an XDEV_DTYPE_* value (0 to " +
                                              std::to_string(XDEV_DTYPE_COUNT - 1) + ")");
  }
}

/// True for a device type name xdev accepts from a plugin: `[A-Z][A-Z0-9_]*`.
constexpr bool is_plugin_name(std::string_view s) noexcept {
  if (s.empty() || s[0] < 'A' || s[0] > 'Z') return false;
  for (char c : s)
    if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) return false;
  return true;
}

constexpr bool is_plugin_name(const char* s) noexcept {
  return s != nullptr && is_plugin_name(std::string_view(s));
}

/// \throws xdev::error `errc::incompatible_abi` "<what>: expected at least <expected> bytes, got <got>"
/// when a struct received from the other side is smaller than the oldest version this side reads.
/// The size of `xdev_completion` before 1.7 appended `device_times` (what an older xdev passes).
inline constexpr std::size_t completion_size_v1_1 = offsetof(xdev_completion, device_times);

inline void check_struct_size(std::size_t got, std::size_t expected, const char* what) {
  if (got < expected)
    throw error(errc::incompatible_abi, std::string(what) + ": expected at least " + std::to_string(expected) +
                                            " bytes, got " + std::to_string(got));
}

/// The client options as the C struct.
inline xdev_client_options to_c(const ClientOptions& o) noexcept {
  xdev_client_options c{};
  c.struct_size = sizeof(xdev_client_options);
  c.max_inflight = o.max_inflight.value_or(0);
  c.local_rank = o.local_rank;
  c.local_world_size = o.local_world_size;
  c.global_rank = o.global_rank;
  c.global_world_size = o.global_world_size;
  return c;
}

/// The client options from the C struct (whose size the caller has checked).
inline ClientOptions from_c(const xdev_client_options& c) noexcept {
  ClientOptions o;
  if (c.max_inflight != 0) o.max_inflight = static_cast<std::size_t>(c.max_inflight);
  o.local_rank = c.local_rank;
  o.local_world_size = c.local_world_size;
  o.global_rank = c.global_rank;
  o.global_world_size = c.global_world_size;
  return o;
}

/// A capability set as the C struct.
inline xdev_capabilities to_c(const CapabilitySet& s) noexcept {
  xdev_capabilities c{};
  c.struct_size = sizeof(xdev_capabilities);
  c.dense_gather_factor = s.dense_gather_factor;
  c.rng_default = static_cast<std::uint32_t>(s.rng_default);
  c.autocast_key = static_cast<std::uint32_t>(s.autocast_key);
  c.autocast_dtype = static_cast<std::uint32_t>(s.autocast_dtype);
  c.supported_dtypes = s.supported_dtypes;
  c.max_inflight = s.max_inflight;
  c.memory_per_device = s.memory_per_device;
  c.collective_backend = static_cast<std::uint32_t>(s.collective_backend);
  c.priority = s.priority;
  return c;
}

/// A strided region as the C struct of ABI 1.11.
inline xdev_strided_region to_c(const StridedRegion& r) noexcept {
  return {sizeof(xdev_strided_region), r.offset, r.row_bytes, r.rows, r.row_pitch, r.slices, r.slice_pitch};
}

/// The strided region a host passed (`copy_to_host_strided`, `copy_to_device_strided`).
/// \throws xdev::error `errc::invalid_argument` for a null or short struct, or rows that overlap.
inline StridedRegion from_c(const xdev_strided_region* r) {
  if (r == nullptr || r->struct_size < sizeof(xdev_strided_region))
    throw error(errc::invalid_argument, "the strided region is null or smaller than the struct of ABI 1.11");
  const auto z = [](std::uint64_t v) { return static_cast<std::size_t>(v); };
  const StridedRegion out{z(r->offset), z(r->row_bytes), z(r->rows), z(r->row_pitch), z(r->slices), z(r->slice_pitch)};
  if (out.row_pitch < out.row_bytes || (out.slices > 1 && out.slice_pitch < out.rows * out.row_pitch))
    throw error(errc::invalid_argument, "the strided region's rows overlap: row_pitch " +
                                            std::to_string(out.row_pitch) + ", row_bytes " +
                                            std::to_string(out.row_bytes) + ", rows " + std::to_string(out.rows) +
                                            ", slice_pitch " + std::to_string(out.slice_pitch));
  return out;
}

/// The capability set from the C struct (whose size the caller has checked).
/// \throws xdev::error `errc::invalid_argument` naming `who`, the field and its accepted values when
/// a field holds no value of its enumeration.
inline CapabilitySet from_c(const xdev_capabilities& c, std::string_view who) {
  const auto bad = [&](const char* field, std::uint64_t value, const char* accepted) {
    return error(errc::invalid_argument, std::string(who) + ": capability " + field + "=" + std::to_string(value) +
                                             " is not accepted; accepted: " + accepted);
  };
  if (c.rng_default > XDEV_RNG_THREE_FRY) throw bad("rng_default", c.rng_default, "0 (philox), 1 (three_fry)");
  if (c.autocast_key > static_cast<std::uint32_t>(AutocastKey::private_use))
    throw bad("autocast_key", c.autocast_key, "0 to 5 (none, cpu, cuda, xla, npu, private_use)");
  if (c.autocast_dtype != XDEV_DTYPE_F32 && c.autocast_dtype != XDEV_DTYPE_F16 && c.autocast_dtype != XDEV_DTYPE_BF16)
    throw bad("autocast_dtype", c.autocast_dtype, "4 (f16), 5 (bf16), 6 (f32)");
  if (c.collective_backend > static_cast<std::uint32_t>(CollectiveKind::mpi))
    throw bad("collective_backend", c.collective_backend, "0 (direct), 1 (ring), 2 (mpi)");
  if (c.max_inflight == 0) throw bad("max_inflight", 0, "at least 1");
  CapabilitySet s;
  s.dense_gather_factor = static_cast<std::size_t>(c.dense_gather_factor);
  s.rng_default = static_cast<RngAlgorithm>(c.rng_default);
  s.autocast_key = static_cast<AutocastKey>(c.autocast_key);
  s.autocast_dtype = static_cast<DType>(c.autocast_dtype);
  s.max_inflight = static_cast<std::size_t>(c.max_inflight);
  s.supported_dtypes = c.supported_dtypes & ((std::uint32_t{1} << XDEV_DTYPE_COUNT) - 1);
  s.memory_per_device = static_cast<std::size_t>(c.memory_per_device);
  s.collective_backend = static_cast<CollectiveKind>(c.collective_backend);
  s.priority = c.priority;
  return s;
}

/// A failure as it crosses the boundary: a status code and a message.
struct Failure {
  xdev_status code = XDEV_ERR_INTERNAL;
  std::string message;
};

/// The status and message of an exception: an `xdev::error` keeps its code, `std::bad_alloc` is
/// out_of_memory, anything else internal with its `what()`.
inline Failure failure_of(std::exception_ptr ep) noexcept {
  try {
    try {
      std::rethrow_exception(std::move(ep));
    } catch (const error& e) {
      const int code = e.code().category() == error_category() ? e.code().value() : XDEV_ERR_INTERNAL;
      return {code >= XDEV_ERR_INVALID_ARGUMENT && code <= XDEV_ERR_INTERNAL ? code : XDEV_ERR_INTERNAL, e.message()};
    } catch (const std::bad_alloc& e) {
      return {XDEV_ERR_OUT_OF_MEMORY, e.what()};
    } catch (const std::exception& e) {
      return {XDEV_ERR_INTERNAL, e.what()};
    } catch (...) {
      return {XDEV_ERR_INTERNAL, "an exception that is not a std::exception"};
    }
  } catch (...) {  // building a message ran out of memory
    return {XDEV_ERR_OUT_OF_MEMORY, {}};
  }
}

/// The `errc` of a status received from the other side; `errc::internal` for a value that is none.
inline errc errc_of(xdev_status s) noexcept {
  return s >= XDEV_ERR_INVALID_ARGUMENT && s <= XDEV_ERR_INTERNAL ? static_cast<errc>(s) : errc::internal;
}

/// The message to use for status `s` when the other side gave none (or an unknown status).
inline std::string status_text(xdev_status s, const char* message) {
  std::string text = message != nullptr && *message != '\0'
                         ? std::string(message)
                         : "failed with status " + std::to_string(s) + " and no message";
  if (s != XDEV_OK && (s < XDEV_ERR_INVALID_ARGUMENT || s > XDEV_ERR_INTERNAL))
    text += " (status " + std::to_string(s) + " is no XDEV_ERR_* code)";
  return text;
}

}  // namespace detail
}  // namespace xdev::plugin
