/// \file
/// `xdev::backends::Host`: the built-in host (CPU) backend.
#pragma once

#include <xdev/backend/completion.hpp>
#include <xdev/backend/device_properties.hpp>
#include <xdev/backend/strided_region.hpp>
#include <xdev/backends/detail/host_properties.hpp>
#include <xdev/core/dtype.hpp>
#include <xdev/core/env.hpp>
#include <xdev/core/error.hpp>
#include <xdev/kernels/convert.hpp>
#include <xdev/kernels/elementwise.hpp>
#include <xdev/kernels/gather.hpp>
#include <xdev/kernels/gemm.hpp>
#include <xdev/kernels/parallel.hpp>
#include <xdev/kernels/reduce.hpp>
#include <xdev/kernels/rng_fill.hpp>
#include <xdev/kernels/thread_pool.hpp>
#include <xdev/ops/op_args.hpp>
#include <xdev/policy/capabilities.hpp>

#include <boost/asio/defer.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <thread>
#include <utility>

namespace xdev::backends {

class Host;
namespace detail {
// xdev's own benchmarks compare with raw posts to the very threads of a host backend. Not for
// users: a handler that throws there ends the process (Asio lets the exception out of the worker),
// so the pool is not handed out by the public interface.
boost::asio::thread_pool& worker_pool(Host& host) noexcept;
}  // namespace detail

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
    /// The device type's name at run time (`runtime_name()`: devices print as "NAME:0"): upper
    /// case letters, digits and `_`, starting with a letter. Unset: "HOST". The SPMD virtual
    /// device is a host device named "SPMD".
    std::optional<std::string> name = std::nullopt;
  };

  /// \throws xdev::error `errc::invalid_argument` for a malformed `XDEV_HOST_DEVICES` or option.
  Host() : Host(Options{}) {}
  explicit Host(Options o)
      : devices_(resolve_devices(o.devices)),
        threads_(resolve_threads(o.threads)),
        name_(resolve_name(o.name)),
        pool_(std::make_unique<kernels::ThreadPool>(threads_)) {}
  Host(const Host&) = delete;
  Host& operator=(const Host&) = delete;
  /// Joins the worker pool after the work already posted has run, then waits for the threads
  /// that posted work from outside the pool to have left the pool's code (see `run`).
  ~Host() {
    pool_->join();
    while (posting_.load() != 0) std::this_thread::yield();
    // Blocks of buffers that outlived the runtime (their destructors no longer free them).
    while (live_.next != &live_) release_block(live_.next);
  }

  [[nodiscard]] std::size_t device_count() const noexcept { return devices_; }
  /// "HOST", or `Options::name`.
  [[nodiscard]] std::string_view runtime_name() const noexcept { return name_; }
  [[nodiscard]] std::size_t thread_count() const noexcept { return threads_; }
  /// What a host device is (`concepts::DescribesDevices`): "host memory, 8 worker threads", plus
  /// " shared by N devices" when there are several (they share one pool).
  [[nodiscard]] std::string device_description(std::size_t) const {
    std::string d = "host memory, " + std::to_string(threads_) + (threads_ == 1 ? " worker thread" : " worker threads");
    if (devices_ > 1) d += " shared by " + std::to_string(devices_) + " devices";
    return d;
  }

  /// What a host device is as typed fields (`concepts::ReportsDeviceProperties`): a CPU, its model
  /// and vendor, the kernel ("Linux 6.1.0-...") as the driver, the worker threads as compute units,
  /// no work-group limit (0), the machine's memory as the total and what it has available now as
  /// the free memory. Every host device of a machine reports the same memory: they share it.
  [[nodiscard]] DeviceProperties device_properties(std::size_t) const {
    static const DeviceProperties machine = detail::host_static_properties();
    DeviceProperties p = machine;
    p.compute_units = threads_;
    p.memory_free = detail::host_memory_available();
    return p;
  }

  /// \throws xdev::error `errc::out_of_memory` when the system cannot provide `bytes`.
  /// Every block is on the backend's list until it is freed: destroying the backend frees what
  /// is left (the memory of buffers that outlived their runtime).
  memory_handle allocate(std::size_t device, std::size_t bytes) {
    void* p = bytes <= std::size_t(-1) - alignment
                  ? ::operator new (alignment + bytes, std::align_val_t{alignment}, std::nothrow)
                  : nullptr;
    if (p == nullptr)
      throw error(errc::out_of_memory, "out of memory on HOST:" + std::to_string(device) +
                                           ": the system could not provide " + std::to_string(bytes) + " bytes");
    auto* b = ::new (p) Block;
    std::lock_guard lk(live_m_);
    b->prev = &live_;
    b->next = live_.next;
    live_.next->prev = b;
    live_.next = b;
    return static_cast<std::byte*>(p) + alignment;
  }
  void deallocate(std::size_t, memory_handle h, std::size_t) noexcept {
    auto* b = reinterpret_cast<Block*>(static_cast<std::byte*>(h) - alignment);
    std::lock_guard lk(live_m_);
    release_block(b);
  }
  [[nodiscard]] void* host_address(memory_handle h) const noexcept { return h; }
  /// The address `bytes` past `h` (`concepts::OffsetsHandles`): ops on windows of arrays run here.
  [[nodiscard]] memory_handle offset_handle(memory_handle h, std::size_t bytes) const noexcept {
    return static_cast<std::byte*>(h) + bytes;
  }

  /// Copies of at most `inline_copy_bytes` run inside the call (the completion contract allows it):
  /// waking a worker costs more than copying that much.
  static constexpr std::size_t inline_copy_bytes = std::size_t{1} << 20;

  void copy_to_device(std::size_t, const void* src, memory_handle dst, std::size_t dst_offset, std::size_t bytes,
                      Completion done) {
    copy(static_cast<std::byte*>(dst) + dst_offset, src, bytes, std::move(done));
  }
  void copy_to_host(std::size_t, memory_handle src, std::size_t src_offset, void* dst, std::size_t bytes,
                    Completion done) {
    copy(dst, static_cast<const std::byte*>(src) + src_offset, bytes, std::move(done));
  }
  /// A strided window's rows in one piece of work (`concepts::StridedTransfers`), inside the call
  /// up to `inline_copy_bytes` as `copy_to_host`.
  void copy_to_host_strided(std::size_t, memory_handle src, const StridedRegion& r, void* dst, Completion done) {
    copy_rows(
        r,
        [src = static_cast<const std::byte*>(src), r, dst = static_cast<std::byte*>(dst)] {
          for (std::size_t i = 0; i < r.rows * r.slices; ++i)
            std::memcpy(dst + i * r.row_bytes, src + r.row_offset(i), r.row_bytes);
        },
        std::move(done));
  }
  void copy_to_device_strided(std::size_t, const void* src, memory_handle dst, const StridedRegion& r,
                              Completion done) {
    copy_rows(
        r,
        [src = static_cast<const std::byte*>(src), r, dst = static_cast<std::byte*>(dst)] {
          for (std::size_t i = 0; i < r.rows * r.slices; ++i)
            std::memcpy(dst + r.row_offset(i), src + i * r.row_bytes, r.row_bytes);
        },
        std::move(done));
  }
  void copy_between_strided(std::size_t, memory_handle src, const StridedRegion& sr, std::size_t, memory_handle dst,
                            const StridedRegion& dr, Completion done) {
    run(
        [src = static_cast<const std::byte*>(src), sr, dst = static_cast<std::byte*>(dst), dr] {
          for (std::size_t i = 0; i < sr.rows * sr.slices; ++i)
            std::memmove(dst + dr.row_offset(i), src + sr.row_offset(i), sr.row_bytes);
        },
        std::move(done));
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

  // The portable operations, run by the host kernels split over the worker pool (see ops.hpp).

  template <class T>
  void fill(std::size_t, const ops::FillArgs<T, memory_handle>& a, Completion done) {
    run([a, p = parallel()] { kernels::fill(p, static_cast<T*>(a.x), a.n, a.value); }, std::move(done));
  }
  template <class T>
  void scale(std::size_t, const ops::ScaleArgs<T, memory_handle>& a, Completion done) {
    run([a, p = parallel()] { kernels::scale(p, static_cast<T*>(a.x), a.n, a.alpha); }, std::move(done));
  }
  template <class T>
  void axpy(std::size_t, const ops::AxpyArgs<T, memory_handle>& a, Completion done) {
    run([a, p = parallel()] { kernels::axpy(p, a.alpha, static_cast<const T*>(a.x), static_cast<T*>(a.y), a.n); },
        std::move(done));
  }
  template <class T>
  requires requires(const T* x, T* y) { kernels::exp(kernels::Parallel{}, x, y, std::size_t{}); }
  void exp(std::size_t, const ops::ExpArgs<T, memory_handle>& a, Completion done) {
    run([a, p = parallel()] { kernels::exp(p, static_cast<const T*>(a.x), static_cast<T*>(a.out), a.n); },
        std::move(done));
  }
  template <class T>
  void binary(std::size_t, const ops::BinaryArgs<T, memory_handle>& a, Completion done) {
    run(
        [a, p = parallel()] {
          kernels::binary(p, a.op, static_cast<const T*>(a.a), static_cast<const T*>(a.b), static_cast<T*>(a.out), a.n);
        },
        std::move(done));
  }
  template <class T>
  void sum(std::size_t, const ops::SumArgs<T, memory_handle>& a, Completion done) {
    run([a, p = parallel()] { *a.result = kernels::sum(p, static_cast<const T*>(a.x), a.n); }, std::move(done));
  }
  template <class T>
  void sum_axis(std::size_t, const ops::SumAxisArgs<T, memory_handle>& a, Completion done) {
    run(
        [a, p = parallel()] {
          kernels::sum_axis(p, static_cast<const T*>(a.x), a.outer, a.axis, a.inner, static_cast<T*>(a.out));
        },
        std::move(done));
  }
  template <class T>
  void dot(std::size_t, const ops::DotArgs<T, memory_handle>& a, Completion done) {
    run(
        [a, p = parallel()] {
          *a.result = kernels::dot(p, static_cast<const T*>(a.x), static_cast<const T*>(a.y), a.n, a.compute);
        },
        std::move(done));
  }
  template <class T>
  void gemm(std::size_t, const ops::GemmArgs<T, memory_handle>& a, Completion done) {
    run(
        [a, p = parallel()] {
          kernels::gemm(p, a.trans_a, a.trans_b, a.m, a.n, a.k, a.alpha, static_cast<const T*>(a.a), a.lda,
                        static_cast<const T*>(a.b), a.ldb, a.beta, static_cast<T*>(a.c), a.ldc, a.compute);
        },
        std::move(done));
  }
  template <class T, class I>
  void gather(std::size_t, const ops::GatherArgs<T, I, memory_handle>& a, Completion done) {
    run(
        [a, p = parallel()] {
          kernels::gather(p, static_cast<const T*>(a.table), a.rows, a.cols, static_cast<const I*>(a.index), a.n,
                          static_cast<T*>(a.out), a.dense);
        },
        std::move(done));
  }
  template <class T>
  void rng(std::size_t, const ops::RngArgs<T, memory_handle>& a, Completion done) {
    run(
        [a, p = parallel()] {
          kernels::rng(p, static_cast<T*>(a.out), a.n, a.algorithm, a.seed, a.offset, a.normal, a.mean, a.stddev);
        },
        std::move(done));
  }
  template <class S, class D>
  void convert(std::size_t, const ops::ConvertArgs<S, D, memory_handle>& a, Completion done) {
    convert_dtypes(dtype_of<S>, a.src, dtype_of<D>, a.dst, a.n, std::move(done));
  }
  /// Runs a user kernel over [0, n) split across the worker pool (`LaunchableBackend`).
  void launch(std::size_t, ops::LaunchArgs a, Completion done) {
    run([a = std::move(a), p = parallel()] { kernels::parallel_for(p, a.n, a.grain, a.kernel); }, std::move(done));
  }

 private:
  static constexpr std::size_t alignment = 64;

  // A block's header: the `alignment` bytes before the address handed out, linking it into
  // `live_` (a circular list; `live_` itself is the head).
  struct Block {
    Block* prev;
    Block* next;
  };
  static_assert(sizeof(Block) <= alignment);
  void release_block(Block* b) noexcept {  // with `live_m_` held, or from the destructor
    b->prev->next = b->next;
    b->next->prev = b->prev;
    b->~Block();
    ::operator delete (static_cast<void*>(b), std::align_val_t{alignment});
  }

  static std::size_t resolve_devices(std::optional<std::size_t> requested) {
    if (requested) {
      if (*requested < 1 || *requested > max_devices)
        throw error(errc::invalid_argument, "Host::Options::devices=" + std::to_string(*requested) + " is not in [1, " +
                                                std::to_string(max_devices) + "]");
      return *requested;
    }
    return getenv_count("XDEV_HOST_DEVICES", 1, max_devices).value_or(1);
  }

  [[nodiscard]] kernels::Parallel parallel() const noexcept { return {&pool_->get(), threads_}; }

  // Every `convert` member: one function for all pairs of dtypes.
  void convert_dtypes(DType s, const void* src, DType d, void* dst, std::size_t n, Completion done) {
    run([=, p = parallel()] { kernels::convert(p, s, src, d, dst, n); }, std::move(done));
  }

  static std::size_t resolve_threads(std::optional<std::size_t> requested) {
    if (!requested) return std::max<std::size_t>(2, std::thread::hardware_concurrency());
    if (*requested < 1 || *requested > 4096)
      throw error(errc::invalid_argument,
                  "Host::Options::threads=" + std::to_string(*requested) + " is not in [1, 4096]");
    return *requested;
  }

  // By reference: a by-value std::optional<std::string> moved in from the options made g++ 12 at
  // -O3 report a false -Wmaybe-uninitialized in users' -Werror builds (the consumer test's).
  static std::string resolve_name(const std::optional<std::string>& requested) {
    if (!requested) return std::string(name);
    const std::string& n = *requested;
    bool ok = !n.empty() && n[0] >= 'A' && n[0] <= 'Z';
    for (char c : n) ok = ok && ((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_');
    if (!ok)
      throw error(errc::invalid_argument, "Host::Options::name=\"" + n +
                                              "\" is not accepted: use upper case letters, digits and _, "
                                              "starting with a letter");
    return n;
  }

  template <class Rows>
  void copy_rows(const StridedRegion& r, Rows rows, Completion done) {
    if (r.bytes() <= inline_copy_bytes) {
      rows();
      done(nullptr);
      return;
    }
    run(std::move(rows), std::move(done));
  }
  void copy(void* dst, const void* src, std::size_t bytes, Completion done) {
    if (bytes <= inline_copy_bytes) {
      if (bytes != 0) std::memcpy(dst, src, bytes);
      done(nullptr);
      return;
    }
    run([=] { std::memcpy(dst, src, bytes); }, std::move(done));
  }

  // defer, not post: from a worker (a completion starting a stream's next operation) the work stays
  // on that thread instead of waking another one; from any other thread it is the same as post. A
  // graph replay's step started from a worker (`inline_launch_welcome`) runs at once, inline.
  //
  // From a thread outside the pool (a user's, another backend's, the CPU fallback's), Asio wakes a
  // worker after letting go of the pool's lock: the job may run and complete, and its completion
  // lead to this backend's destruction, while the posting thread is still inside that wake-up.
  // `posting_` counts such threads, and the destructor waits for them after joining the pool.
  //
  // One job type for every operation: the task is erased (inline when small, else in a block of the
  // recycling pool), so Asio's post and defer are instantiated once, not once per op and dtype.
  void run(HostTask f, Completion done) {
    auto job = [f = std::move(f), done = std::move(done)]() mutable {
      std::exception_ptr ep;
      try {
        f();
      } catch (...) {
        ep = std::current_exception();
      }
      done(std::move(ep));
    };
    if (pool_->get().get_executor().running_in_this_thread()) {
      if (xdev::detail::inline_launch_welcome) {  // a graph replay's next step: no hand-off at all
        xdev::detail::inline_launch_welcome = false;
        job();
        xdev::detail::inline_launch_welcome = true;
        return;
      }
      return boost::asio::defer(pool_->get(), std::move(job));
    }
    posting_.fetch_add(1);
    struct Leave {
      std::atomic<std::size_t>& n;
      ~Leave() { n.fetch_sub(1); }
    } leave{posting_};
    boost::asio::post(pool_->get(), std::move(job));
  }

  std::size_t devices_;
  std::size_t threads_;
  std::string name_;
  friend boost::asio::thread_pool& detail::worker_pool(Host& host) noexcept;

  std::unique_ptr<kernels::ThreadPool> pool_;
  std::atomic<std::size_t> posting_{0};  // threads outside the pool inside a post to it (see `run`)
  std::mutex live_m_;
  Block live_{&live_, &live_};  // the blocks allocated and not yet freed
};

inline boost::asio::thread_pool& detail::worker_pool(Host& host) noexcept {
  return host.pool_->get();
}

}  // namespace xdev::backends
