// An out-of-tree xdev plugin, as small as one can be: a backend type (one device of malloc'ed host
// memory, work done inside each call, a native `scale` for float) and XDEV_DEFINE_PLUGIN. Built by
// `xdev_add_plugin` against the installed (or vendored) xdev; main.cpp loads it by path.
#include <xdev/plugin/define.hpp>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

namespace consumer {

class Tiny {
 public:
  static constexpr std::string_view name = "TINY";
  using capabilities = xdev::Capabilities<xdev::MaxInflight<4>, xdev::Priority<-500>>;
  using memory_handle = void*;

  [[nodiscard]] std::size_t device_count() const noexcept { return 1; }
  memory_handle allocate(std::size_t, std::size_t bytes) {
    if (void* p = std::malloc(bytes == 0 ? 1 : bytes)) return p;
    throw xdev::error(xdev::errc::out_of_memory, "TINY cannot allocate " + std::to_string(bytes) + " bytes");
  }
  void deallocate(std::size_t, memory_handle h, std::size_t) noexcept { std::free(h); }
  void copy_to_device(std::size_t, const void* src, memory_handle dst, std::size_t off, std::size_t n,
                      xdev::Completion done) {
    if (n != 0) std::memcpy(static_cast<char*>(dst) + off, src, n);
    done(nullptr);
  }
  void copy_to_host(std::size_t, memory_handle src, std::size_t off, void* dst, std::size_t n, xdev::Completion done) {
    if (n != 0) std::memcpy(dst, static_cast<const char*>(src) + off, n);
    done(nullptr);
  }
  void copy_between(std::size_t, memory_handle src, std::size_t src_off, std::size_t, memory_handle dst,
                    std::size_t dst_off, std::size_t n, xdev::Completion done) {
    if (n != 0) std::memmove(static_cast<char*>(dst) + dst_off, static_cast<const char*>(src) + src_off, n);
    done(nullptr);
  }
  void execute(std::size_t, xdev::HostTask task, xdev::Completion done) {
    task();
    done(nullptr);
  }
  void scale(std::size_t, const xdev::ops::ScaleArgs<float, memory_handle>& a, xdev::Completion done) {
    auto* x = static_cast<float*>(a.x);
    for (std::size_t i = 0; i < a.n; ++i) x[i] *= a.alpha;
    done(nullptr);
  }
};

}  // namespace consumer

XDEV_DEFINE_PLUGIN_WITH(consumer::Tiny, .version = "0.0.1");
