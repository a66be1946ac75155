// expect: xdev backend: missing `using memory_handle = ...;`
// Mistake: the backend never says what a handle to its device memory is.
#include <xdev/backend/concepts.hpp>

#include <cstddef>
#include <string_view>

struct Mine {
  static constexpr std::string_view name = "MINE";
  using capabilities = xdev::Capabilities<xdev::MaxInflight<8>>;
  // no `using memory_handle = void*;`

  std::size_t device_count() const { return 1; }
  void* allocate(std::size_t, std::size_t bytes) { return ::operator new(bytes); }
  void deallocate(std::size_t, void* h, std::size_t) noexcept { ::operator delete(h); }
  void copy_to_device(std::size_t, const void*, void*, std::size_t, std::size_t, xdev::Completion done) {
    done(nullptr);
  }
  void copy_to_host(std::size_t, void*, std::size_t, void*, std::size_t, xdev::Completion done) { done(nullptr); }
  void copy_between(std::size_t, void*, std::size_t, std::size_t, void*, std::size_t, std::size_t,
                    xdev::Completion done) {
    done(nullptr);
  }
  void execute(std::size_t, xdev::HostTask task, xdev::Completion done) {
    task();
    done(nullptr);
  }
};

static_assert(xdev::check_backend<Mine>());
