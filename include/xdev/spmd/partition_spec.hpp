/// \file
/// `xdev::spmd::PartitionSpec`: how each dimension of an array is split over the axes of a mesh.
/// See docs/spmd.md.
///
///     using xdev::spmd::PartitionSpec, xdev::spmd::replicated;
///     PartitionSpec rows{"data", replicated};                 // ('data', None)
///     PartitionSpec both{{"data", "model"}, replicated};      // (('data', 'model'), None)
///     PartitionSpec::parse("P('data', None)") == rows;        // true
#pragma once

#include <xdev/core/error.hpp>

#include <algorithm>
#include <cstddef>
#include <initializer_list>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace xdev::spmd {

/// Tag for a replicated (unsplit) array dimension, printed `None`; `std::nullopt` means the same.
struct replicated_t {
  explicit constexpr replicated_t() = default;
};
/// The replicated-dimension tag: `PartitionSpec{"data", replicated}`.
inline constexpr replicated_t replicated{};

/// For each dimension of an array, the mesh axes it is split over, outermost first. A dimension
/// with no axes is replicated (every device along the unused axes holds all of it). Dimensions
/// past `size()` are replicated too, so `PartitionSpec{}` replicates an array of any rank.
///
/// A spec only names axes; `Sharding` pairs it with a `Mesh`, checks that the axes exist and cuts
/// each split dimension into blocks (the last ones shorter when its extent does not divide). The spec itself is checked
/// on construction: no axis name may be empty and no axis may be used twice (in one dimension or in two), because a
/// device's position along an axis can select only one block.
///
///     PartitionSpec s{{"data", "model"}, xdev::spmd::replicated};
///     s.size();        // 2
///     s[0];            // {"data", "model"}: dimension 0 is split data-major, then model
///     s.to_string();   // "(('data', 'model'), None)"
class PartitionSpec {
 public:
  /// One dimension's entry: implicitly made from an axis name, a list of names (outermost first),
  /// or `replicated` / `std::nullopt` / `{}` for an unsplit dimension.
  class Dim {
   public:
    Dim() = default;
    Dim(replicated_t) noexcept {}    // NOLINT(google-explicit-constructor): spec literal syntax
    Dim(std::nullopt_t) noexcept {}  // NOLINT(google-explicit-constructor)
    /// \throws xdev::error `errc::invalid_argument` for a null pointer.
    Dim(const char* axis) {  // NOLINT(google-explicit-constructor)
      if (axis == nullptr)
        throw error(
            errc::invalid_argument,
            "a PartitionSpec axis name is a null pointer; write xdev::spmd::replicated for an unsplit dimension");
      axes_.emplace_back(axis);
    }
    Dim(std::string axis) : axes_{std::move(axis)} {}               // NOLINT(google-explicit-constructor)
    Dim(std::string_view axis) : axes_{std::string(axis)} {}        // NOLINT(google-explicit-constructor)
    Dim(std::initializer_list<std::string> axes) : axes_(axes) {}   // NOLINT(google-explicit-constructor)
    Dim(std::vector<std::string> axes) : axes_(std::move(axes)) {}  // NOLINT(google-explicit-constructor)

    /// The axes, outermost first; empty when replicated.
    [[nodiscard]] const std::vector<std::string>& axes() const noexcept { return axes_; }

   private:
    friend class PartitionSpec;
    std::vector<std::string> axes_;
  };

  /// No dimensions: every array is fully replicated.
  PartitionSpec() = default;

  /// One entry per dimension: `PartitionSpec{"data", replicated}`, `PartitionSpec{{"x", "y"}}`.
  /// \throws xdev::error `errc::invalid_argument` naming the axis when an axis name is empty or an
  ///         axis is used twice.
  PartitionSpec(std::initializer_list<Dim> dims) {
    dims_.reserve(dims.size());
    for (const auto& d : dims) dims_.push_back(d.axes_);
    validate();
  }

  /// The axes of each dimension, outermost first (an empty list is a replicated dimension).
  /// \throws xdev::error as the initializer-list constructor.
  explicit PartitionSpec(std::vector<std::vector<std::string>> dims) : dims_(std::move(dims)) { validate(); }

