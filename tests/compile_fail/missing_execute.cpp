// expect: xdev backend: missing submission `void execute(
// Mistake: the backend has no way to run submitted work.
#include <xdev/backend/concepts.hpp>

#include <cstddef>
#include <string_view>

struct Mine {
  static constexpr std::string_view name = "MINE";
  using capabilities = xdev::Capabilities<xdev::MaxInflight<8>>;
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
  // no execute
};

static_assert(xdev::check_backend<Mine>());
