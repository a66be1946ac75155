/// \file
/// The plugin's name as an ELF note (owner "xdev", type `name_note_type`), so that the loader
/// can read it from the file without loading it: `find("REF")` then never runs the code of other
/// plugins, and discovery skips a second plugin of a taken name unopened (docs/security.md).
/// `XDEV_DEFINE_PLUGIN` emits it; a hand-written plugin adds `XDEV_PLUGIN_NAME_NOTE("NAME");` at
/// global scope of one of its source files. A plugin without the note is still found, by loading
/// it to read its table's name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace xdev::plugin {

/// The note's type under owner "xdev": the plugin name, NUL-terminated.
inline constexpr std::uint32_t name_note_type = 1;

namespace detail {

/// An ELF note of owner "xdev" whose descriptor is the `N - 1` characters of a name and a NUL
/// (sized and aligned as the ELF note layout wants: 4-byte words).
template <std::size_t N>
struct alignas(4) NameNote {
  std::uint32_t namesz = 5;  // "xdev" and its NUL
  std::uint32_t descsz = N;
  std::uint32_t type = name_note_type;
  char owner[8] = {'x', 'd', 'e', 'v', '\0', '\0', '\0', '\0'};
  char desc[(N + 3) / 4 * 4] = {};
};

template <std::size_t N>
constexpr NameNote<N> make_name_note(std::string_view name) noexcept {
  NameNote<N> note;
  for (std::size_t i = 0; i + 1 < N; ++i) note.desc[i] = name[i];
  return note;
}

}  // namespace detail
}  // namespace xdev::plugin

/// Emits the ELF note naming this plugin `name_literal` (a string literal). At most once per
/// shared library, at global scope; `XDEV_DEFINE_PLUGIN` does it for you.
#define XDEV_PLUGIN_NAME_NOTE(name_literal)                                                           \
  namespace xdev_plugin_generated_note {                                                              \
  [[gnu::section(".note.xdev.plugin"), gnu::used]] alignas(4) constexpr auto note =                   \
      ::xdev::plugin::detail::make_name_note<sizeof(name_literal)>(::std::string_view(name_literal)); \
  }                                                                                                   \
  static_assert(true, "a semicolon after XDEV_PLUGIN_NAME_NOTE(...)")
