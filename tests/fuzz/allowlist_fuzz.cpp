// The plugin allowlist format (Allowlist::parse): any text is a list or an invalid_argument naming
// the line; every entry is well formed; a list written back out parses to the same entries.
#include <xdev/plugin/identity.hpp>

#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using xdev::plugin::Allowlist;
  xdev_fuzz::only_errors({xdev::errc::invalid_argument}, [&] {
    const auto list = Allowlist::parse(xdev_fuzz::text_of(data, size), "fuzz");
    std::string written;
    for (const auto& e : list.entries()) {
      XDEV_FUZZ_CHECK(e.hex.find_first_not_of("0123456789abcdef") == std::string::npos);
      if (e.kind == Allowlist::Kind::sha256) XDEV_FUZZ_CHECK(e.hex.size() == 64);
      if (e.kind == Allowlist::Kind::build_id)
        XDEV_FUZZ_CHECK(e.hex.size() % 2 == 0 && e.hex.size() >= 8 && e.hex.size() <= 128);
      XDEV_FUZZ_CHECK(e.label.find('\n') == std::string::npos);
      written += (e.kind == Allowlist::Kind::sha256 ? "sha256:" : "build-id:") + e.hex;
      if (!e.label.empty()) written += " " + e.label;
      written += "\n";
    }
    const auto again = Allowlist::parse(written, "written");
    XDEV_FUZZ_CHECK(again.entries().size() == list.entries().size());
    for (std::size_t i = 0; i < list.entries().size(); ++i) {
      XDEV_FUZZ_CHECK(again.entries()[i].kind == list.entries()[i].kind);
      XDEV_FUZZ_CHECK(again.entries()[i].hex == list.entries()[i].hex);
      XDEV_FUZZ_CHECK(again.entries()[i].label == list.entries()[i].label);
    }
  });
  return 0;
}
