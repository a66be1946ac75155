// A backend written the way a vendor would write one, outside namespace xdev: a simulated
// accelerator "SIM" whose memory is a private arena per device (host code cannot address it) and
// whose work runs on one worker thread per device, which also reports every completion. main()
// drives it through xdev::Runtime like any other device and exits non-zero if a check fails.
// docs/writing-a-backend.md walks through it.
#include <xdev/xdev.hpp>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <future>
#include <iostream>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace acme {

/// Where a block lives in a device's arena: an offset, not a pointer, so host code cannot
/// dereference it (and `xdev::Buffer` offers no `host_data()` for this backend).
enum class DeviceAddress : std::uint64_t {};

/// A simulated accelerator with `devices` devices of 1 MiB each.
class Simulated {
 public:
  static constexpr std::string_view name = "SIM";
  using capabilities = xdev::Capabilities<xdev::DenseGather<1024>, xdev::RngDefault<xdev::RngAlgorithm::three_fry>,
                                          xdev::Autocast<xdev::AutocastKey::npu, xdev::DType::bf16>,
                                          xdev::MaxInflight<4>, xdev::MemoryPerDevice<(1 << 20)>>;
  using memory_handle = DeviceAddress;

  explicit Simulated(std::size_t devices = 2) {
    for (std::size_t i = 0; i < devices; ++i)
      units_.push_back(std::make_unique<Unit>(i, capabilities::memory_per_device));
  }
  Simulated(const Simulated&) = delete;
  Simulated& operator=(const Simulated&) = delete;
  // Each ~Unit runs what is still queued, then joins its worker. xdev::Runtime has already waited
  // for all work in flight before it destroys its backend, so the queues are empty by then.
  ~Simulated() = default;

  std::size_t device_count() const { return units_.size(); }
  std::thread::id worker_id(std::size_t device) const { return units_.at(device)->worker_id(); }

  memory_handle allocate(std::size_t device, std::size_t bytes) { return unit(device).allocate(bytes); }
  void deallocate(std::size_t device, memory_handle h, std::size_t bytes) noexcept {
    units_[device]->deallocate(h, bytes);
  }

  // Transfers and execution return at once; the device's worker runs them and calls `done`.
  void copy_to_device(std::size_t device, const void* src, memory_handle dst, std::size_t dst_offset, std::size_t bytes,
                      xdev::Completion done) {
    std::byte* to = unit(device).address(dst, dst_offset, bytes);
    unit(device).post([=] { copy_bytes(to, src, bytes); }, std::move(done));
  }
  void copy_to_host(std::size_t device, memory_handle src, std::size_t src_offset, void* dst, std::size_t bytes,
                    xdev::Completion done) {
    const std::byte* from = unit(device).address(src, src_offset, bytes);
    unit(device).post([=] { copy_bytes(dst, from, bytes); }, std::move(done));
  }
  // Runs on the destination device's worker.
  void copy_between(std::size_t src_device, memory_handle src, std::size_t src_offset, std::size_t dst_device,
                    memory_handle dst, std::size_t dst_offset, std::size_t bytes, xdev::Completion done) {
    const std::byte* from = unit(src_device).address(src, src_offset, bytes);
    std::byte* to = unit(dst_device).address(dst, dst_offset, bytes);
    unit(dst_device).post([=] { std::memmove(to, from, bytes); }, std::move(done));
  }
  void execute(std::size_t device, xdev::HostTask task, xdev::Completion done) {
    unit(device).post(std::move(task), std::move(done));
  }

 private:
  static void copy_bytes(void* to, const void* from, std::size_t bytes) {
    if (bytes != 0) std::memcpy(to, from, bytes);  // an empty span may have a null data()
  }

  // One device: an arena carved into 256-byte pages, and a worker thread that runs its queue.
  class Unit {
   public:
    Unit(std::size_t ordinal, std::size_t bytes)
        : name_("SIM:" + std::to_string(ordinal)), arena_(bytes), used_(bytes / page) {}
    Unit(const Unit&) = delete;
    Unit& operator=(const Unit&) = delete;
    ~Unit() {
      {
        std::lock_guard lk(queue_mutex_);
        stopping_ = true;
      }
      wake_.notify_all();
      worker_.join();
    }

    std::thread::id worker_id() const { return worker_.get_id(); }

