/// \file
/// `xdev::use_future`: a completion token that returns a `std::future` and never loses an error.
#pragma once

#include <xdev/async/device_queue.hpp>

#include <boost/asio/async_result.hpp>

#include <atomic>
#include <exception>
#include <future>
#include <memory>
#include <utility>

namespace xdev {

/// Completion token: the initiating function returns a `std::future<T>` (`std::future<void>` for
/// work without a result); an error reaches the future as the exception the work threw.
///
/// Unlike `asio::use_future`, an error whose future was dropped before the work completed is not
/// lost: the device keeps it and the next `synchronize()` raises it.
///
///     std::future<int> f = dev.execute([] { return 42; }, xdev::use_future);
struct use_future_t {};
inline constexpr use_future_t use_future{};

namespace detail {

// Tells whether a promise's shared state was freed: libstdc++ and libc++ allocate it through the
// promise's allocator, so the deallocation marks the moment the last of promise and future died.
struct future_probe {
  std::atomic<bool> freed{false};
};

template <class U>
struct probe_allocator {
  using value_type = U;
  std::shared_ptr<future_probe> probe;

  explicit probe_allocator(std::shared_ptr<future_probe> p) noexcept : probe(std::move(p)) {}
  template <class V>
  probe_allocator(const probe_allocator<V>& o) noexcept : probe(o.probe) {}  // NOLINT: allocator rebind

  U* allocate(std::size_t n) { return std::allocator<U>{}.allocate(n); }
  void deallocate(U* p, std::size_t n) noexcept {
    probe->freed.store(true, std::memory_order_release);
    std::allocator<U>{}.deallocate(p, n);
  }
  template <class V>
  friend bool operator==(const probe_allocator& a, const probe_allocator<V>& b) noexcept {
    return a.probe == b.probe;
  }
};

template <class... Ts>
class future_handler {
  static_assert(sizeof...(Ts) <= 1);
  using value_type = std::conditional_t<sizeof...(Ts) == 0, void, std::tuple_element_t<0, std::tuple<Ts..., void>>>;

 public:
  future_handler()
      : probe_(std::make_shared<future_probe>()), promise_(std::allocator_arg, probe_allocator<char>(probe_)) {}

  std::future<value_type> get_future() { return promise_.get_future(); }

  // Called by xdev's submission path: where an error goes when nobody holds the future any more.
  void set_error_sink(DeviceQueue* q) noexcept { sink_ = q; }

  void operator()(std::exception_ptr ep, Ts... value) {
    if (ep) {
      promise_.set_exception(ep);
      { auto released = std::move(promise_); }
      if (sink_ && probe_->freed.load(std::memory_order_acquire)) sink_->keep_error(std::move(ep));
      return;
    }
    promise_.set_value(std::move(value)...);
  }

 private:
  std::shared_ptr<future_probe> probe_;
  std::promise<value_type> promise_;
  DeviceQueue* sink_ = nullptr;
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
