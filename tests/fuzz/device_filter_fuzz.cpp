// DeviceFilter::parse (XDEV_DEVICE's grammar): any text is a filter or an invalid_argument quoting
// it; a filter prints canonically as text that parses back to the same canonical text, and every
// term it holds is well formed.
#include <xdev/any/device_filter.hpp>

#include "fuzz_support.hpp"

#include <algorithm>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(xdev_fuzz::text_of(data, size));
  xdev_fuzz::only_errors({xdev::errc::invalid_argument}, [&] {
    try {
      const auto filter = xdev::DeviceFilter::parse(text, "XDEV_DEVICE");
      XDEV_FUZZ_CHECK(filter.empty() == text.empty());
      for (const auto& t : filter.terms()) {
        XDEV_FUZZ_CHECK(t.any_backend() || xdev::DeviceFilter::valid_name(t.backend));
        for (std::size_t i : t.ordinals) XDEV_FUZZ_CHECK(i <= xdev::DeviceFilter::max_ordinal);
        std::vector<std::size_t> sorted = t.ordinals;
        std::sort(sorted.begin(), sorted.end());
        XDEV_FUZZ_CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end());
      }
      const std::string printed = filter.to_string();
      const auto again = xdev::DeviceFilter::parse(printed, "XDEV_DEVICE");
      XDEV_FUZZ_CHECK(again.to_string() == printed);
      XDEV_FUZZ_CHECK(again.terms().size() == filter.terms().size());
    } catch (const xdev::error& e) {
      XDEV_FUZZ_CHECK(std::string(e.message()).rfind("XDEV_DEVICE=" + xdev::DeviceFilter::printable(text) + ": ", 0) ==
                      0);
      throw;
    }
  });
  return 0;
}
