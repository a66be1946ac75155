/// \file
/// The plugin side of the boundary: `PluginTable<B, Info>::api`, the `xdev_plugin_api` table that
/// `XDEV_DEFINE_PLUGIN` generates from a typed backend `B` (see <xdev/plugin/define.hpp>). Every
/// entry is `noexcept`: it converts C++ exceptions into a status code and a message.
#pragma once

#include <xdev/plugin/abi.h>
#include <xdev/backend/completion.hpp>
#include <xdev/backend/concepts.hpp>
#include <xdev/backend/device_properties.hpp>
#include <xdev/core/dtype.hpp>
#include <xdev/core/error.hpp>
#include <xdev/ops/op_args.hpp>
#include <xdev/plugin/detail/abi_bridge.hpp>
#include <xdev/plugin/detail/entry_guard.hpp>
#include <xdev/plugin/detail/kernel_marshal.hpp>
#include <xdev/plugin/detail/op_marshal.hpp>
#include <xdev/plugin/detail/op_table.hpp>
#include <xdev/plugin/detail/strided_entries.hpp>
#include <xdev/plugin/detail/window_entries.hpp>
#include <xdev/policy/capability_set.hpp>

#include <algorithm>
#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace xdev::plugin {

/// What `XDEV_DEFINE_PLUGIN_WITH` may set besides the backend type; every member left out (or
/// empty) takes the default described. The table gets NUL-terminated copies of the strings.
struct PluginInfo {
  /// The device type; empty: `B::name`. Upper case, `[A-Z][A-Z0-9_]*`.
  std::string_view name{};
  /// The plugin's own version, free form; empty: `B::plugin_version` if `B` has it, else "".
  std::string_view version{};
  /// What the plugin runs on, free form; empty: `B::plugin_platform` if `B` has it, else "".
  std::string_view platform{};
  /// `XDEV_PLUGIN_*` flags (`XDEV_PLUGIN_NEVER_UNLOAD`); 0: none.
  std::uint32_t flags = 0;
};

namespace detail {

// ---- compile-time strings -------------------------------------------------------------------

// A NUL-terminated copy, in static storage, of the compile-time string `Src::value`.
template <class Src>
struct StaticString {
  static constexpr std::string_view view = Src::value;
  static constexpr std::array<char, view.size() + 1> storage = [] {
    std::array<char, view.size() + 1> a{};
    for (std::size_t i = 0; i < view.size(); ++i) a[i] = view[i];
    return a;
  }();
};

// Optional static members naming the plugin's version and platform (compile-time strings).
template <class B>
concept HasPluginVersion = requires {
  { B::plugin_version } -> std::convertible_to<std::string_view>;
  std::integral_constant<std::size_t, std::string_view(B::plugin_version).size()>::value;
};
template <class B>
concept HasPluginPlatform = requires {
  { B::plugin_platform } -> std::convertible_to<std::string_view>;
  std::integral_constant<std::size_t, std::string_view(B::plugin_platform).size()>::value;
};

// The strings of the table: the macro's option when given, else the backend's static member.
template <class B, class Info>
struct NameOf {
  static constexpr std::string_view value = Info::value.name.empty() ? std::string_view(B::name) : Info::value.name;
};
template <class B, class Info>
struct VersionOf {
  static constexpr std::string_view value = [] {
    if constexpr (HasPluginVersion<B>)
      return Info::value.version.empty() ? std::string_view(B::plugin_version) : Info::value.version;
    else
      return Info::value.version;
  }();
};
template <class B, class Info>
struct PlatformOf {
  static constexpr std::string_view value = [] {
    if constexpr (HasPluginPlatform<B>)
      return Info::value.platform.empty() ? std::string_view(B::plugin_platform) : Info::value.platform;
    else
      return Info::value.platform;
  }();
};

// ---- optional hooks of the backend type -----------------------------------------------------

template <class B>
concept HasInitializeHook = requires {
  B::initialize();
};

// ---- which ops the backend runs, per dtype -------------------------------------------------

/// The `op_dtypes` masks of backend `B`, indexed by `XDEV_OP_*`: exactly the dtypes (and pairs)
/// whose arguments it runs itself (`ops::has_native_op`: the op's member, or `run_op`).
template <class B>
consteval std::array<std::uint64_t, XDEV_OP_COUNT> op_masks() {
  std::array<std::uint64_t, XDEV_OP_COUNT> m{};
  each_c_op([&]<class Row>(std::type_identity<Row>) {
    Row::template each_type<typename B::memory_handle>([&]<class Args>(std::type_identity<Args>, std::uint32_t bit) {
      if (ops::has_native_op<B, Args>) m[Row::code] |= std::uint64_t{1} << bit;
    });
  });
  return m;
}

// ---- the backend object ---------------------------------------------------------------------

/// What `create` returns to the host: the backend, its capabilities as the C struct, and the
/// device descriptions `describe_device` handed out.
template <class B>
struct Client {
  template <class... Args>
  explicit Client(Args&&... args) : backend(std::forward<Args>(args)...) {}

