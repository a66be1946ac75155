// A backend that satisfies every requirement except what its capability list gets wrong: the
// capability-list cases below differ only in `Caps`, and the positive control proves this body is
// complete (it must compile, and it instantiates Device and Runtime).
#pragma once

#include <xdev/backend/concepts.hpp>

#include <cstddef>
#include <string_view>

template <class Caps>
struct CompleteBackend {
  static constexpr std::string_view name = "MINE";
  using capabilities = Caps;
  using memory_handle = void*;

  std::size_t device_count() const { return 1; }
  memory_handle allocate(std::size_t, std::size_t bytes) { return ::operator new(bytes); }
  void deallocate(std::size_t, memory_handle h, std::size_t) noexcept { ::operator delete(h); }
  void copy_to_device(std::size_t, const void*, memory_handle, std::size_t, std::size_t, xdev::Completion done) {
    done(nullptr);
  }
  void copy_to_host(std::size_t, memory_handle, std::size_t, void*, std::size_t, xdev::Completion done) {
    done(nullptr);
  }
  void copy_between(std::size_t, memory_handle, std::size_t, std::size_t, memory_handle, std::size_t, std::size_t,
                    xdev::Completion done) {
    done(nullptr);
  }
  void execute(std::size_t, xdev::HostTask task, xdev::Completion done) {
    task();
    done(nullptr);
  }
};
