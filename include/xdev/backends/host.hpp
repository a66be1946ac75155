/// \file
/// `xdev::backends::Host`: the built-in host (CPU) backend.
#pragma once

#include <xdev/backend/completion.hpp>
#include <xdev/core/env.hpp>
#include <xdev/core/error.hpp>
#include <xdev/policy/capabilities.hpp>

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <thread>
#include <utility>

namespace xdev::backends {

/// The host CPU as `XDEV_HOST_DEVICES` devices (default 1), so that meshes can be built and tested
/// on any machine (like XLA's forced host device count). All host devices share one worker pool
/// sized to the machine; memory is ordinary 64-byte-aligned host memory, addressable from host code.
class Host {
 public:
  static constexpr std::string_view name = "HOST";
  /// Dense gather on small tables, Philox, CPU autocast to bf16, up to 64 in flight, picked last.
  using capabilities =
      Capabilities<DenseGather<8192>, RngDefault<RngAlgorithm::philox>, Autocast<AutocastKey::cpu, DType::bf16>,
                   MaxInflight<64>, CollectiveBackend<CollectiveKind::ring>, Priority<-100>>;
  using memory_handle = void*;

  /// Most devices `XDEV_HOST_DEVICES` may ask for.
  static constexpr std::size_t max_devices = 1024;

  struct Options {
    /// Number of devices; unset: `XDEV_HOST_DEVICES`, else 1.
    std::optional<std::size_t> devices = std::nullopt;
    /// Worker threads; unset: `std::thread::hardware_concurrency()`, at least 2.
    std::optional<std::size_t> threads = std::nullopt;
  };

  /// \throws xdev::error `errc::invalid_argument` for a malformed `XDEV_HOST_DEVICES` or option.
  Host() : Host(Options{}) {}
  explicit Host(Options o)
      : devices_(resolve_devices(o.devices)),
        threads_(resolve_threads(o.threads)),
        pool_(std::make_unique<boost::asio::thread_pool>(threads_)) {}
  Host(const Host&) = delete;
  Host& operator=(const Host&) = delete;
  /// Joins the worker pool after the work already posted has run.
  ~Host() { pool_->join(); }

  [[nodiscard]] std::size_t device_count() const noexcept { return devices_; }
  [[nodiscard]] std::size_t thread_count() const noexcept { return threads_; }
  /// The worker pool (for ops that split work across it).
  [[nodiscard]] boost::asio::thread_pool& pool() noexcept { return *pool_; }

  /// \throws xdev::error `errc::out_of_memory` when the system cannot provide `bytes`.
  memory_handle allocate(std::size_t device, std::size_t bytes) {
    void* p = ::operator new (bytes, std::align_val_t{alignment}, std::nothrow);
    if (p == nullptr)
      throw error(errc::out_of_memory, "out of memory on HOST:" + std::to_string(device) +
                                           ": the system could not "
                                           "provide " +
                                           std::to_string(bytes) + " bytes");
    return p;
  }
  void deallocate(std::size_t, memory_handle h, std::size_t) noexcept {
    ::operator delete (h, std::align_val_t{alignment});
  }
  [[nodiscard]] void* host_address(memory_handle h) const noexcept { return h; }

  void copy_to_device(std::size_t, const void* src, memory_handle dst, std::size_t dst_offset, std::size_t bytes,
                      Completion done) {
    run([=] { std::memcpy(static_cast<std::byte*>(dst) + dst_offset, src, bytes); }, std::move(done));
  }
  void copy_to_host(std::size_t, memory_handle src, std::size_t src_offset, void* dst, std::size_t bytes,
                    Completion done) {
    run([=] { std::memcpy(dst, static_cast<const std::byte*>(src) + src_offset, bytes); }, std::move(done));
  }
  void copy_between(std::size_t, memory_handle src, std::size_t src_offset, std::size_t, memory_handle dst,
                    std::size_t dst_offset, std::size_t bytes, Completion done) {
    run(
        [=] {
          std::memmove(static_cast<std::byte*>(dst) + dst_offset, static_cast<const std::byte*>(src) + src_offset,
                       bytes);
        },
        std::move(done));
  }
  void execute(std::size_t, HostTask task, Completion done) { run(std::move(task), std::move(done)); }

 private:
  static constexpr std::size_t alignment = 64;

  static std::size_t resolve_devices(std::optional<std::size_t> requested) {
    if (requested) {
      if (*requested < 1 || *requested > max_devices)
        throw error(errc::invalid_argument, "Host::Options::devices=" + std::to_string(*requested) + " is not in [1, " +
                                                std::to_string(max_devices) + "]");
      return *requested;
    }
    return getenv_count("XDEV_HOST_DEVICES", 1, max_devices).value_or(1);
  }

  static std::size_t resolve_threads(std::optional<std::size_t> requested) {
    if (!requested) return std::max<std::size_t>(2, std::thread::hardware_concurrency());
    if (*requested < 1 || *requested > 4096)
      throw error(errc::invalid_argument,
                  "Host::Options::threads=" + std::to_string(*requested) + " is not in [1, 4096]");
    return *requested;
  }

  template <class F>
  void run(F&& f, Completion done) {
    boost::asio::post(*pool_, [f = std::forward<F>(f), done = std::move(done)]() mutable {
      std::exception_ptr ep;
      try {
        f();
      } catch (...) {
        ep = std::current_exception();
      }
      done(std::move(ep));
    });
  }

  std::size_t devices_;
  std::size_t threads_;
  std::unique_ptr<boost::asio::thread_pool> pool_;
};

}  // namespace xdev::backends