  /// A NUL-terminated copy of `text`, the description of `device` or one of its properties' texts,
  /// valid while this client lives: each distinct text of a device is kept once (a text that
  /// changes adds one string). Thread-safe.
  const char* keep_text(std::size_t device, std::string text) {
    std::lock_guard lk(descriptions_mutex);
    std::list<std::string>& texts = descriptions[device];
    for (const std::string& t : texts)
      if (t == text) return t.c_str();
    return texts.emplace_back(std::move(text)).c_str();
  }

  B backend;
  xdev_capabilities capabilities{};
  std::mutex descriptions_mutex;
  std::map<std::size_t, std::list<std::string>> descriptions;  // list: the strings never move
};

// ---- the table ------------------------------------------------------------------------------

/// The entries of the table of backend `B` (static members, so their addresses are constants);
/// `Info::value` is the `PluginInfo` given to the macro.
template <class B, class Info>
struct PluginTable {
  static_assert(check_backend<B>(),
                "XDEV_DEFINE_PLUGIN(B): B does not satisfy xdev::concepts::Backend (see the message above)");
  using H = typename B::memory_handle;
  static_assert(is_portable_handle<H>,
                "XDEV_DEFINE_PLUGIN(B): B::memory_handle must be trivially copyable and at most 8 bytes, so "
                "that it can travel across the plugin boundary as an xdev_memory (uint64_t); use a pointer, an "
                "index or an offset");
  static_assert(std::is_constructible_v<B, const ClientOptions&> || std::is_default_constructible_v<B>,
                "XDEV_DEFINE_PLUGIN(B): B must be constructible from `const xdev::plugin::ClientOptions&` or "
                "default-constructible, so that the plugin's `create` can make it");

  static constexpr PluginInfo info = Info::value;
  static constexpr std::array<std::uint64_t, XDEV_OP_COUNT> masks = op_masks<B>();

  static constexpr const char* name() noexcept { return StaticString<NameOf<B, Info>>::storage.data(); }
  static constexpr const char* version() noexcept { return StaticString<VersionOf<B, Info>>::storage.data(); }
  static constexpr const char* platform() noexcept { return StaticString<PlatformOf<B, Info>>::storage.data(); }

  static Client<B>& client(void* p) noexcept { return *static_cast<Client<B>*>(p); }
  static B& backend(void* p) noexcept { return client(p).backend; }
  // `backend(p)` as an expression that depends on the dtype types, so that a call to an op member
  // the backend lacks is never looked up (in a discarded `if constexpr` branch) before instantiation.
  template <class...>
  static B& backend_for(void* p) noexcept {
    return client(p).backend;
  }

  // -- lifetime --

  static xdev_status initialize(const xdev_host_info* host, xdev_error* err) noexcept {
    return guarded(err, [&] {
      const auto& h = deref(host, "xdev_host_info");
      check_struct_size(h.struct_size, sizeof(xdev_host_info), "xdev_host_info");
      if (h.abi_major != XDEV_ABI_MAJOR)
        throw error(errc::incompatible_abi, "the host speaks ABI " + std::to_string(h.abi_major) + "." +
                                                std::to_string(h.abi_minor) + ", this plugin ABI " +
                                                std::to_string(XDEV_ABI_MAJOR) + "." + std::to_string(XDEV_ABI_MINOR));
      if constexpr (HasInitializeHook<B>) {
        // Runs once per loaded plugin; a hook that throws runs again on the next call.
        static std::once_flag once;
        std::call_once(once, [] { B::initialize(); });
      }
    });
  }

