// A backend that satisfies every requirement except what its capability list or memory handle
// gets wrong: the capability-list cases differ only in `Caps`, the handle cases in `Handle`, and the positive control
// proves this body is complete (it must compile, and it instantiates Device and Runtime).
#pragma once

#include <xdev/backend/concepts.hpp>

#include <cstddef>
#include <string_view>

template <class Caps, class Handle = void*>
struct CompleteBackend {
  static constexpr std::string_view name = "MINE";
  using capabilities = Caps;
  using memory_handle = Handle;

  std::size_t device_count() const { return 1; }
  // Only compiled, never run (the tests use -fsyntax-only).
  memory_handle allocate(std::size_t, std::size_t) { return memory_handle{}; }
  void deallocate(std::size_t, memory_handle, std::size_t) noexcept {}
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