    // First fit over the page map.
    DeviceAddress allocate(std::size_t bytes) {
      const std::size_t pages = pages_for(bytes);
      std::lock_guard lk(memory_mutex_);
      std::size_t run = 0, longest = 0, free = 0;
      for (std::size_t p = 0; p < used_.size(); ++p) {
        run = used_[p] ? 0 : run + 1;
        free += used_[p] ? 0 : 1;
        longest = std::max(longest, run);
        if (run == pages) {
          std::fill_n(used_.begin() + static_cast<std::ptrdiff_t>(p + 1 - pages), pages, true);
          return static_cast<DeviceAddress>((p + 1 - pages) * page);
        }
      }
      throw xdev::error(xdev::errc::out_of_memory, name_ + " cannot place " + std::to_string(bytes) +
                                                       " bytes: " + std::to_string(free * page) + " of its " +
                                                       std::to_string(arena_.size()) + " bytes are free, at most " +
                                                       std::to_string(longest * page) + " of them in one block");
    }
    void deallocate(DeviceAddress h, std::size_t bytes) noexcept {
      std::lock_guard lk(memory_mutex_);
      const auto first = static_cast<std::ptrdiff_t>(static_cast<std::size_t>(h) / page);
      std::fill_n(used_.begin() + first, pages_for(bytes), false);
    }

    // Where `bytes` bytes at `h + offset` live in the arena; only the worker reads or writes them.
    // \throws xdev::error `errc::invalid_argument` when the range leaves the arena.
    std::byte* address(DeviceAddress h, std::size_t offset, std::size_t bytes) {
      const std::size_t start = static_cast<std::size_t>(h) + offset;
      if (start > arena_.size() || bytes > arena_.size() - start)
        throw xdev::error(xdev::errc::invalid_argument, name_ + ": " + std::to_string(bytes) + " bytes at address " +
                                                            std::to_string(start) + " leave its " +
                                                            std::to_string(arena_.size()) + "-byte arena");
      return arena_.data() + start;
    }

    // Queues work for the worker. Throwing here is allowed: xdev then completes the operation
    // with this exception itself.
    void post(xdev::HostTask work, xdev::Completion done) {
      {
        std::lock_guard lk(queue_mutex_);
        if (stopping_) throw xdev::error(xdev::errc::unavailable, name_ + " is shutting down");
        jobs_.push_back({std::move(work), std::move(done)});
      }
      wake_.notify_one();
    }

   private:
    static constexpr std::size_t page = 256;
    static std::size_t pages_for(std::size_t bytes) { return std::max<std::size_t>(1, (bytes + page - 1) / page); }

    struct Job {
      xdev::HostTask work;
      xdev::Completion done;
    };

    void run() {
      for (;;) {
        Job job;
        {
          std::unique_lock lk(queue_mutex_);
          wake_.wait(lk, [&] { return stopping_ || !jobs_.empty(); });
          if (jobs_.empty()) return;  // stopping, and everything queued has run
          job = std::move(jobs_.front());
          jobs_.pop_front();
        }
        std::exception_ptr failure;
        try {
          job.work();
        } catch (...) {
          failure = std::current_exception();  // reaches the caller's future or handler as is
        }
        // Exactly once, with no lock held: xdev delivers the result on this thread and may start
        // the stream's next operation, which posts to this queue again.
        job.done(std::move(failure));
      }
    }

    std::string name_;
    std::vector<std::byte> arena_;
    std::mutex memory_mutex_;
    std::vector<bool> used_;  // one flag per page
    std::mutex queue_mutex_;
    std::condition_variable wake_;
    std::deque<Job> jobs_;
    bool stopping_ = false;
    std::thread worker_{[this] { run(); }};  // last: starts once everything it uses exists
  };

  Unit& unit(std::size_t device) {
    if (device >= units_.size())
      throw xdev::error(xdev::errc::not_found, "SIM:" + std::to_string(device) + " does not exist");
    return *units_[device];
  }

  std::vector<std::unique_ptr<Unit>> units_;
};

static_assert(xdev::check_backend<Simulated>());
static_assert(!xdev::concepts::HostAccessibleBackend<Simulated>);

}  // namespace acme

namespace {

int failures = 0;

void check(bool ok, const std::string& what) {
  std::cout << (ok ? "  ok    " : "  FAIL  ") << what << '\n';
  if (!ok) ++failures;
}

}  // namespace