  static xdev_status create(const xdev_client_options* options, void** out, xdev_error* err) noexcept {
    return guarded(err, [&] {
      if (out == nullptr) throw error(errc::invalid_argument, "the output pointer is null");
      ClientOptions o;
      if (options != nullptr) {
        check_struct_size(options->struct_size, sizeof(xdev_client_options), "xdev_client_options");
        o = from_c(*options);
      }
      std::unique_ptr<Client<B>> c;
      if constexpr (std::is_constructible_v<B, const ClientOptions&>)
        c = std::make_unique<Client<B>>(std::as_const(o));
      else
        c = std::make_unique<Client<B>>();
      if constexpr (concepts::HasRuntimeCapabilities<B>)
        c->capabilities = to_c(std::as_const(c->backend).runtime_capabilities());
      else
        c->capabilities = to_c(B::capabilities::set);
      *out = c.release();
    });
  }

  static void destroy(void* p) noexcept { delete static_cast<Client<B>*>(p); }

  static xdev_status capabilities(void* p, const xdev_capabilities** out, xdev_error* err) noexcept {
    return guarded(err, [&] {
      if (out == nullptr) throw error(errc::invalid_argument, "the output pointer is null");
      *out = &client(p).capabilities;
    });
  }

  static xdev_status device_count(void* p, std::uint64_t* out, xdev_error* err) noexcept {
    return guarded(err, [&] {
      if (out == nullptr) throw error(errc::invalid_argument, "the output pointer is null");
      *out = static_cast<std::uint64_t>(std::as_const(backend(p)).device_count());
    });
  }

  // In the table only when `B` has `device_description` (`describe_entry`). The backend is asked on
  // every call; the text is kept by the client (`Client::keep_description`).
  static xdev_status describe_device(void* p, std::uint64_t device, const char** out, xdev_error* err) noexcept {
    return guarded(err, [&] {
      if (out == nullptr) throw error(errc::invalid_argument, "the output pointer is null");
      const B& b = std::as_const(backend(p));
      const std::size_t n = b.device_count();
      if (device >= n)
        throw error(errc::invalid_argument, "describe_device: device " + std::to_string(device) +
                                                " is out of range [0, " + std::to_string(n) + ")");
      const auto d = static_cast<std::size_t>(device);
      *out = client(p).keep_text(d, std::string(b.device_description(d)));
    });
  }

  // In the table only when `B` has `device_properties` (`properties_entry`). The backend is asked
  // on every call; its texts are kept by the client. Writes only the fields `out->struct_size`
  // covers (an older host's struct is smaller).
  static xdev_status device_properties(void* p, std::uint64_t device, xdev_device_properties* out,
                                       xdev_error* err) noexcept {
    return guarded(err, [&] {
      if (out == nullptr) throw error(errc::invalid_argument, "the output pointer is null");
      if (out->struct_size < sizeof(out->struct_size))
        throw error(errc::invalid_argument, "device_properties: struct_size " + std::to_string(out->struct_size) +
                                                " does not even cover struct_size");
      const B& b = std::as_const(backend(p));
      const std::size_t n = b.device_count();
      if (device >= n)
        throw error(errc::invalid_argument, "device_properties: device " + std::to_string(device) +
                                                " is out of range [0, " + std::to_string(n) + ")");
      const auto d = static_cast<std::size_t>(device);
      const DeviceProperties props = b.device_properties(d);
      auto text = [&](const std::string& s) { return s.empty() ? nullptr : client(p).keep_text(d, s); };
      xdev_device_properties c{};
      c.struct_size = sizeof c;
      c.name = text(props.name);
      c.vendor = text(props.vendor);
      c.driver_version = text(props.driver_version);
      c.architecture = text(props.architecture);
      c.compute_units = props.compute_units;
      c.max_work_group_size = props.max_work_group_size;
      c.memory_total = props.memory_total;
      c.memory_free = props.memory_free ? *props.memory_free : UINT64_MAX;
      c.device_type = static_cast<std::uint32_t>(props.type);
      const std::size_t covered = std::min(out->struct_size, sizeof c);  // read before it is overwritten
      c.struct_size = covered;
      std::memcpy(static_cast<void*>(out), &c, covered);
    });
  }

