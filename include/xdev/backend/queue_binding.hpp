/// \file
/// `xdev::QueueBinding<Queue>`: the native queue xdev bound to the calling thread, for a backend
/// with native in-order queues (`concepts::NativeQueues`). xdev calls the backend's `bind_queue`
/// before it starts each of a stream's operations on a thread and `unbind_queue` after; the backend
/// records the binding here and looks it up when it enqueues:
///
///     using Binding = xdev::QueueBinding<queue_handle>;
///     void bind_queue(std::size_t d, queue_handle q) noexcept { Binding::bind(this, &dev(d), q); }
///     void unbind_queue(std::size_t) noexcept { Binding::unbind(); }
///     queue_handle queue_of(const Dev& d) const noexcept { return Binding::queue_of(this, &d, d.queue); }
///
/// The binding names the backend object and the device it is for, so that a call for another
/// device, or to another backend object with the same queue type, still goes to its own queue.
#pragma once

namespace xdev {

template <class Queue>
class QueueBinding {
 public:
  /// Binds `queue` on the calling thread for `device` of backend object `owner`.
  static void bind(const void* owner, const void* device, Queue queue) noexcept { current_ = {owner, device, queue}; }
  /// Ends the calling thread's binding.
  static void unbind() noexcept { current_ = {}; }
  /// The calling thread's bound queue for `device` of `owner`, else `fallback` (the device's own).
  static Queue queue_of(const void* owner, const void* device, Queue fallback) noexcept {
    return current_.owner == owner && current_.device == device && owner != nullptr ? current_.queue : fallback;
  }

 private:
  struct Slot {
    const void* owner = nullptr;
    const void* device = nullptr;
    Queue queue{};
  };
  static inline thread_local Slot current_{};
};

}  // namespace xdev
