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
#include <string_view>
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
  // library_info reads the section-name table by index, whatever its type: it must be bytes of
  // the file (a NOBITS one would make it allocate the size the header claims).
  if (sections[header.shstrndx].type == elf_section_nobits)
    return "corrupt ELF file: its section-name table (section " + std::to_string(header.shstrndx) +
           ") has no bytes in the file";
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

inline constexpr std::uint32_t elf_note_gnu_build_id = 3;  // NT_GNU_BUILD_ID, owner "GNU"

/// The descriptor of the first note of owner `owner` and type `note_type` in the note sections of
/// an ELF file whose layout `elf_layout_problem` accepted: `false` when there is none (or the
/// notes are malformed).
template <class Word>
bool elf_note_of(std::istream& in, std::uint64_t file_size, std::string_view owner, std::uint32_t note_type,
                 std::string& desc_out) {
  using Layout = ElfLayout<Word>;
  typename Layout::Header header{};
  in.clear();
  in.seekg(0);
  if (!in.read(reinterpret_cast<char*>(&header), sizeof(header))) return false;
  const std::uint64_t table_bytes = std::uint64_t{header.shnum} * sizeof(typename Layout::Section);
  if (header.shentsize != sizeof(typename Layout::Section) || !elf_range_fits(header.shoff, table_bytes, file_size))
    return false;
  std::vector<typename Layout::Section> sections(header.shnum);
  in.seekg(static_cast<std::streamoff>(header.shoff));
  if (!in.read(reinterpret_cast<char*>(sections.data()), static_cast<std::streamsize>(table_bytes))) return false;
  constexpr std::uint64_t max_note_section = 64 * 1024;  // notes are small; never read more
  for (const auto& s : sections) {
    if (s.type != elf_section_note || s.size < 12 || s.size > max_note_section) continue;
    if (!elf_range_fits(s.offset, s.size, file_size)) continue;
    std::vector<char> bytes(static_cast<std::size_t>(s.size));
    in.seekg(static_cast<std::streamoff>(s.offset));
    if (!in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()))) return false;
    auto pad = [](std::uint64_t n) { return (n + 3) / 4 * 4; };
    for (std::uint64_t pos = 0; pos + 12 <= bytes.size();) {
      std::uint32_t word[3];  // name size (with its NUL), descriptor size, type
      std::memcpy(word, bytes.data() + pos, sizeof word);
      const std::uint64_t name_at = pos + 12;
      const std::uint64_t desc_at = name_at + pad(word[0]);
      const std::uint64_t next = desc_at + pad(word[1]);
      if (next > bytes.size() || next <= pos) break;
      if (word[0] == owner.size() + 1 && std::memcmp(bytes.data() + name_at, owner.data(), owner.size()) == 0 &&
          bytes[name_at + owner.size()] == '\0' && word[2] == note_type) {
        desc_out.assign(bytes.data() + desc_at, word[1]);
        return true;
      }
      pos = next;
    }
  }
  return false;
}

/// `elf_note_of` for a file of this host's byte order and either class; `false` for anything else.
inline bool elf_note(std::istream& in, std::uint64_t file_size, std::string_view owner, std::uint32_t note_type,
                     std::string& desc_out) {
  unsigned char ident[16] = {};
  in.clear();
  in.seekg(0);
  if (file_size < sizeof(ident) || !in.read(reinterpret_cast<char*>(ident), sizeof(ident))) return false;
  if (ident[4] == 1) return elf_note_of<std::uint32_t>(in, file_size, owner, note_type, desc_out);
  if (ident[4] == 2) return elf_note_of<std::uint64_t>(in, file_size, owner, note_type, desc_out);
  return false;
}

/// The text of the note of owner "xdev" and type `note_type` (up to its NUL): "" without one.
inline std::string elf_xdev_note(std::istream& in, std::uint64_t file_size, std::uint32_t note_type) {
  std::string desc;
  if (!elf_note(in, file_size, "xdev", note_type, desc)) return {};
  const auto end = desc.find('\0');
  if (end == std::string::npos) return {};  // a name note always ends with its NUL
  desc.resize(end);
  return desc;
}

/// The GNU build-id (`ld --build-id`) as lowercase hex digits: "" without one.
inline std::string elf_build_id(std::istream& in, std::uint64_t file_size) {
  std::string desc;
  if (!elf_note(in, file_size, "GNU", elf_note_gnu_build_id, desc)) return {};
  std::string hex;
  hex.reserve(desc.size() * 2);
  constexpr char digits[] = "0123456789abcdef";
  for (const char c : desc) {
    const auto byte = static_cast<unsigned char>(c);
    hex += digits[byte >> 4];
    hex += digits[byte & 0xf];
  }
  return hex;
}

}  // namespace xdev::plugin::detail