int main() try {
  using acme::Simulated;
  using namespace std::chrono_literals;

  // The runtime owns the backend; arguments after the options go to the backend's constructor.
  xdev::Runtime<Simulated> rt({}, 2);
  for (xdev::Device<Simulated> dev : rt.devices())
    std::cout << dev << "  " << dev.capability_set << "  max in flight " << dev.max_inflight() << '\n';
  check(rt.device_count() == 2, "two SIM devices");
  static_assert(xdev::Device<Simulated>::capabilities::rng_default == xdev::RngAlgorithm::three_fry);

  xdev::Device<Simulated> d0 = rt.device(0);
  xdev::Device<Simulated> d1 = rt.device(1);

  // Host -> SIM:0 -> SIM:1 -> host.
  std::vector<float> in(4096), out(in.size());
  std::iota(in.begin(), in.end(), 0.5f);
  xdev::Buffer<float, Simulated> a = d0.allocate<float>(in.size());
  xdev::Buffer<float, Simulated> b = d1.allocate<float>(in.size());
  d0.copy_to_device(std::span<const float>(in), a).get();
  d1.copy(a, b).get();
  d1.copy_to_host(b, std::span<float>(out)).get();
  check(out == in, "host -> SIM:0 -> SIM:1 -> host round trip of 4096 floats");

  // Host work with a future: it runs on the device's worker thread.
  xdev::Future<std::thread::id> where = d0.execute([] { return std::this_thread::get_id(); }, xdev::use_future);
  check(where.get() == rt.backend().worker_id(0), "execute + use_future: ran on SIM:0's worker thread");

  // Host work with a callback: called on the thread that completed the work.
  std::promise<std::thread::id> called;
  d0.execute([] { return 6 * 7; },
             [&](std::exception_ptr e, int value) {
               called.set_value(!e && value == 42 ? std::this_thread::get_id() : std::thread::id{});
             });
  check(called.get_future().get() == rt.backend().worker_id(0), "execute + callback: 42, delivered on SIM:0's worker");

  // An exception thrown by the work reaches the future with its type and message.
  auto failed = d1.execute([]() -> int { throw std::domain_error("kernel rejected its input"); });
  try {
    (void)failed.get();
    check(false, "a failing execute reports its exception");
  } catch (const std::domain_error& e) {
    check(std::string(e.what()) == "kernel rejected its input", "a failing execute reports its exception");
  }

  // An error nobody reads (its future was dropped) is kept, and the next synchronize() raises it.
  (void)d1.execute([] { throw std::runtime_error("nobody reads this"); });
  try {
    d1.synchronize();
    check(false, "synchronize() raises the error of a dropped future");
  } catch (const std::runtime_error& e) {
    check(std::string(e.what()) == "nobody reads this", "synchronize() raises the error of a dropped future");
  }

  // More submissions than MaxInflight<4> allows at once: the submitting thread waits for slots.
  std::vector<xdev::Future<void>> batch;
  for (int i = 0; i < 32; ++i) batch.push_back(d1.execute([] { std::this_thread::sleep_for(100us); }));
  for (auto& f : batch) f.get();
  const xdev::ExecutionStats stats = d1.execution_stats();
  check(stats.inflight_high_water <= d1.max_inflight(),
        "32 submissions, at most " + std::to_string(stats.inflight_high_water) + " in flight");

  // MemoryPerDevice<1 MiB> is the runtime's limit of bytes in use per device.
  {
    auto big = d0.allocate<std::byte>(768 << 10);
    try {
      (void)d0.allocate<std::byte>(512 << 10);
      check(false, "the MemoryPerDevice limit rejects 512 KiB more");
    } catch (const xdev::error& e) {
      check(e.code() == xdev::errc::out_of_memory, "the MemoryPerDevice limit rejects 512 KiB more");
      std::cout << "        " << e.what() << '\n';
    }
  }
  // Without that limit the arena itself runs out, and the backend's allocate says so.
  d1.set_memory_limit(std::nullopt);
  try {
    (void)d1.allocate<std::byte>(2 << 20);
    check(false, "the arena rejects 2 MiB");
  } catch (const xdev::error& e) {
    check(e.code() == xdev::errc::out_of_memory, "the arena rejects 2 MiB");
    std::cout << "        " << e.what() << '\n';
  }

  // After shutdown, in-flight work has finished and new work is refused.
  rt.shutdown();
  try {
    (void)d0.execute([] {});
    check(false, "no submissions after shutdown");
  } catch (const xdev::error& e) {
    check(e.code() == xdev::errc::unavailable, "no submissions after shutdown");
  }

  std::cout << (failures == 0 ? "all checks passed\n" : "some checks FAILED\n");
  return failures == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
} catch (const std::exception& e) {
  std::cerr << "custom_backend: " << e.what() << '\n';
  return EXIT_FAILURE;
}
