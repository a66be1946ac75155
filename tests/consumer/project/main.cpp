// A downstream program: allocate on a host device, copy in, compute with `execute`, copy out,
// and check the results. Exits nonzero on any mismatch.
#include <xdev/version.hpp>
#include <xdev/xdev.hpp>

#include <cstdlib>
#include <exception>
#include <future>
#include <iostream>
#include <numeric>
#include <span>
#include <vector>

#ifdef CONSUMER_PACKAGE_VERSION_MAJOR
static_assert(XDEV_VERSION_MAJOR == CONSUMER_PACKAGE_VERSION_MAJOR &&
                  XDEV_VERSION_MINOR == CONSUMER_PACKAGE_VERSION_MINOR &&
                  XDEV_VERSION_PATCH == CONSUMER_PACKAGE_VERSION_PATCH,
              "<xdev/version.hpp> and xdevConfigVersion.cmake disagree on xdev's version");
#endif

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
  return got == expected && mismatches == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
} catch (const std::exception& e) {
  std::cerr << "consumer: " << e.what() << '\n';
  return EXIT_FAILURE;
}
