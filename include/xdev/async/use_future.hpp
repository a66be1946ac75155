/// \file
/// `xdev::use_future`: a completion token that returns a `std::future` and never loses an error.
#pragma once

#include <xdev/async/detail/wait_helper.hpp>
#include <xdev/async/device_queue.hpp>
#include <xdev/core/detail/block_pool.hpp>

#include <boost/asio/async_result.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <exception>
#include <future>
#include <memory>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>

namespace xdev {

/// Completion token: the initiating function returns an `xdev::Future<T>` (a `std::future<T>`;
/// `T` is `void` for work without a result). An error reaches the future as the exception the
/// work threw.
///
/// Unlike `asio::use_future`, an error is never lost: when the future is destroyed without
/// `get()` having been called (before or after the work completed), the device keeps the error
/// and its next `synchronize()` raises it.
///
///     auto f = dev.execute([] { return 42; }, xdev::use_future);  // xdev::Future<int>
///     (void)dev.execute(may_throw);   // dropped: a failure is raised by dev.synchronize()
struct use_future_t {};
inline constexpr use_future_t use_future{};

namespace detail {

// Who has seen an operation's error. The handler and the future race to finish; whichever
// comes second decides whether the error went unseen.
class future_probe {
 public:
  void set_sink(std::shared_ptr<DeviceQueue> q) noexcept { sink_ = std::move(q); }

  /// Where the operation stands: its device had admitted `admitted_before` operations before it,
  /// and counts those completed in `completed` (read when the future is waited for). A wait behind
  /// more than `max_ahead_for_spin` operations *at that time* outlasts a sleep and a wake-up, so
  /// `get()` sleeps at once instead of polling first: polling would only take a processor from
  /// the work it waits for where that work runs on the host's cores (the host backend, an OpenCL
  /// CPU device). On a 2-core machine, 64 OpenCL operations and a wait for the last ran 25 %
  /// faster this way. Counted at the wait, not at admission: a batch of 1024 host submissions
  /// waited for in order found most of its work done by the time it came to each future, and
  /// slept and was woken for each one (15-20 % slower). The submitting thread reads no word the
  /// completing threads write: `admitted_before` is its own count.
  void note_work_ahead(const std::atomic<std::size_t>& completed, std::size_t admitted_before) noexcept {
    completed_ = &completed;
    ticket_ = admitted_before;
  }
  /// Without a count to read at the wait: `n` operations ahead, as at admission.
  void note_work_ahead(std::size_t n) noexcept {
    completed_ = nullptr;
    ticket_ = n;
  }
  [[nodiscard]] bool worth_polling() const noexcept {
    const std::size_t done = completed_ != nullptr ? completed_->load(std::memory_order_relaxed) : 0;
    return ticket_ <= done || ticket_ - done <= max_ahead_for_spin;
  }
  static constexpr std::size_t max_ahead_for_spin = 2;

  /// Work that a waiting thread may run itself (see `wait_helper`); set before the future is
  /// handed out.
  void set_wait_helper(wait_helper h) noexcept { helper_ = std::move(h); }
  [[nodiscard]] bool can_help() const noexcept { return helper_.run != nullptr; }
  void help() const { helper_(); }

  // The operation failed with `e` (called once, before the future can see the error).
  void failed(std::exception_ptr e) {
    error_ = std::move(e);
    int expected = pending;
    if (!state_.compare_exchange_strong(expected, errored) && expected == abandoned) report();
  }
  // The future's owner called get() or share(): the error, if any, is theirs now.
  void retrieved() noexcept { state_.store(done); }
  // The future went away unread.
  void abandon() {
    int expected = pending;
    if (!state_.compare_exchange_strong(expected, abandoned) && expected == errored) report();
  }
  // The future was sliced into a plain std::future, which cannot tell us about get(). The last
  // release of the shared state decides: one during stack unwinding is get() rethrowing.
  void untracked() noexcept { untracked_.store(true); }
  void state_released() noexcept {
    if (!untracked_.load() || std::uncaught_exceptions() > 0) return;
    int expected = errored;
    if (state_.compare_exchange_strong(expected, done)) report();
  }

 private:
  enum : int { pending, abandoned, errored, done };
  void report() noexcept {
    state_.store(done);
    if (sink_ && error_) sink_->keep_error(error_);
  }

  std::shared_ptr<DeviceQueue> sink_;
  std::exception_ptr error_;
  std::atomic<int> state_{pending};
  std::atomic<bool> untracked_{false};
  // Set by the submitting thread before the future is handed out. `completed_` is the device's
  // `ProgressCounter`, never freed; `ticket_` its value once the work ahead has completed.
  const std::atomic<std::size_t>* completed_ = nullptr;
  std::size_t ticket_ = 0;
  wait_helper helper_;
};

// Allocates the promise's shared state (from the block pool, like the probe), so that its final release is observable
// (see untracked()).
template <class U>
struct probe_allocator {
  using value_type = U;
  std::shared_ptr<future_probe> probe;

  explicit probe_allocator(std::shared_ptr<future_probe> p) noexcept : probe(std::move(p)) {}
  template <class V>
  probe_allocator(const probe_allocator<V>& o) noexcept : probe(o.probe) {}  // NOLINT: allocator rebind

