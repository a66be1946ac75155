// The first TU of the ODR link test, with main: runs the probe here and in odr_second.cpp and
// checks that both TUs agree on every entity that must exist once in the program.
#include <xdev/xdev.hpp>

#include "odr_probe.hpp"

#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

namespace odr {
Report probe_main() {
  return probe<0>();
}
}  // namespace odr

namespace {

int failures = 0;

void check(bool ok, std::string_view what) {
  std::cout << (ok ? "ok    " : "FAIL  ") << what << '\n';
  if (!ok) ++failures;
}

std::vector<int> iota_vector(int from) {
  std::vector<int> v(odr::elements);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = from + static_cast<int>(i);
  return v;
}

}  // namespace

int main() try {
  const odr::Report a = odr::probe_main();
  const odr::Report b = odr::probe_second();

  check(a.category == b.category, "xdev::error_category() is one object in both TUs");
  check(a.category == &xdev::error_category() && a.category->name() == std::string_view("xdev"),
        "the category is named \"xdev\"");
  check(a.use_future == b.use_future, "xdev::use_future is one object in both TUs");
  check(a.default_runtime == b.default_runtime, "xdev::default_runtime<Host>() is one runtime in both TUs");
  check(a.parsed == xdev::DType::f32 && b.parsed == xdev::DType::f32, "parse_dtype(\"float32\") is f32 in both TUs");
  check(a.probe == 7U && b.probe == 7U, "getenv_count(\"XDEV_ODR_PROBE\") reads 7 in both TUs (the test sets it)");
  check(!a.capabilities.empty() && a.capabilities == b.capabilities,
        "to_string(CapabilitySet) agrees: " + a.capabilities);
  check(a.capabilities.find("max_inflight=64") != std::string::npos, "the host capabilities say max_inflight=64");
  check(a.shape == "[2, 3]" && b.shape == "[2, 3]", "to_string(Shape{2, 3}) is \"[2, 3]\" in both TUs");
  check(a.device == "HOST:0" && b.device == "HOST:0", "Runtime<Host>::device(0) is HOST:0 in both TUs");
  check(a.sum == odr::expected_sum(0), "execute in the first TU returned " + std::to_string(a.sum) + ", expected " +
                                           std::to_string(odr::expected_sum(0)));
  check(b.sum == odr::expected_sum(1), "execute in the second TU returned " + std::to_string(b.sum) + ", expected " +
                                           std::to_string(odr::expected_sum(1)));
  check(a.round_trip == iota_vector(odr::first(0)), "the first TU's data survived the round trip");
  check(b.round_trip == iota_vector(odr::first(1)), "the second TU's data survived the round trip");

  try {
    odr::throw_from_second();
  } catch (const xdev::error& e) {
    check(e.code().category() == xdev::error_category(), "an xdev::error from the other TU has this TU's category");
    check(e.code() == xdev::errc::invalid_argument && e.condition() == xdev::errc::invalid_argument,
          std::string("it compares equal to errc::invalid_argument: ") + e.what());
  }

  if (failures != 0) {
    std::cout << failures << " check(s) failed\n";
    return EXIT_FAILURE;
  }
  return EXIT_SUCCESS;
} catch (const std::exception& e) {
  std::cerr << "xdev_odr_link: " << e.what() << '\n';
  return EXIT_FAILURE;
}