  /// Reads the Python-like form that `to_string()` prints (and JAX's `repr`), optionally prefixed
  /// by `P` or `PartitionSpec`: `('data', None)`, `(('data', 'model'), None)`, `('data',)`, `()`,
  /// `P("data", None)`. Names take single or double quotes (a backslash makes the next character
  /// literal); whitespace is free between tokens; a dimension written `()` or as a one-name tuple
  /// means the same as `None` or the bare name.
  /// \throws xdev::error `errc::invalid_argument` naming the text, the position (0-based) and what
  ///         was expected there, e.g. `expected a quoted axis name, None or a tuple at position 9
  ///         in "('data', Nne)"`; or, as the constructors, for an empty or repeated axis.
  [[nodiscard]] static PartitionSpec parse(std::string_view text) {
    PartitionSpec out;
    out.dims_ = Parser{text}.spec();
    out.validate(" (parsed from \"" + std::string(text) + "\")");
    return out;
  }

  /// Number of dimensions the spec describes.
  [[nodiscard]] std::size_t size() const noexcept { return dims_.size(); }
  /// True for the spec of no dimensions, `()`.
  [[nodiscard]] bool empty() const noexcept { return dims_.empty(); }

  /// The axes dimension `dim` is split over, outermost first; empty when it is replicated.
  /// \throws xdev::error `errc::invalid_argument` when `dim >= size()`.
  [[nodiscard]] const std::vector<std::string>& operator[](std::size_t dim) const {
    if (dim >= dims_.size())
      throw error(errc::invalid_argument, "dimension " + std::to_string(dim) + " is out of range for PartitionSpec " +
                                              to_string() + " of " + std::to_string(dims_.size()) + " dimensions");
    return dims_[dim];
  }

  /// Every dimension's axes, in dimension order.
  [[nodiscard]] const std::vector<std::vector<std::string>>& dims() const noexcept { return dims_; }

  /// Every axis the spec uses, in order of appearance: `(('x', 'y'), 'z')` gives `{"x", "y", "z"}`.
  [[nodiscard]] std::vector<std::string> axes() const {
    std::vector<std::string> out;
    for (const auto& d : dims_) out.insert(out.end(), d.begin(), d.end());
    return out;
  }

  /// True when the spec uses axis `name`.
  [[nodiscard]] bool uses(std::string_view name) const noexcept {
    for (const auto& d : dims_)
      if (std::ranges::find(d, name) != d.end()) return true;
    return false;
  }

  /// The canonical text: `('data', None)`, `(('data', 'model'), None)`, `('data',)`, `()`.
  /// `parse(s.to_string()) == s` for every spec.
  [[nodiscard]] std::string to_string() const {
    std::string out = "(";
    for (std::size_t d = 0; d < dims_.size(); ++d) {
      if (d) out += ", ";
      out += dim_to_string(dims_[d]);
    }
    if (dims_.size() == 1) out += ",";  // Python's one-element tuple; without it "('data')" reads as a name
    return out + ")";
  }
  friend std::ostream& operator<<(std::ostream& os, const PartitionSpec& s) { return os << s.to_string(); }

  /// Same axes for every dimension. `('data',)` and `('data', None)` differ here even though they
  /// shard a rank-2 array alike: the spec is compared, not its effect.
  friend bool operator==(const PartitionSpec& a, const PartitionSpec& b) noexcept { return a.dims_ == b.dims_; }

 private:
  // Quoted the way Python's repr quotes: single quotes unless the name holds one and no double quote.
  static std::string quote(const std::string& name) {
    const bool has_single = name.find('\'') != std::string::npos;
    const char q = has_single && name.find('"') == std::string::npos ? '"' : '\'';
    std::string out(1, q);
    for (char c : name) {
      if (c == q || c == '\\') out += '\\';
      out += c;
    }
    return out + q;
  }
  static std::string dim_to_string(const std::vector<std::string>& axes) {
    if (axes.empty()) return "None";
    if (axes.size() == 1) return quote(axes[0]);
    std::string out = "(";
    for (std::size_t a = 0; a < axes.size(); ++a) out += (a ? ", " : "") + quote(axes[a]);
    return out + ")";
  }

