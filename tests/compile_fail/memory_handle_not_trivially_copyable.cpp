// expect: xdev backend: missing `using memory_handle = ...;` (it must be a trivially copyable, equality-comparable
// Mistake: the memory handle owns its memory (std::shared_ptr), so it is not trivially copyable.
#include <xdev/backend/concepts.hpp>

#include <cstddef>
#include <memory>
#include <string_view>

struct Mine {
  static constexpr std::string_view name = "MINE";
  using capabilities = xdev::Capabilities<xdev::MaxInflight<8>>;
  using memory_handle = std::shared_ptr<void>;

  std::size_t device_count() const { return 1; }
  memory_handle allocate(std::size_t, std::size_t bytes) {
    return memory_handle(::operator new(bytes), [](void* p) { ::operator delete(p); });
  }
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

static_assert(xdev::check_backend<Mine>());
