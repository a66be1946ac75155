// "ABITEST": the backend of the plugin that tests/plugin_abi uses to drive every rule of the plugin
// boundary from the plugin's side. Everything runs inside the submitting call (completions
// included, so each one arrives before its entry returns). Its behaviour is keyed to the values
// the tests pass:
//
//   fill (i32 only) with value  13  throws xdev::error(unavailable) before completing
//                               14  completes with xdev::error(cancelled)
//                               15  throws std::runtime_error before completing
//                               16  throws std::bad_alloc before completing
//                               17  destroys its completion without calling it
//                               18  completes, then throws
//   allocate of 0xBAD bytes throws std::bad_alloc
//   device_description(0) is "ABITEST device 0: 4-byte handles, <n> blocks allocated": it changes
//                         with every allocation (each text the plugin handed out must stay valid)
//
// Memory handles are 4-byte indices into a table of blocks (0 = none), so handles of a size other
// than a pointer's cross the boundary. The capability `priority` counts how often the
// `initialize` hook ran (it must be 1), `max_inflight` is the client option when given (else 7).
// When the environment variable XDEV_ABI_TEST_MARKER names a file, destroying a backend appends
// "destroyed\n" to it and unloading the library appends "unloaded\n".
#pragma once

#include <xdev/backend/completion.hpp>
#include <xdev/core/error.hpp>
#include <xdev/ops/op_args.hpp>
#include <xdev/plugin/detail/abi_bridge.hpp>
#include <xdev/policy/capabilities.hpp>
#include <xdev/policy/capability_set.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace abi_test {

inline void append_marker(const char* text) {
  const char* path = std::getenv("XDEV_ABI_TEST_MARKER");
  if (path == nullptr || *path == '\0') return;
  if (std::FILE* f = std::fopen(path, "a")) {
    std::fputs(text, f);
    std::fclose(f);
  }
}

inline int initialize_calls = 0;

class Backend {
 public:
  static constexpr std::string_view name = "ABITEST";
  using capabilities = xdev::Capabilities<xdev::MaxInflight<7>>;
  using memory_handle = std::uint32_t;

  explicit Backend(const xdev::plugin::ClientOptions& o) : options_(o) {}
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;
  ~Backend() { append_marker("destroyed\n"); }

  static void initialize() { ++initialize_calls; }

  [[nodiscard]] xdev::CapabilitySet runtime_capabilities() const noexcept {
    xdev::CapabilitySet c = capabilities::set;
    c.max_inflight = options_.max_inflight.value_or(7);
    c.priority = initialize_calls;
    return c;
  }

  [[nodiscard]] std::size_t device_count() const noexcept { return 1; }

  [[nodiscard]] std::string device_description(std::size_t device) const {
    std::lock_guard lk(m_);
    return "ABITEST device " + std::to_string(device) + ": 4-byte handles, " + std::to_string(blocks_.size()) +
           " blocks allocated";
  }

  memory_handle allocate(std::size_t, std::size_t bytes) {
    if (bytes == 0xBAD) throw std::bad_alloc();
    std::lock_guard lk(m_);
    blocks_.push_back(std::make_unique<std::byte[]>(bytes == 0 ? 1 : bytes));
    return static_cast<memory_handle>(blocks_.size());
  }
  void deallocate(std::size_t, memory_handle h, std::size_t) noexcept {
    std::lock_guard lk(m_);
    if (h != 0 && h <= blocks_.size()) blocks_[h - 1].reset();
  }

  void copy_to_device(std::size_t, const void* src, memory_handle dst, std::size_t off, std::size_t bytes,
                      xdev::Completion done) {
    if (bytes != 0) std::memcpy(at(dst) + off, src, bytes);
    done(nullptr);
  }
  void copy_to_host(std::size_t, memory_handle src, std::size_t off, void* dst, std::size_t bytes,
                    xdev::Completion done) {
    if (bytes != 0) std::memcpy(dst, at(src) + off, bytes);
    done(nullptr);
  }
  // Strided transfers (ABI 1.11): row by row, as the region says.
  void copy_to_host_strided(std::size_t, memory_handle src, const xdev::StridedRegion& r, void* dst,
                            xdev::Completion done) {
    for (std::size_t i = 0; i < r.rows * r.slices; ++i)
      std::memcpy(static_cast<std::byte*>(dst) + i * r.row_bytes, at(src) + r.row_offset(i), r.row_bytes);
    done(nullptr);
  }
  void copy_to_device_strided(std::size_t, const void* src, memory_handle dst, const xdev::StridedRegion& r,
                              xdev::Completion done) {
    for (std::size_t i = 0; i < r.rows * r.slices; ++i)
      std::memcpy(at(dst) + r.row_offset(i), static_cast<const std::byte*>(src) + i * r.row_bytes, r.row_bytes);
    done(nullptr);
  }
  void copy_between_strided(std::size_t, memory_handle src, const xdev::StridedRegion& sr, std::size_t,
                            memory_handle dst, const xdev::StridedRegion& dr, xdev::Completion done) {
    for (std::size_t i = 0; i < sr.rows * sr.slices; ++i)
      std::memmove(at(dst) + dr.row_offset(i), at(src) + sr.row_offset(i), sr.row_bytes);
    done(nullptr);
  }
  void copy_between(std::size_t, memory_handle src, std::size_t src_off, std::size_t, memory_handle dst,
                    std::size_t dst_off, std::size_t bytes, xdev::Completion done) {
    if (bytes != 0) std::memmove(at(dst) + dst_off, at(src) + src_off, bytes);
    done(nullptr);
  }
  void execute(std::size_t, xdev::HostTask task, xdev::Completion done) {
    task();
    done(nullptr);
  }

  void fill(std::size_t, const xdev::ops::FillArgs<std::int32_t, memory_handle>& a, xdev::Completion done) {
    switch (a.value) {
      case 13:
        throw xdev::error(xdev::errc::unavailable, "ABITEST refuses to fill with 13");
      case 14:
        return done(std::make_exception_ptr(xdev::error(xdev::errc::cancelled, "fill with 14 was cancelled")));
      case 15:
        throw std::runtime_error("fill 15 exploded");
      case 16:
        throw std::bad_alloc();
      case 17:
        return;  // `done` is destroyed uncalled
      case 18:
        done(nullptr);
        throw std::runtime_error("fill 18 threw after completing");
      case 20: {  // says the device ran it from 1000.001 s to 1000.003 s of the steady clock
        const auto base = std::chrono::steady_clock::time_point(std::chrono::seconds(1000));
        auto* x = reinterpret_cast<std::int32_t*>(at(a.x));
        for (std::size_t i = 0; i < a.n; ++i) x[i] = a.value;
        xdev::report_device_times({base + std::chrono::milliseconds(1), base + std::chrono::milliseconds(3)});
        return done(nullptr);
      }
      case 19:  // completes, then takes its time to return through this frame
        done(nullptr);
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        append_marker("fill 19 returned\n");
        return;
      default:
        break;
    }
    auto* x = reinterpret_cast<std::int32_t*>(at(a.x));
    for (std::size_t i = 0; i < a.n; ++i) x[i] = a.value;
    done(nullptr);
  }

 private:
  std::byte* at(memory_handle h) {
    std::lock_guard lk(m_);
    return blocks_.at(h - 1).get();
  }

  xdev::plugin::ClientOptions options_;
  mutable std::mutex m_;
  std::vector<std::unique_ptr<std::byte[]>> blocks_;
};

}  // namespace abi_test
