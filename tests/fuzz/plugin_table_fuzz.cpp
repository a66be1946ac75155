// A plugin's tables as the host validates them before using them: the plugin API table
// (`check_table`, then which fields `table_has` lets the host read) and the capabilities struct
// (`check_struct_size`, `from_c`). Sizes, versions, flags, the name and which entries are null come
// from the input; entries are never called. Any table is accepted or refused with
// incompatible_abi / invalid_argument; an accepted one is consistent.
#include <xdev/plugin/abi.h>
#include <xdev/plugin/detail/abi_bridge.hpp>
#include <xdev/plugin/table.hpp>

#include "fuzz_support.hpp"

#include <cstddef>
#include <cstring>
#include <string>

namespace {

// Takes `n` bytes from the input (zeros once it is used up).
struct Reader {
  const std::uint8_t* data;
  std::size_t size;
  void take(void* out, std::size_t n) {
    std::memset(out, 0, n);
    const std::size_t k = n < size ? n : size;
    if (k > 0) std::memcpy(out, data, k);
    data += k;
    size -= k;
  }
  template <class T>
  T get() {
    T value{};
    take(&value, sizeof value);
    return value;
  }
};

void never_called() {}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace p = xdev::plugin;
  Reader in{data, size};
  xdev_plugin_api api{};
  // Sizes near the real ones matter most: an offset from the full table's size.
  api.struct_size = sizeof(xdev_plugin_api) - static_cast<std::size_t>(in.get<std::int16_t>());
  api.abi_major = in.get<std::uint8_t>();
  api.abi_minor = in.get<std::uint8_t>();
  api.flags = in.get<std::uint32_t>();
  // Every entry slot (from `initialize` to the end) null or not, by the bits of the input.
  constexpr std::size_t first_entry = offsetof(xdev_plugin_api, initialize);
  constexpr std::size_t slot = sizeof(void (*)());
  const auto present = in.get<std::uint64_t>();
  const auto present_high = in.get<std::uint64_t>();
  void (*const entry)() = &never_called;
  for (std::size_t at = first_entry, i = 0; at + slot <= sizeof(api); at += slot, ++i) {
    const bool on = i < 64 ? (present >> i) & 1 : (present_high >> (i - 64)) & 1;
    if (on) std::memcpy(reinterpret_cast<char*>(&api) + at, &entry, slot);
  }
  const auto name_length = in.get<std::uint8_t>() % 72;
  std::string name(name_length, '\0');
  in.take(name.data(), name.size());
  name = name.c_str();  // up to the first NUL, as C would read it
  const bool null_name = in.get<std::uint8_t>() == 0xff;
  api.name = null_name ? nullptr : name.c_str();
  api.version = "fuzz";
  api.platform = nullptr;

  xdev_fuzz::only_errors({xdev::errc::incompatible_abi, xdev::errc::invalid_argument}, [&] {
    p::check_table(&api, "fuzz");
    XDEV_FUZZ_CHECK(api.abi_major == XDEV_ABI_MAJOR && api.abi_minor >= XDEV_ABI_MIN_MINOR);
    XDEV_FUZZ_CHECK(api.struct_size >= p::detail::table_size_v1_1 && api.name != nullptr);
    XDEV_FUZZ_CHECK(p::detail::is_plugin_name(api.name));
    // What PluginBackend may read: never a field past struct_size.
    if (p::detail::table_has(&api, p::queues_minor, p::detail::table_size_v1_5))
      XDEV_FUZZ_CHECK(api.struct_size >= offsetof(xdev_plugin_api, record_marker));
  });

  xdev_capabilities caps{};
  in.take(&caps, sizeof caps);
  caps.struct_size = sizeof(xdev_capabilities) - (caps.struct_size % 80);
  xdev_fuzz::only_errors({xdev::errc::incompatible_abi, xdev::errc::invalid_argument}, [&] {
    p::detail::check_struct_size(caps.struct_size, sizeof(xdev_capabilities), "xdev_capabilities from plugin FUZZ");
    const auto set = p::detail::from_c(caps, "FUZZ");
    XDEV_FUZZ_CHECK(set.max_inflight >= 1);
    XDEV_FUZZ_CHECK((set.supported_dtypes >> XDEV_DTYPE_COUNT) == 0);
  });
  return 0;
}