  U* allocate(std::size_t n) { return pool_allocator<U>{}.allocate(n); }
  void deallocate(U* p, std::size_t n) noexcept {
    pool_allocator<U>{}.deallocate(p, n);
    probe->state_released();
  }
  template <class V>
  friend bool operator==(const probe_allocator& a, const probe_allocator<V>& b) noexcept {
    return a.probe == b.probe;
  }
};

}  // namespace detail

/// The future `xdev::use_future` returns: a `std::future<T>` that also tells its device when it
/// is destroyed without `get()`, so an error it holds is raised by `synchronize()` instead of
/// vanishing. Converting it to a plain `std::future` keeps that guarantee only approximately.
template <class T>
class Future : public std::future<T> {
 public:
  Future() noexcept = default;
  Future(std::future<T>&& f, std::shared_ptr<detail::future_probe> probe) noexcept
      : std::future<T>(std::move(f)), probe_(std::move(probe)) {}
  Future(Future&& o) noexcept : std::future<T>(std::move(o)), probe_(std::move(o.probe_)) {}
  Future& operator=(Future&& o) noexcept {
    if (this != &o) {
      release();
      std::future<T>::operator=(std::move(o));
      probe_ = std::move(o.probe_);
    }
    return *this;
  }
  ~Future() { release(); }

  /// `std::future<T>::get()`; the error, if any, is the caller's from here on. The future of a
  /// collective across processes that has not started yet runs it on this thread (see
  /// `distributed::Session::post_awaited`); `wait()` does too.
  T get() {
    if (probe_) {
      probe_->retrieved();
      help();
    }
    await_briefly();
    return std::future<T>::get();
  }
  /// `std::future<T>::wait()`, after the same brief poll as `get()`.
  void wait() const {
    help();
    await_briefly();
    std::future<T>::wait();
  }
  /// `std::future<T>::share()`; errors become the shared future's holders'.
  std::shared_future<T> share() noexcept {
    if (probe_) probe_->retrieved();
    return std::future<T>::share();
  }

 private:
  // Runs the work on this thread where it waits for a thread of its own to start it (a small
  // collective); first a test that it is not done already.
  void help() const {
    if (probe_ && probe_->can_help() && this->valid() &&
        this->wait_for(std::chrono::seconds(0)) == std::future_status::timeout)
      probe_->help();
  }

  // Work that completes within microseconds (a kernel on a GPU, a small host op) is usually done
  // before a sleeping thread would have been woken: poll for up to 50 us first, yielding the CPU
  // between polls so that a worker waiting for a core runs. Then sleep as std::future does. Work
  // queued behind many operations is waited for by sleeping at once (`note_work_ahead`).
  void await_briefly() const {
    if (!this->valid() || (probe_ && !probe_->worth_polling())) return;
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(50);
    while (this->wait_for(std::chrono::seconds(0)) == std::future_status::timeout &&
           std::chrono::steady_clock::now() < until)
      std::this_thread::yield();
  }

  void release() noexcept {
    if (!probe_) return;
    if (this->valid())
      probe_->abandon();
    else
      probe_->untracked();  // our state was moved into a plain std::future
    probe_.reset();
  }
  std::shared_ptr<detail::future_probe> probe_;
};

namespace detail {

template <class... Ts>
class future_handler {
  static_assert(sizeof...(Ts) <= 1);
  using value_type = std::conditional_t<sizeof...(Ts) == 0, void, std::tuple_element_t<0, std::tuple<Ts..., void>>>;

 public:
  future_handler()
      : probe_(std::allocate_shared<future_probe>(pool_allocator<future_probe>{})),
        promise_(std::allocator_arg, probe_allocator<char>(probe_)) {}

  Future<value_type> get_future() { return Future<value_type>(promise_.get_future(), probe_); }

  // Called by xdev's submission path: where an error goes when nobody retrieves it.
  void set_error_sink(std::shared_ptr<DeviceQueue> q) noexcept { probe_->set_sink(std::move(q)); }
  // Called by xdev's submission path before admission (see future_probe::note_work_ahead).
  void note_work_ahead(const std::atomic<std::size_t>& completed, std::size_t admitted_before) noexcept {
    probe_->note_work_ahead(completed, admitted_before);
  }
  void note_work_ahead(std::size_t n) noexcept { probe_->note_work_ahead(n); }
  // For the submission path of work that the waiting thread may run (see `wait_helper`): the
  // probe lives as long as the future.
  future_probe& probe() noexcept { return *probe_; }

  void operator()(std::exception_ptr ep, Ts... value) {
    if (ep) {
      probe_->failed(ep);
      promise_.set_exception(std::move(ep));
      return;
    }
    promise_.set_value(std::move(value)...);
  }

 private:
  std::shared_ptr<future_probe> probe_;
  std::promise<value_type> promise_;
};

}  // namespace detail
}  // namespace xdev

template <class... Ts>
class boost::asio::async_result<xdev::use_future_t, void(std::exception_ptr, Ts...)> {
 public:
  using handler_type = xdev::detail::future_handler<Ts...>;
  using return_type = decltype(std::declval<handler_type&>().get_future());

  template <class Initiation, class... Args>
  static return_type initiate(Initiation&& init, xdev::use_future_t, Args&&... args) {
    handler_type h;
    return_type f = h.get_future();
    std::forward<Initiation>(init)(std::move(h), std::forward<Args>(args)...);
    return f;
  }
};
