// expect-success
// Positive control: a minimal correct backend passes check_backend and instantiates Device and Runtime.
// If this file stops compiling, every compile-fail test is suspect (they could fail for the wrong reason).
#include <xdev/backend/concepts.hpp>
#include <xdev/device/device.hpp>
#include <xdev/device/runtime.hpp>

#include <cstddef>
#include <string_view>

struct Mine {
  static constexpr std::string_view name = "MINE";
  using capabilities = xdev::Capabilities<xdev::MaxInflight<8>, xdev::DenseGather<16>>;
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

static_assert(xdev::check_backend<Mine>());
static_assert(xdev::concepts::Backend<Mine>);
static_assert(xdev::Device<Mine>::capabilities::max_inflight == 8);

int main() {
  xdev::Runtime<Mine> runtime;
  xdev::Device<Mine> device = runtime.device(0);
  return device.ordinal() == 0 ? 0 : 1;
}
