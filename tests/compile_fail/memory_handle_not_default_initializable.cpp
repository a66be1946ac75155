// expect: xdev backend: missing `using memory_handle = ...;` (it must be a trivially copyable, equality-comparable,
// default-initializable A handle without a value-initialized "no memory" state: Buffer and the allocator need one.
#include <xdev/backend/concepts.hpp>

#include <cstddef>
#include <string_view>

struct Handle {
  explicit Handle(int v) : value(v) {}
  int value;
  friend bool operator==(const Handle&, const Handle&) = default;
};

struct Mine {
  static constexpr std::string_view name = "MINE";
  using capabilities = xdev::Capabilities<>;
  using memory_handle = Handle;
  std::size_t device_count() const { return 1; }
  memory_handle allocate(std::size_t, std::size_t) { return Handle(1); }
  void deallocate(std::size_t, memory_handle, std::size_t) noexcept {}
  void copy_to_device(std::size_t, const void*, memory_handle, std::size_t, std::size_t, xdev::Completion) {}
  void copy_to_host(std::size_t, memory_handle, std::size_t, void*, std::size_t, xdev::Completion) {}
  void copy_between(std::size_t, memory_handle, std::size_t, std::size_t, memory_handle, std::size_t, std::size_t,
                    xdev::Completion) {}
  void execute(std::size_t, xdev::HostTask, xdev::Completion) {}
};

static_assert(xdev::check_backend<Mine>());
