/// \file
/// `xdev::DType`: the element types xdev devices store and compute with.
#pragma once

#include <xdev/core/error.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>

namespace xdev {

/// Element type of device data. `f16` and `bf16` are 16-bit floating point storage types.
enum class DType : std::uint8_t { bool_, u8, i32, i64, f16, bf16, f32, f64 };

/// Every dtype, in declaration order (for iteration and bit sets).
inline constexpr std::array<DType, 8> all_dtypes{DType::bool_, DType::u8,   DType::i32, DType::i64,
                                                 DType::f16,   DType::bf16, DType::f32, DType::f64};

/// Size of one element in bytes.
constexpr std::size_t size_of(DType t) noexcept {
  switch (t) {
    case DType::bool_:
    case DType::u8:
      return 1;
    case DType::f16:
    case DType::bf16:
      return 2;
    case DType::i32:
    case DType::f32:
      return 4;
    case DType::i64:
    case DType::f64:
      return 8;
  }
  return 0;
}

/// The canonical lower-case name ("bool", "u8", "i32", "i64", "f16", "bf16", "f32", "f64").
constexpr std::string_view name_of(DType t) noexcept {
  switch (t) {
    case DType::bool_:
      return "bool";
    case DType::u8:
      return "u8";
    case DType::i32:
      return "i32";
    case DType::i64:
      return "i64";
    case DType::f16:
      return "f16";
    case DType::bf16:
      return "bf16";
    case DType::f32:
      return "f32";
    case DType::f64:
      return "f64";
  }
  return "?";
}

/// True for f16, bf16, f32 and f64.
constexpr bool is_floating_point(DType t) noexcept {
  return t == DType::f16 || t == DType::bf16 || t == DType::f32 || t == DType::f64;
}

/// Parses a dtype name; accepts the canonical names and the common long forms
/// ("float32", "float", "double", "int32", "int64", "uint8", "float16", "half", "bfloat16").
/// Returns `std::nullopt` for anything else; see `parse_dtype` for the throwing form.
constexpr std::optional<DType> try_parse_dtype(std::string_view s) noexcept {
  for (DType t : all_dtypes)
    if (s == name_of(t)) return t;
  struct alias {
    std::string_view text;
    DType type;
  };
  constexpr std::array<alias, 10> aliases{{{"bool_", DType::bool_},
                                           {"uint8", DType::u8},
                                           {"int32", DType::i32},
                                           {"int64", DType::i64},
                                           {"float16", DType::f16},
                                           {"half", DType::f16},
                                           {"bfloat16", DType::bf16},
                                           {"float32", DType::f32},
                                           {"float", DType::f32},
                                           {"float64", DType::f64}}};
  for (const alias& a : aliases)
    if (s == a.text) return a.type;
  if (s == "double") return DType::f64;
  return std::nullopt;
}

/// Parses a dtype name (see `try_parse_dtype`).
/// \throws xdev::error `errc::invalid_argument` naming the text and the accepted names.
inline DType parse_dtype(std::string_view s) {
  if (auto t = try_parse_dtype(s)) return *t;
  throw error(errc::invalid_argument,
              "unknown dtype \"" + std::string(s) + "\"; accepted: bool, u8, i32, i64, f16, bf16, f32, f64");
}

inline std::ostream& operator<<(std::ostream& os, DType t) {
  return os << name_of(t);
}

/// Maps a C++ element type to its dtype: `dtype_of<float>` is `DType::f32`.
/// Specialize `dtype_traits` for 16-bit float types of your own.
template <class T>
struct dtype_traits;

template <>
struct dtype_traits<bool> {
  static constexpr DType value = DType::bool_;
};
template <>
struct dtype_traits<std::uint8_t> {
  static constexpr DType value = DType::u8;
};
template <>
struct dtype_traits<std::int32_t> {
  static constexpr DType value = DType::i32;
};
template <>
struct dtype_traits<std::int64_t> {
  static constexpr DType value = DType::i64;
};
template <>
struct dtype_traits<float> {
  static constexpr DType value = DType::f32;
};
template <>
struct dtype_traits<double> {
  static constexpr DType value = DType::f64;
};

/// True when `T` has a dtype (`dtype_traits<T>` is specialized).
template <class T>
concept HasDType = requires {
  dtype_traits<T>::value;
};

template <HasDType T>
inline constexpr DType dtype_of = dtype_traits<T>::value;

}  // namespace xdev