  // `context` ends every message: parse() adds the text it read.
  void validate(const std::string& context = {}) const {
    for (std::size_t d = 0; d < dims_.size(); ++d) {
      for (std::size_t a = 0; a < dims_[d].size(); ++a) {
        const auto& name = dims_[d][a];
        if (name.empty())
          throw error(errc::invalid_argument, "PartitionSpec " + to_string() + " has an empty axis name in dimension " +
                                                  std::to_string(d) + context);
        // The first earlier use, if any: in an earlier dimension, or earlier in this one.
        for (std::size_t e = 0; e <= d; ++e) {
          const auto last = e == d ? dims_[e].begin() + static_cast<std::ptrdiff_t>(a) : dims_[e].end();
          if (std::find(dims_[e].begin(), last, name) != last)
            throw error(errc::invalid_argument,
                        "axis '" + name + "' is used twice in PartitionSpec " + to_string() +
                            (e == d ? " (both in dimension " + std::to_string(d) + ")"
                                    : " (in dimensions " + std::to_string(e) + " and " + std::to_string(d) + ")") +
                            context + "; a mesh axis can split at most one dimension, once");
        }
      }
    }
  }

  // Recursive descent over the grammar
  //   spec  := [ "P" | "PartitionSpec" ] "(" [ entry { "," entry } [ "," ] ] ")"
  //   entry := "None" | name | "(" [ name { "," name } [ "," ] ] ")"
  // with whitespace between any two tokens.
  struct Parser {
    std::string_view text;
    std::size_t pos = 0;

    std::vector<std::vector<std::string>> spec() {
      skip_ws();
      if (!keyword("PartitionSpec")) (void)keyword("P");
      expect('(', "'(' opening the spec");
      std::vector<std::vector<std::string>> dims;
      while (!accept(')')) {
        dims.push_back(entry());
        if (!accept(',')) {
          expect(')', "',' or ')' after a dimension");
          break;
        }
      }
      if (pos != text.size()) fail("the end of the text after the closing ')'");
      return dims;
    }

    std::vector<std::string> entry() {
      if (keyword("None")) return {};
      if (at_quote()) return {name()};
      if (accept('(')) {
        std::vector<std::string> axes;
        while (!accept(')')) {
          if (!at_quote()) fail("a quoted axis name or ')' inside a dimension's tuple");
          axes.push_back(name());
          if (!accept(',')) {
            expect(')', "',' or ')' after an axis name in a dimension's tuple");
            break;
          }
        }
        return axes;
      }
      fail("a quoted axis name, None or a tuple");
    }

    std::string name() {
      const char q = text[pos];
      const std::size_t start = pos++;
      std::string out;
      while (pos < text.size() && text[pos] != q) {
        if (text[pos] == '\\' && pos + 1 < text.size()) ++pos;
        out += text[pos++];
      }
      if (pos == text.size())
        throw error(errc::invalid_argument, std::string("expected a closing ") + q +
                                                " for the axis name that starts at position " + std::to_string(start) +
                                                " in \"" + std::string(text) + "\", found the end of the text");
      ++pos;
      skip_ws();
      return out;
    }

    static bool is_word_char(char c) {
      return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    }
    bool at_quote() const { return pos < text.size() && (text[pos] == '\'' || text[pos] == '"'); }

    void skip_ws() {
      while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\t' || text[pos] == '\n' || text[pos] == '\r' ||
                                   text[pos] == '\f' || text[pos] == '\v'))
        ++pos;
    }
    bool accept(char c) {
      if (pos < text.size() && text[pos] == c) {
        ++pos;
        skip_ws();
        return true;
      }
      return false;
    }
    void expect(char c, const char* what) {
      if (!accept(c)) fail(what);
    }
    // A whole word: "None" matches, "Nonesuch" does not.
    bool keyword(std::string_view word) {
      if (text.substr(pos, word.size()) != word) return false;
      const std::size_t after = pos + word.size();
      if (after < text.size() && is_word_char(text[after])) return false;
      pos = after;
      skip_ws();
      return true;
    }

    [[noreturn]] void fail(const std::string& expected) const {
      std::string found;
      if (pos >= text.size()) {
        found = "the end of the text";
      } else {
        // The offending word, so that "Nne" reads as a word rather than as its first letter.
        std::size_t end = pos + 1;
        if (is_word_char(text[pos]))
          while (end < text.size() && end - pos < 20 && is_word_char(text[end])) ++end;
        const std::string token(text.substr(pos, end - pos));
        found = token == "'" ? "\"'\"" : "'" + token + "'";
      }
      throw error(errc::invalid_argument, "expected " + expected + " at position " + std::to_string(pos) + " in \"" +
                                              std::string(text) + "\", found " + found);
    }
  };

  std::vector<std::vector<std::string>> dims_;
};

}  // namespace xdev::spmd
