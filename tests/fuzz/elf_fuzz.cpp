// What the loader reads from a file before it maps it: the ELF layout check, the notes (plugin
// name, build-id), and then Boost.DLL's symbol table reader behind that check (inspect_file, on an
// in-memory file). No input may crash, hang or allocate beyond the file's size; the notes read
// through a descriptor equal the notes read from memory.
#include <xdev/plugin/detail/loader_elf.hpp>
#include <xdev/plugin/detail/loader_identity.hpp>
#include <xdev/plugin/detail/loader_inspect.hpp>
#include <xdev/plugin/name_note.hpp>

#include "fuzz_support.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <sstream>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace d = xdev::plugin::detail;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  std::istringstream in(bytes);
  const std::string problem = bytes.size() >= 4 && bytes.compare(0, 4,
                                                                 "\x7f"
                                                                 "ELF") == 0
                                  ? d::elf_layout_problem(in, size)
                                  : std::string("no ELF magic");
  std::string name_note;
  std::string build_id;
  if (problem.empty()) {
    name_note = d::elf_xdev_note(in, size, xdev::plugin::name_note_type);
    build_id = d::elf_build_id(in, size);
    XDEV_FUZZ_CHECK(build_id.size() % 2 == 0);
  }

  // The same bytes as a file: what the loader does with a candidate.
  const int fd = ::memfd_create("xdev-fuzz-elf", MFD_CLOEXEC);
  if (fd < 0) return 0;
  if (::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size())) {
    const auto inspection = d::inspect_file("/proc/self/fd/" + std::to_string(fd));
    if (!problem.empty()) XDEV_FUZZ_CHECK(inspection.kind == d::FileKind::not_a_plugin);
    if (inspection.kind == d::FileKind::plugin) XDEV_FUZZ_CHECK(inspection.name_note == name_note);
    if (inspection.kind == d::FileKind::not_a_plugin) XDEV_FUZZ_CHECK(!inspection.reason.empty());
    if (problem.empty()) {
      d::DescriptorBuf buffer(fd);
      std::istream through_descriptor(&buffer);
      XDEV_FUZZ_CHECK(d::elf_build_id(through_descriptor, size) == build_id);
      XDEV_FUZZ_CHECK(d::elf_xdev_note(through_descriptor, size, xdev::plugin::name_note_type) == name_note);
    }
  }
  ::close(fd);
  return 0;
}