  // -- native queues (in the table only when `B` has them: `queue_entry`) --

  static xdev_status create_queue(void* p, std::uint64_t device, std::uint64_t* out, xdev_error* err) noexcept {
    return guarded(err, [&] {
      if (out == nullptr) throw error(errc::invalid_argument, "the output pointer is null");
      if constexpr (concepts::NativeQueues<B>) {
        const std::size_t n = std::as_const(backend(p)).device_count();
        if (device >= n)
          throw error(errc::invalid_argument, "create_queue: device " + std::to_string(device) +
                                                  " is out of range [0, " + std::to_string(n) + ")");
        *out = handle_bits(backend(p).create_queue(static_cast<std::size_t>(device)));
      }
    });
  }
  static void destroy_queue(void* p, std::uint64_t device, std::uint64_t q) noexcept {
    if constexpr (concepts::NativeQueues<B>)
      backend(p).destroy_queue(static_cast<std::size_t>(device), handle_from<typename B::queue_handle>(q));
  }
  static void bind_queue(void* p, std::uint64_t device, std::uint64_t q) noexcept {
    if constexpr (concepts::NativeQueues<B>) {
      if (q == 0)
        backend(p).unbind_queue(static_cast<std::size_t>(device));
      else
        backend(p).bind_queue(static_cast<std::size_t>(device), handle_from<typename B::queue_handle>(q));
    }
  }

  // -- native markers (in the table only when `B` has them: `marker_entry`) --

  static xdev_status record_marker(void* p, std::uint64_t device, const xdev_completion* done, std::uint64_t* out,
                                   xdev_error* err) noexcept {
    return run_async(err, done, [&](Completion c) {
      if (out == nullptr) throw error(errc::invalid_argument, "the output pointer is null");
      if constexpr (concepts::NativeMarkers<B>) {
        *out = handle_bits(backend(p).record_marker(static_cast<std::size_t>(device), std::move(c)));
        if (*out == 0) throw error(errc::internal, "record_marker returned the null marker");
      }
    });
  }
  static xdev_status wait_marker(void* p, std::uint64_t device, std::uint64_t m, xdev_error* err) noexcept {
    return guarded(err, [&] {
      if constexpr (concepts::NativeMarkers<B>)
        backend(p).wait_marker(static_cast<std::size_t>(device), handle_from<typename B::marker_handle>(m));
    });
  }
  static void release_marker(void* p, std::uint64_t device, std::uint64_t m) noexcept {
    if constexpr (concepts::NativeMarkers<B>)
      backend(p).release_marker(static_cast<std::size_t>(device), handle_from<typename B::marker_handle>(m));
  }

  // -- user kernels given as source (in the table only when `B` runs them: `kernel_entry`) --

  static xdev_status create_kernel(void* p, const xdev_kernel_source* source, std::uint64_t* out,
                                   xdev_error* err) noexcept {
    return guarded(err, [&] {
      if (out == nullptr) throw error(errc::invalid_argument, "the output pointer is null");
      if constexpr (concepts::RunsSourceKernels<B>) {
        *out = handle_bits(backend(p).create_kernel(kernel_source_from(source)));
        if (*out == 0) throw error(errc::internal, "create_kernel returned the null kernel");
      }
    });
  }
  static xdev_status launch_kernel(void* p, std::uint64_t device, std::uint64_t kernel,
                                   const xdev_kernel_launch* launch, const xdev_completion* done,
                                   xdev_error* err) noexcept {
    return run_async(err, done, [&](Completion c) {
      if constexpr (concepts::RunsSourceKernels<B>) {
        auto args = kernel_launch_from<H>(launch);
        if constexpr (!takes_kernel_arg_offsets<B>) refuse_windows(NameOf<B, Info>::value, args.args);
        backend(p).launch_kernel(static_cast<std::size_t>(device), handle_from<typename B::kernel_handle>(kernel),
                                 std::move(args), std::move(c));
      }
    });
  }
  static void destroy_kernel(void* p, std::uint64_t kernel) noexcept {
    if constexpr (concepts::RunsSourceKernels<B>)
      backend(p).destroy_kernel(handle_from<typename B::kernel_handle>(kernel));
  }

