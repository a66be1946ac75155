/// \file
/// Internal: a structural check of an ELF file run before `boost::dll::library_info` reads it.
///
/// `library_info` trusts the file's headers: it sizes its buffers from section sizes and indexes
/// them without bounds checks. A corrupt or hostile file could make it allocate gigabytes or read
/// past a vector. Checking that every header and section lies inside the file first bounds all of
/// that by the file's size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <istream>
#include <string>
#include <type_traits>
#include <vector>

namespace xdev::plugin::detail {

/// The ELF layouts `library_info` knows (the headers `<elf.h>` calls Elf32_* / Elf64_*), with
/// only the fields this check reads; `Word` is the address/offset width.
template <class Word>
struct ElfLayout {
  struct Header {
    unsigned char ident[16];
    std::uint16_t type;
    std::uint16_t machine;
    std::uint32_t version;
    Word entry;
    Word phoff;
    Word shoff;
    std::uint32_t flags;
    std::uint16_t ehsize;
    std::uint16_t phentsize;
    std::uint16_t phnum;
    std::uint16_t shentsize;
    std::uint16_t shnum;
    std::uint16_t shstrndx;
  };
  struct Section {
    std::uint32_t name;
    std::uint32_t type;
    Word flags;
    Word addr;
    Word offset;
    Word size;
    std::uint32_t link;
    std::uint32_t info;
    Word addralign;
    Word entsize;
  };
  /// sizeof(Elf32_Sym) / sizeof(Elf64_Sym).
  static constexpr std::size_t symbol_size = std::is_same_v<Word, std::uint32_t> ? 16 : 24;
};

static_assert(sizeof(ElfLayout<std::uint32_t>::Header) == 52 && sizeof(ElfLayout<std::uint64_t>::Header) == 64);
static_assert(sizeof(ElfLayout<std::uint32_t>::Section) == 40 && sizeof(ElfLayout<std::uint64_t>::Section) == 64);

inline constexpr std::uint16_t elf_type_relocatable = 1;
inline constexpr std::uint16_t elf_type_executable = 2;
inline constexpr std::uint16_t elf_type_shared = 3;
inline constexpr std::uint32_t elf_section_symtab = 2;
inline constexpr std::uint32_t elf_section_nobits = 8;
inline constexpr std::uint32_t elf_section_dynsym = 11;

/// True when the host is little-endian (ELF files of the other byte order are rejected: neither
/// `library_info` nor the dynamic loader would read them).
inline bool host_is_little_endian() noexcept {
  const std::uint16_t probe = 1;
  unsigned char first = 0;
  std::memcpy(&first, &probe, 1);
  return first == 1;
}

/// `a + b <= limit`, without overflow.
inline bool elf_range_fits(std::uint64_t a, std::uint64_t b, std::uint64_t limit) noexcept {
  return a <= limit && b <= limit - a;
}

template <class Word>
std::string elf_layout_problem_of(std::istream& in, std::uint64_t file_size) {
  using Layout = ElfLayout<Word>;
  typename Layout::Header header{};
  if (file_size < sizeof(header)) return "truncated ELF file (" + std::to_string(file_size) + " bytes)";
  in.seekg(0);
  if (!in.read(reinterpret_cast<char*>(&header), sizeof(header))) return "cannot read the ELF header";
  switch (header.type) {
    case elf_type_shared:
      break;
    case elf_type_executable:
      return "an executable, not a shared library";
    case elf_type_relocatable:
      return "an object file, not a shared library";
    default:
      return "an ELF file of type " + std::to_string(header.type) + ", not a shared library";
  }
  if (header.shnum == 0 || header.shentsize != sizeof(typename Layout::Section) || header.shstrndx >= header.shnum)
    return "corrupt ELF file (unsupported section header table)";
  const std::uint64_t table_bytes = std::uint64_t{header.shnum} * sizeof(typename Layout::Section);
  if (!elf_range_fits(header.shoff, table_bytes, file_size))
    return "truncated or corrupt ELF file: its section headers end beyond the file's " + std::to_string(file_size) +
           " bytes";
  std::vector<typename Layout::Section> sections(header.shnum);
  in.seekg(static_cast<std::streamoff>(header.shoff));
  if (!in.read(reinterpret_cast<char*>(sections.data()), static_cast<std::streamsize>(table_bytes)))
    return "cannot read the ELF section headers";
  for (std::size_t i = 0; i < sections.size(); ++i) {
    const auto& s = sections[i];
    if (s.type == elf_section_nobits) continue;
    if (!elf_range_fits(s.offset, s.size, file_size))
      return "truncated or corrupt ELF file: section " + std::to_string(i) + " ends beyond the file's " +
             std::to_string(file_size) + " bytes";
    if ((s.type == elf_section_symtab || s.type == elf_section_dynsym) && s.size != 0 && s.size < Layout::symbol_size)
      return "corrupt ELF file: symbol table section " + std::to_string(i) + " is smaller than one symbol";
  }
  return {};
}

/// Empty when `in` (of `file_size` bytes, starting with the ELF magic) is an ELF shared library of
/// this host's byte order whose headers and sections all lie inside the file; otherwise the reason
/// it is not a loadable library, e.g. "an executable, not a shared library". Never throws for
/// file contents (only `std::bad_alloc`).
inline std::string elf_layout_problem(std::istream& in, std::uint64_t file_size) {
  unsigned char ident[16] = {};
  if (file_size < sizeof(ident)) return "truncated ELF file (" + std::to_string(file_size) + " bytes)";
  in.seekg(0);
  if (!in.read(reinterpret_cast<char*>(ident), sizeof(ident))) return "cannot read the ELF header";
  const unsigned char host_order = host_is_little_endian() ? 1 : 2;  // ELFDATA2LSB / ELFDATA2MSB
  if (ident[5] != host_order) return "an ELF file of the other byte order";
  if (ident[4] == 1) return elf_layout_problem_of<std::uint32_t>(in, file_size);
  if (ident[4] == 2) return elf_layout_problem_of<std::uint64_t>(in, file_size);
  return "corrupt ELF file (unknown class " + std::to_string(ident[4]) + ")";
}

inline constexpr std::uint32_t elf_section_note = 7;

/// The name in the first note of owner "xdev" and type `note_type` of an ELF file whose layout
/// `elf_layout_problem` accepted: "" when there is none (or it is malformed).
template <class Word>
std::string elf_xdev_note_of(std::istream& in, std::uint64_t file_size, std::uint32_t note_type) {
  using Layout = ElfLayout<Word>;
  typename Layout::Header header{};
  in.clear();
  in.seekg(0);
  if (!in.read(reinterpret_cast<char*>(&header), sizeof(header))) return {};
  const std::uint64_t table_bytes = std::uint64_t{header.shnum} * sizeof(typename Layout::Section);
  if (header.shentsize != sizeof(typename Layout::Section) || !elf_range_fits(header.shoff, table_bytes, file_size))
    return {};
  std::vector<typename Layout::Section> sections(header.shnum);
  in.seekg(static_cast<std::streamoff>(header.shoff));
  if (!in.read(reinterpret_cast<char*>(sections.data()), static_cast<std::streamsize>(table_bytes))) return {};
  constexpr std::uint64_t max_note_section = 64 * 1024;  // notes are small; never read more
  for (const auto& s : sections) {
    if (s.type != elf_section_note || s.size < 12 || s.size > max_note_section) continue;
    if (!elf_range_fits(s.offset, s.size, file_size)) continue;
    std::vector<char> bytes(static_cast<std::size_t>(s.size));
    in.seekg(static_cast<std::streamoff>(s.offset));
    if (!in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()))) return {};
    auto pad = [](std::uint64_t n) { return (n + 3) / 4 * 4; };
    for (std::uint64_t pos = 0; pos + 12 <= bytes.size();) {
      std::uint32_t word[3];
      std::memcpy(word, bytes.data() + pos, sizeof word);
      const std::uint64_t name_at = pos + 12;
      const std::uint64_t desc_at = name_at + pad(word[0]);
      const std::uint64_t next = desc_at + pad(word[1]);
      if (next > bytes.size() || next <= pos) break;
      if (word[0] == 5 && std::memcmp(bytes.data() + name_at, "xdev", 5) == 0 && word[2] == note_type) {
        const char* desc = bytes.data() + desc_at;
        const auto* end = static_cast<const char*>(std::memchr(desc, '\0', word[1]));
        return end != nullptr ? std::string(desc, end) : std::string();
      }
      pos = next;
    }
  }
  return {};
}

/// `elf_xdev_note_of` for a file of this host's byte order and either class; "" for anything else.
inline std::string elf_xdev_note(std::istream& in, std::uint64_t file_size, std::uint32_t note_type) {
  unsigned char ident[16] = {};
  in.clear();
  in.seekg(0);
  if (file_size < sizeof(ident) || !in.read(reinterpret_cast<char*>(ident), sizeof(ident))) return {};
  if (ident[4] == 1) return elf_xdev_note_of<std::uint32_t>(in, file_size, note_type);
  if (ident[4] == 2) return elf_xdev_note_of<std::uint64_t>(in, file_size, note_type);
  return {};
}

}  // namespace xdev::plugin::detail
