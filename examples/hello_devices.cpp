// The demo: enumerate the host devices, print their capabilities, and run asynchronous work on
// each of them with three different completion tokens. Try XDEV_HOST_DEVICES=4.
#include <xdev/xdev.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cstdlib>
#include <future>
#include <iostream>
#include <numeric>
#include <span>
#include <vector>

namespace asio = boost::asio;
using Host = xdev::backends::Host;

// A coroutine that round-trips data through a device without blocking its thread.
asio::awaitable<float> round_trip(xdev::Device<Host> dev, std::vector<float>& data) {
  auto buf = dev.allocate<float>(data.size());
  co_await dev.copy_to_device(std::span<const float>(data), buf, asio::use_awaitable);
  float total = co_await dev.execute(
      [&buf] {
        std::span<const float> v(buf.host_data(), buf.size());
        return std::accumulate(v.begin(), v.end(), 0.0f);
      },
      asio::use_awaitable);
  co_return total;
}

int main() try {
  xdev::Runtime<Host>& host = xdev::default_runtime<Host>();
  std::cout << "xdev " << XDEV_VERSION_MAJOR << '.' << XDEV_VERSION_MINOR << '.' << XDEV_VERSION_PATCH << ": "
            << host.device_count() << " host device(s), " << host.backend().thread_count() << " worker threads\n";

  for (xdev::Device<Host> dev : host.devices()) {
    std::cout << dev << "  " << dev.capability_set << "  max in flight " << dev.max_inflight() << '\n';

    // 1. A future.
    auto answer = dev.execute([] { return 6 * 7; }, xdev::use_future);

    // 2. A callback.
    std::promise<void> called;
    dev.execute([] {},
                [&](std::exception_ptr e) {
                  if (!e) called.set_value();
                });

    // 3. A coroutine on an io_context.
    std::vector<float> data(1 << 16);
    std::iota(data.begin(), data.end(), 0.0f);
    asio::io_context io;
    std::future<float> sum = asio::co_spawn(io, round_trip(dev, data), xdev::use_future);
    io.run();

    called.get_future().get();
    std::cout << "    future -> " << answer.get() << ", callback -> called, coroutine round trip sum -> " << sum.get()
              << '\n';
    dev.synchronize();
    std::cout << "    memory " << dev.memory_stats() << "\n    execution: " << dev.execution_stats().completed
              << " operations completed\n";
  }
  return EXIT_SUCCESS;
} catch (const std::exception& e) {
  std::cerr << "hello_devices: " << e.what() << '\n';
  return EXIT_FAILURE;
}