  // -- pinned host memory (in the table only when `B` has it: `pinned_entry`) --

  static xdev_status allocate_host(void* p, std::uint64_t device, std::uint64_t bytes, void** out,
                                   xdev_error* err) noexcept {
    return guarded(err, [&] {
      if (out == nullptr) throw error(errc::invalid_argument, "the output pointer is null");
      if constexpr (concepts::AllocatesPinned<B>) {
        *out = backend(p).allocate_pinned(static_cast<std::size_t>(device), static_cast<std::size_t>(bytes));
        if (*out == nullptr)
          throw error(errc::out_of_memory, "no pinned host memory of " + std::to_string(bytes) + " bytes");
      }
    });
  }
  static void deallocate_host(void* p, std::uint64_t device, void* memory, std::uint64_t bytes) noexcept {
    if constexpr (concepts::AllocatesPinned<B>)
      backend(p).deallocate_pinned(static_cast<std::size_t>(device), memory, static_cast<std::size_t>(bytes));
  }

  // -- memory and transfers --

  static xdev_status allocate(void* p, std::uint64_t device, std::uint64_t bytes, xdev_memory* out,
                              xdev_error* err) noexcept {
    return guarded(err, [&] {
      if (out == nullptr) throw error(errc::invalid_argument, "the output pointer is null");
      *out = handle_bits(backend(p).allocate(static_cast<std::size_t>(device), static_cast<std::size_t>(bytes)));
    });
  }

  static void deallocate(void* p, std::uint64_t device, xdev_memory m, std::uint64_t bytes) noexcept {
    backend(p).deallocate(static_cast<std::size_t>(device), handle_from<H>(m), static_cast<std::size_t>(bytes));
  }

  static xdev_status copy_to_device(void* p, std::uint64_t device, const void* src, xdev_memory dst,
                                    std::uint64_t dst_offset, std::uint64_t bytes, const xdev_completion* done,
                                    xdev_error* err) noexcept {
    return run_async(err, done, [&](Completion c) {
      backend(p).copy_to_device(static_cast<std::size_t>(device), src, handle_from<H>(dst),
                                static_cast<std::size_t>(dst_offset), static_cast<std::size_t>(bytes), std::move(c));
    });
  }

  static xdev_status copy_to_host(void* p, std::uint64_t device, xdev_memory src, std::uint64_t src_offset, void* dst,
                                  std::uint64_t bytes, const xdev_completion* done, xdev_error* err) noexcept {
    return run_async(err, done, [&](Completion c) {
      backend(p).copy_to_host(static_cast<std::size_t>(device), handle_from<H>(src),
                              static_cast<std::size_t>(src_offset), dst, static_cast<std::size_t>(bytes), std::move(c));
    });
  }

  static xdev_status copy_between(void* p, std::uint64_t src_device, xdev_memory src, std::uint64_t src_offset,
                                  std::uint64_t dst_device, xdev_memory dst, std::uint64_t dst_offset,
                                  std::uint64_t bytes, const xdev_completion* done, xdev_error* err) noexcept {
    return run_async(err, done, [&](Completion c) {
      backend(p).copy_between(static_cast<std::size_t>(src_device), handle_from<H>(src),
                              static_cast<std::size_t>(src_offset), static_cast<std::size_t>(dst_device),
                              handle_from<H>(dst), static_cast<std::size_t>(dst_offset),
                              static_cast<std::size_t>(bytes), std::move(c));
    });
  }

  static xdev_status execute(void* p, std::uint64_t device, const xdev_host_task* task, const xdev_completion* done,
                             xdev_error* err) noexcept {
    return run_async(err, done, [&](Completion c) {
      check_struct_size(deref(task, "xdev_host_task").struct_size, sizeof(xdev_host_task), "xdev_host_task");
      const xdev_host_task t = *task;
      if (t.run == nullptr) throw error(errc::invalid_argument, "xdev_host_task::run is null");
      backend(p).execute(static_cast<std::size_t>(device), HostTask([t] { t.run(t.context); }), std::move(c));
    });
  }

