// A downstream program: allocate on a host device, copy in, compute with `execute`, copy out,
// and check the results; then load the project's own plugin (plugin.cpp) by path and run an op
// on its device (native `scale`) and one it leaves to xdev's CPU fallback (`fill`). Exits nonzero
// on any mismatch.
#include <xdev/plugin/plugin_backend.hpp>
#include <xdev/version.hpp>
#include <xdev/xdev.hpp>

#include <boost/dll/shared_library.hpp>
#include <boost/dll/shared_library_load_mode.hpp>

#include <cstdlib>
#include <exception>
#include <future>
#include <iostream>
#include <memory>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#ifdef CONSUMER_PACKAGE_VERSION_MAJOR
static_assert(XDEV_VERSION_MAJOR == CONSUMER_PACKAGE_VERSION_MAJOR &&
                  XDEV_VERSION_MINOR == CONSUMER_PACKAGE_VERSION_MINOR &&
                  XDEV_VERSION_PATCH == CONSUMER_PACKAGE_VERSION_PATCH,
              "<xdev/version.hpp> and xdevConfigVersion.cmake disagree on xdev's version");
#endif

// Loads CONSUMER_PLUGIN, fills an array on its device and scales it there; true when the results
// are right and the device is named after the plugin.
static bool run_plugin() {
  auto lib = std::make_shared<boost::dll::shared_library>(CONSUMER_PLUGIN, boost::dll::load_mode::rtld_now);
  const xdev_plugin_api* api = lib->get_alias<const xdev_plugin_api*()>(XDEV_PLUGIN_ENTRY_NAME)();
  xdev::plugin::check_table(api, CONSUMER_PLUGIN);
  xdev::plugin::initialize_plugin(*api);
  xdev::Runtime<xdev::plugin::PluginBackend> tiny({}, api, std::move(lib));
  const auto dev = tiny.device(0);
  auto x = xdev::empty<float>(dev, {1000});
  xdev::ops::fill(dev, x, 2.0f).get();   // TINY has no fill: xdev's CPU fallback
  xdev::ops::scale(dev, x, 1.5f).get();  // TINY's own scale
  std::vector<float> out(x.size());
  dev.copy_to_host(x.buffer(), std::span<float>(out)).get();
  int mismatches = 0;
  for (float v : out)
    if (v != 3.0f) ++mismatches;
  std::cout << "plugin " << api->name << ' ' << api->version << " on " << dev << ": " << mismatches
            << " mismatched element(s)\n";
  return mismatches == 0 && dev.name() == "TINY:0";
}

// Parses a device filter as `XDEV_DEVICE` does, good and bad: true when the good one prints back
// canonically and the bad one is refused with a message that quotes the bad ordinal. (Compiled at
// -O3 with -Werror: g++ 12's false -Wrestrict once fired inside `DeviceFilter::parse` here.)
static bool parse_filters() {
  const auto good = xdev::DeviceFilter::parse("opencl:1,0;!ref", "XDEV_DEVICE");
  bool refused = false;
  try {
    (void)xdev::DeviceFilter::parse("HOST:1x", "XDEV_DEVICE");
  } catch (const xdev::error& e) {
    refused = e.condition() == xdev::errc::invalid_argument &&
              std::string(e.what()).find("\"1x\" is not a device ordinal") != std::string::npos;
  }
  std::cout << "device filter " << good.to_string() << (refused ? "; HOST:1x refused\n" : "; HOST:1x NOT refused\n");
  return good.to_string() == "OPENCL:1,0;!REF" && refused;
}

int main() try {
  using Host = xdev::backends::Host;
  xdev::Runtime<Host> host;
  xdev::Device<Host> dev = host.device(0);

  std::vector<int> input(1 << 12);
  std::iota(input.begin(), input.end(), 1);
  auto buf = dev.allocate<int>(input.size());
  dev.copy_to_device(std::span<const int>(input), buf, xdev::use_future).get();

  // Doubles every element on the device and returns the sum of the doubled values.
  std::future<long long> sum = dev.execute(
      [&buf] {
        std::span<int> v(buf.host_data(), buf.size());
        for (int& x : v) x *= 2;
        return std::accumulate(v.begin(), v.end(), 0LL);
      },
      xdev::use_future);
  const long long got = sum.get();

  std::vector<int> output(input.size());
  dev.copy_to_host(buf, std::span<int>(output), xdev::use_future).get();
  dev.synchronize();

  const auto n = static_cast<long long>(input.size());
  const long long expected = n * (n + 1);  // 2 * (1 + ... + n)
  int mismatches = 0;
  for (std::size_t i = 0; i < input.size(); ++i)
    if (output[i] != 2 * input[i]) ++mismatches;

  std::cout << "xdev " << XDEV_VERSION_MAJOR << '.' << XDEV_VERSION_MINOR << '.' << XDEV_VERSION_PATCH << " on " << dev
            << ": sum " << got << " (expected " << expected << "), " << mismatches << " mismatched element(s)\n";
  const bool plugin_ok = run_plugin();
  const bool filters_ok = parse_filters();
  return got == expected && mismatches == 0 && plugin_ok && filters_ok ? EXIT_SUCCESS : EXIT_FAILURE;
} catch (const std::exception& e) {
  std::cerr << "consumer: " << e.what() << '\n';
  return EXIT_FAILURE;
}