  // -- operations --

  static std::uint64_t op_dtypes(void*, std::uint32_t op) noexcept { return op < XDEV_OP_COUNT ? masks[op] : 0; }

  // The arguments struct, checked: not null, not smaller than this plugin knows.
  template <class C>
  static const C& checked(const C* a, const char* what) {
    const C& c = deref(a, what);
    check_struct_size(c.struct_size, sizeof(C), what);
    return c;
  }

  /// The entry of every op: `C` is its `xdev_*_args` struct (`c_op<C>` its row of the op table).
  template <class C>
  static xdev_status op(void* p, std::uint64_t device, const C* args, const xdev_completion* done,
                        xdev_error* err) noexcept {
    using Row = c_op<C>;
    return run_async(err, done, [&](Completion c) {
      const auto& a = checked(args, Row::c_name);
      Row::check(a);
      Row::template visit<H>(a, [&]<class Args>(std::type_identity<Args>, auto make) {
        if constexpr (ops::has_native_op<B, Args>)
          ops::detail::call_native(backend_for<Args>(p), static_cast<std::size_t>(device), make(), std::move(c));
        else
          throw_not_implemented(Row::name, Row::dtypes(a));
      });
    });
  }
};

// `describe_device` is in the table only when the backend has `device_description`.
template <class B, class Table>
constexpr auto describe_entry() noexcept -> decltype(xdev_plugin_api::describe_device) {
  if constexpr (concepts::DescribesDevices<B>)
    return &Table::describe_device;
  else
    return nullptr;
}

// `device_properties` is in the table only when the backend has that hook.
template <class B, class Table>
constexpr auto properties_entry() noexcept -> decltype(xdev_plugin_api::device_properties) {
  if constexpr (concepts::ReportsDeviceProperties<B>)
    return &Table::device_properties;
  else
    return nullptr;
}

// An optional family's entry is in the table only when the backend has that capability (`Has`:
// native queues, native markers, source kernels, pinned memory); else it is null.
template <bool Has, class Fn>
constexpr Fn entry_when(Fn fn) noexcept {
  if constexpr (Has)
    return fn;
  else
    return nullptr;
}

// XDEV_PLUGIN_HOST_MEMORY when the backend's handles are host addresses: a HostAccessibleBackend
// whose handle is a pointer (its `host_address(h)` is `h`).
template <class B>
constexpr std::uint32_t host_memory_flag() noexcept {
  if constexpr (concepts::HostAccessibleBackend<B> && std::is_pointer_v<typename B::memory_handle>)
    return XDEV_PLUGIN_HOST_MEMORY;
  else
    return 0;
}

// An op entry is in the table only when the backend has that op for at least one dtype.
template <class Table, class Fn>
constexpr Fn entry_if(std::uint32_t op, Fn fn) noexcept {
  return Table::masks[op] != 0 ? fn : nullptr;
}

/// The table of backend `B` with the options `Info::value`: constant-initialized, so the plugin's
/// entry returns it without running any code.
template <class B, class Info>
inline constexpr xdev_plugin_api plugin_api{
    sizeof(xdev_plugin_api),
    XDEV_ABI_MAJOR,
    XDEV_ABI_MINOR,
    PluginTable<B, Info>::name(),
    PluginTable<B, Info>::version(),
    PluginTable<B, Info>::platform(),
    PluginTable<B, Info>::info.flags | host_memory_flag<B>(),
    &PluginTable<B, Info>::initialize,
    &PluginTable<B, Info>::create,
    &PluginTable<B, Info>::destroy,
    &PluginTable<B, Info>::capabilities,
    &PluginTable<B, Info>::device_count,
    &PluginTable<B, Info>::allocate,
    &PluginTable<B, Info>::deallocate,
    &PluginTable<B, Info>::copy_to_device,
    &PluginTable<B, Info>::copy_to_host,
    &PluginTable<B, Info>::copy_between,
    &PluginTable<B, Info>::execute,
    &PluginTable<B, Info>::op_dtypes,
    entry_if<PluginTable<B, Info>>(XDEV_OP_FILL, &PluginTable<B, Info>::template op<xdev_fill_args>),
    entry_if<PluginTable<B, Info>>(XDEV_OP_SCALE, &PluginTable<B, Info>::template op<xdev_scale_args>),
    entry_if<PluginTable<B, Info>>(XDEV_OP_AXPY, &PluginTable<B, Info>::template op<xdev_axpy_args>),
    entry_if<PluginTable<B, Info>>(XDEV_OP_BINARY, &PluginTable<B, Info>::template op<xdev_binary_args>),
    entry_if<PluginTable<B, Info>>(XDEV_OP_SUM, &PluginTable<B, Info>::template op<xdev_sum_args>),
    entry_if<PluginTable<B, Info>>(XDEV_OP_SUM_AXIS, &PluginTable<B, Info>::template op<xdev_sum_axis_args>),
    entry_if<PluginTable<B, Info>>(XDEV_OP_DOT, &PluginTable<B, Info>::template op<xdev_dot_args>),
    entry_if<PluginTable<B, Info>>(XDEV_OP_GEMM, &PluginTable<B, Info>::template op<xdev_gemm_args>),
    entry_if<PluginTable<B, Info>>(XDEV_OP_GATHER, &PluginTable<B, Info>::template op<xdev_gather_args>),
    entry_if<PluginTable<B, Info>>(XDEV_OP_RNG, &PluginTable<B, Info>::template op<xdev_rng_args>),
    entry_if<PluginTable<B, Info>>(XDEV_OP_CONVERT, &PluginTable<B, Info>::template op<xdev_convert_args>),
    describe_entry<B, PluginTable<B, Info>>(),
    entry_if<PluginTable<B, Info>>(XDEV_OP_EXP, &PluginTable<B, Info>::template op<xdev_exp_args>),
    entry_when<concepts::NativeQueues<B>>(&PluginTable<B, Info>::create_queue),
    entry_when<concepts::NativeQueues<B>>(&PluginTable<B, Info>::destroy_queue),
    entry_when<concepts::NativeQueues<B>>(&PluginTable<B, Info>::bind_queue),
    entry_when<concepts::NativeMarkers<B>>(&PluginTable<B, Info>::record_marker),
    entry_when<concepts::NativeMarkers<B>>(&PluginTable<B, Info>::wait_marker),
    entry_when<concepts::NativeMarkers<B>>(&PluginTable<B, Info>::release_marker),
    properties_entry<B, PluginTable<B, Info>>(),
    entry_when<concepts::RunsSourceKernels<B>>(&PluginTable<B, Info>::create_kernel),
    entry_when<concepts::RunsSourceKernels<B>>(&PluginTable<B, Info>::launch_kernel),
    entry_when<concepts::RunsSourceKernels<B>>(&PluginTable<B, Info>::destroy_kernel),
    entry_when<concepts::AllocatesPinned<B>>(&PluginTable<B, Info>::allocate_host),
    entry_when<concepts::AllocatesPinned<B>>(&PluginTable<B, Info>::deallocate_host),
    entry_when<concepts::StridedTransfers<B>>(&StridedEntries<B, Client<B>>::copy_to_host),
    entry_when<concepts::StridedTransfers<B>>(&StridedEntries<B, Client<B>>::copy_to_device),
    entry_when<concepts::StridedCopies<B>>(&StridedEntries<B, Client<B>>::copy_between),
    entry_when<has_op_windows<B>>(&WindowEntries<B, Client<B>>::open),
    entry_when<has_op_windows<B>>(&WindowEntries<B, Client<B>>::close),
};

/// The checks a table must pass at compile time (instantiated by `XDEV_DEFINE_PLUGIN`).
template <class B, class Info>
consteval bool check_plugin() {
  static_assert(is_plugin_name(NameOf<B, Info>::value),
                "XDEV_DEFINE_PLUGIN(B): the plugin's name (B::name, or the `.name` option) must match "
                "[A-Z][A-Z0-9_]*: upper case letters, digits and '_', starting with a letter (\"OPENCL\")");
  return true;
}

}  // namespace detail
}  // namespace xdev::plugin
