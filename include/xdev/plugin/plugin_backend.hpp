/// \file
/// The host side of the plugin boundary: `xdev::plugin::PluginBackend`, a backend
/// (`xdev::concepts::Backend`) whose device type lives in a plugin's `xdev_plugin_api` table, and
/// `xdev::plugin::check_table`, the ABI rules a table must pass before anything else is called.
///
///     boost::dll::shared_library lib(path, boost::dll::load_mode::rtld_now);
///     const xdev_plugin_api* api = lib.get_alias<const xdev_plugin_api*()>(XDEV_PLUGIN_ENTRY_NAME)();
///     xdev::plugin::check_table(api, path.string());
///     xdev::plugin::initialize_plugin(*api);                    // once per process (the loader does both)
///     auto keep = std::make_shared<boost::dll::shared_library>(std::move(lib));
///     xdev::Runtime<xdev::plugin::PluginBackend> ref({}, api, keep);
///     xdev::Device dev = ref.device(0);                       // prints as "REF:0"
///
/// This header does not include Boost.DLL: the library travels as a `std::shared_ptr<void>` that
/// keeps it loaded (whatever loaded it: the loader's `Library`, a `boost::dll::shared_library`).
#pragma once

#include <xdev/plugin/abi.h>
#include <xdev/backend/completion.hpp>
#include <xdev/backend/concepts.hpp>
#include <xdev/backend/detail/strided_copy.hpp>
#include <xdev/backend/device_properties.hpp>
#include <xdev/backend/strided_region.hpp>
#include <xdev/backend/user_kernel.hpp>
#include <xdev/core/dtype.hpp>
#include <xdev/core/error.hpp>
#include <xdev/ops/op_args.hpp>
#include <xdev/plugin/detail/abi_bridge.hpp>
#include <xdev/plugin/detail/call.hpp>
#include <xdev/plugin/detail/kernel_marshal.hpp>
#include <xdev/plugin/detail/op_marshal.hpp>
#include <xdev/plugin/detail/op_table.hpp>
#include <xdev/plugin/detail/optional_entries.hpp>
#include <xdev/plugin/table.hpp>
#include <xdev/policy/capabilities.hpp>
#include <xdev/policy/capability_set.hpp>
#include <xdev/version.hpp>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace xdev::plugin {

/// A backend whose device type is a plugin: every member calls the matching entry of the plugin's
/// `xdev_plugin_api` table, so `xdev::Runtime<PluginBackend>` (and `Device`, `Buffer`, the ops)
/// work on a device type xdev only meets at run time. It names itself by the plugin's name
/// (`runtime_name()`, so devices print as "REF:0"), reports the plugin's capabilities
/// (`runtime_capabilities()`), and runs an op natively only for the dtypes the plugin's
/// `op_dtypes` lists (`implements()`) and for the binary operators its ABI minor knows
/// (`implements_binary()`: a 1.1 plugin never receives min or max); xdev's CPU fallback runs the
/// rest. Each device's description is the plugin's `describe_device` (`device_description()`, ""
/// for a plugin older than ABI 1.3 or without the entry).
///
/// Lifetime: the constructor creates one backend object in the plugin; the destructor destroys it
/// (`destroy`, after the runtime has finished all work and freed all memory) and only then
/// releases `library`, the keep-alive of the shared library the table lives in.
///
/// Errors: a failing entry becomes `xdev::error` with the plugin's code, its message prefixed by
/// the plugin's name and the entry: "REF: copy_to_device: <message>". A null required entry is
/// `errc::unimplemented` naming it. An op that fails in the plugin reaches its future the same way
/// (code and message kept); an exception thrown by a host task that the plugin ran (`execute`)
/// reaches it unchanged, with its type.
///
/// Asynchronous calls: each passes the plugin an `xdev_completion` whose context is freed exactly
/// once. The rule (<xdev/plugin/abi.h>): an entry that returns an error must not have called, and
/// must never call, the completion. A plugin that completes and then returns an error is
/// tolerated (its completion reports; the error is dropped); one that completes after returning
/// an error has undefined behaviour.
class PluginBackend {
 public:
  /// The static name of this backend type; its devices use the plugin's name (`runtime_name()`).
  static constexpr std::string_view name = "PLUGIN";
  /// A placeholder: the plugin's capabilities are known at run time (`runtime_capabilities()`).
  using capabilities = Capabilities<>;
  /// The plugin's `xdev_memory`.
  using memory_handle = std::uint64_t;

  /// Creates a backend object in the plugin whose table is `api`, with `options`. `library` keeps
  /// the shared library loaded while this object lives (it may be null for a table linked into the
  /// program). The table must have passed `check_table` and `initialize` (the loader does both).
  /// \throws xdev::error `errc::incompatible_abi` for a table or capabilities struct older than
  /// this xdev reads ("xdev_capabilities from plugin REF: expected at least 64 bytes, got 32"),
  /// `errc::unimplemented` naming a missing `create`, `capabilities` or `device_count`, and the
  /// plugin's own errors ("REF: create: ...").
  PluginBackend(const xdev_plugin_api* api, std::shared_ptr<void> library, ClientOptions options = {})
      : library_(std::move(library)), api_(api), options_(options) {
    detail::check_table_header(api, "PluginBackend");
    abi_minor_ = api->abi_minor;
    name_ = api->name;
    version_ = api->version != nullptr ? api->version : "";
    platform_ = api->platform != nullptr ? api->platform : "";
    opt_ = detail::OptionalEntries::read(api);
    require(api_->create, "create");
    const xdev_client_options o = detail::to_c(options_);
    call("create", [&](xdev_error* e) { return api_->create(&o, &backend_, e); });
    try {
      read_capabilities();
      require(api_->device_count, "device_count");
      std::uint64_t n = 0;
      call("device_count", [&](xdev_error* e) { return api_->device_count(backend_, &n, e); });
      devices_ = static_cast<std::size_t>(n);
      read_op_dtypes();
    } catch (...) {
      if (api_->destroy != nullptr) api_->destroy(backend_);
      throw;
    }
  }
  PluginBackend(const PluginBackend&) = delete;
  PluginBackend& operator=(const PluginBackend&) = delete;

  /// Destroys the plugin's backend object, once no thread is inside one of its entries any more;
  /// the library is released after it.
  ~PluginBackend() {
    // A plugin may complete an operation inside the entry that started it: the host then goes on,
    // and may drop its last handle, while that thread has yet to return through the plugin's
    // frames. Unloading the library then would return that thread into unmapped code.
    for (int n = active_.load(std::memory_order_acquire); n > entry_depth; n = active_.load(std::memory_order_acquire))
      active_.wait(n, std::memory_order_acquire);
    if (api_->destroy != nullptr) api_->destroy(backend_);
  }

  /// The plugin's name, what its devices are called by ("REF" of "REF:0").
  [[nodiscard]] std::string_view runtime_name() const noexcept { return name_; }
  /// True when the plugin says its memory handles are host addresses (`XDEV_PLUGIN_HOST_MEMORY`,
  /// read from a table of ABI 1.9 or newer; `concepts::RuntimeHostAccess`): xdev then runs user C++
  /// kernels on its devices and shares their arrays through DLPack.
  [[nodiscard]] bool runtime_host_accessible() const noexcept { return opt_.host_memory; }
  /// The host address of memory `h` when `runtime_host_accessible()`, else null.
  [[nodiscard]] void* runtime_host_address(memory_handle h) const noexcept {
    return opt_.host_memory ? reinterpret_cast<void*>(static_cast<std::uintptr_t>(h)) : nullptr;
  }
  /// The capabilities the plugin reported when this backend object was created.
  [[nodiscard]] CapabilitySet runtime_capabilities() const noexcept { return caps_; }
  /// True when the plugin runs `op` natively for element dtype `t` (and `t2`: the index dtype of
  /// gather, the destination of convert, else `t`); false sends the call to xdev's CPU fallback.
  [[nodiscard]] bool implements(ops::OpKind op, DType t, DType t2) const noexcept {
    const auto k = static_cast<std::uint32_t>(op);
    if (k >= XDEV_OP_COUNT) return false;
    const unsigned bit = op == ops::OpKind::gather || op == ops::OpKind::convert
                             ? static_cast<unsigned>(t) * XDEV_DTYPE_COUNT + static_cast<unsigned>(t2)
                             : static_cast<unsigned>(t);
    return bit < 64 && ((op_masks_[k] >> bit) & 1U) != 0;
  }
  /// True when the plugin's `binary` entry may be given operator `op`: `add` and `mul` always,
  /// `min` and `max` only when the table reports ABI 1.2 or newer (a 1.1 plugin predates them and
  /// could not tell their codes apart). False sends the call to xdev's CPU fallback
  /// (`concepts::DeclaresBinaryOps`); whether the entry exists, and for which dtypes, is
  /// `implements`'s to say.
  [[nodiscard]] bool implements_binary(ops::BinaryOp op) const noexcept {
    switch (op) {
      case ops::BinaryOp::add:
      case ops::BinaryOp::mul:
        return true;
      case ops::BinaryOp::min:
      case ops::BinaryOp::max:
        return abi_minor_ >= binary_min_max_minor;
    }
    return false;
  }
  /// The ABI minor the plugin's table reports (at least XDEV_ABI_MIN_MINOR; may be newer than
  /// XDEV_ABI_MINOR).
  [[nodiscard]] std::uint32_t abi_minor() const noexcept { return abi_minor_; }
  /// The plugin's dtype mask for `op` as `op_dtypes` gave it (0 when the entry is null; every bit
  /// when the plugin has no `op_dtypes`).
  [[nodiscard]] std::uint64_t op_dtypes(ops::OpKind op) const noexcept {
    const auto k = static_cast<std::uint32_t>(op);
    return k < XDEV_OP_COUNT ? op_masks_[k] : 0;
  }

  /// The plugin's own version and platform strings ("" when it gives none).
  [[nodiscard]] std::string_view version() const noexcept { return version_; }
  [[nodiscard]] std::string_view platform() const noexcept { return platform_; }
  /// What device `device` is, in the plugin's words (its `describe_device` entry, ABI 1.3): "" when
  /// the plugin gives none (a 1.1 or 1.2 table, a null entry, a null or empty text). The plugin is
  /// asked on every call (`concepts::DescribesDevices`: `AnyDevice::description()` and xdev-info
  /// show it).
  /// \throws xdev::error `errc::invalid_argument` for a device out of range, and the plugin's error
  /// with its code: "REF: describe_device: <message>".
  [[nodiscard]] std::string device_description(std::size_t device) const {
    if (device >= devices_)
      throw error(errc::invalid_argument, name_ + ": describe_device: device " + std::to_string(device) +
                                              " is out of range [0, " + std::to_string(devices_) + ")");
    if (opt_.describe_device == nullptr) return {};
    const char* text = nullptr;
    call("describe_device", [&](xdev_error* e) { return opt_.describe_device(backend_, device, &text, e); });
    return text != nullptr ? std::string(text) : std::string();
  }
  /// What device `device` is as typed fields, in the plugin's words (its `device_properties` entry,
  /// ABI 1.8; `type` since 1.13): every field unknown when the plugin gives none (an older table, a
  /// null entry, a type code this xdev does not know). Asked on every call.
  /// \throws xdev::error `errc::invalid_argument` for a device out of range, and the plugin's error
  /// with its code: "REF: device_properties: <message>".
  [[nodiscard]] DeviceProperties device_properties(std::size_t device) const {
    if (device >= devices_)
      throw error(errc::invalid_argument, name_ + ": device_properties: device " + std::to_string(device) +
                                              " is out of range [0, " + std::to_string(devices_) + ")");
    DeviceProperties p;
    if (opt_.device_properties == nullptr) return p;
    xdev_device_properties c{};
    c.struct_size = sizeof c;
    c.memory_free = UINT64_MAX;
    call("device_properties", [&](xdev_error* e) { return opt_.device_properties(backend_, device, &c, e); });
    const auto text = [](const char* s) { return s != nullptr ? std::string(s) : std::string(); };
    p.name = text(c.name);
    p.vendor = text(c.vendor);
    p.driver_version = text(c.driver_version);
    p.architecture = text(c.architecture);
    p.compute_units = static_cast<std::size_t>(c.compute_units);
    p.max_work_group_size = static_cast<std::size_t>(c.max_work_group_size);
    p.memory_total = static_cast<std::size_t>(c.memory_total);
    if (c.memory_free != UINT64_MAX) p.memory_free = static_cast<std::size_t>(c.memory_free);
    if (c.device_type <= static_cast<std::uint32_t>(DeviceType::accelerator))  // a newer code: unknown
      p.type = static_cast<DeviceType>(c.device_type);
    return p;
  }
  /// The options this backend object was created with.
  [[nodiscard]] const ClientOptions& options() const noexcept { return options_; }
  /// The plugin's table.
  [[nodiscard]] const xdev_plugin_api& api() const noexcept { return *api_; }
  /// The keep-alive of the plugin's library.
  [[nodiscard]] const std::shared_ptr<void>& library() const noexcept { return library_; }
  /// The plugin's backend object (what `create` returned), for calling the table directly.
  [[nodiscard]] void* native_handle() const noexcept { return backend_; }

  // ---- native queues (concepts::NativeQueues; ABI 1.5) --------------------------------------

  using queue_handle = std::uint64_t;
  /// Whether the plugin has native in-order queues (all three entries of ABI 1.5). Without them,
  /// xdev orders each stream's work on the host.
  [[nodiscard]] bool native_queues() const noexcept { return opt_.create_queue != nullptr; }
  /// A new queue on `device` from the plugin's `create_queue`.
  /// 	hrows xdev::error the plugin's error ("REF: create_queue: ...").
  queue_handle create_queue(std::size_t device) {
    if (opt_.create_queue == nullptr) throw error(errc::unimplemented, name_ + ": the plugin has no native queues");
    std::uint64_t q = 0;
    call("create_queue", [&](xdev_error* e) { return opt_.create_queue(backend_, device, &q, e); });
    if (q == 0) throw error(errc::internal, name_ + ": create_queue returned the null queue");
    return q;
  }
  void destroy_queue(std::size_t device, queue_handle q) noexcept {
    if (opt_.destroy_queue != nullptr) opt_.destroy_queue(backend_, device, q);
  }
  void bind_queue(std::size_t device, queue_handle q) noexcept {
    if (opt_.bind_queue != nullptr) opt_.bind_queue(backend_, device, q);
  }
  void unbind_queue(std::size_t device) noexcept {
    if (opt_.bind_queue != nullptr) opt_.bind_queue(backend_, device, 0);
  }

  // ---- native markers (concepts::NativeMarkers; ABI 1.6) --------------------------------------

  using marker_handle = std::uint64_t;
  /// Whether the plugin has native markers (all three entries of ABI 1.6, with its queues).
  /// Without them, a stream waiting for another stream's event is held on the host.
  [[nodiscard]] bool native_markers() const noexcept { return opt_.record_marker != nullptr; }
  /// A marker on the bound queue of `device`; `done` once the work before it there has completed.
  /// \throws xdev::error the plugin's error ("OPENCL: record_marker: ...").
  marker_handle record_marker(std::size_t device, Completion done) {
    if (opt_.record_marker == nullptr) throw error(errc::unimplemented, name_ + ": the plugin has no native markers");
    std::uint64_t m = 0;
    start("record_marker", std::move(done), nullptr,
          [&](const xdev_completion* c, const xdev_host_task*, xdev_error* e) {
            return opt_.record_marker(backend_, device, c, &m, e);
          });
    return m;
  }
  /// Later work on the bound queue of `device` waits for `m`.
  void wait_marker(std::size_t device, marker_handle m) {
    if (opt_.wait_marker == nullptr) throw error(errc::unimplemented, name_ + ": the plugin has no native markers");
    call("wait_marker", [&](xdev_error* e) { return opt_.wait_marker(backend_, device, m, e); });
  }
  void release_marker(std::size_t device, marker_handle m) noexcept {
    if (opt_.release_marker != nullptr) opt_.release_marker(backend_, device, m);
  }

  // ---- user kernels given as source (ABI 1.9; concepts::RunsSourceKernels) ----------------------

  using kernel_handle = std::uint64_t;
  /// Kernel arguments may be windows (views): passed on to a plugin of ABI 1.10 or later, refused
  /// for an older one by `launch_kernel`.
  static constexpr bool kernel_arg_offsets = true;
  /// Whether the plugin runs kernels given as source (all three entries of ABI 1.9).
  [[nodiscard]] bool runs_source_kernels() const noexcept { return opt_.create_kernel != nullptr; }
  /// The plugin's kernel object for `s` (`create_kernel`).
  /// \throws xdev::error `errc::unimplemented` when the plugin runs no source kernels; the
  /// plugin's error ("OPENCL: create_kernel: ...", a language it does not compile).
  kernel_handle create_kernel(const KernelSource& s) {
    if (opt_.create_kernel == nullptr)
      throw error(errc::unimplemented, name_ + ": the plugin does not run kernels given as source (asked for " +
                                           s.language + " kernel \"" + s.entry + "\")");
    std::vector<xdev_kernel_param> params;
    const xdev_kernel_source c = detail::to_c(s, params);
    std::uint64_t k = 0;
    call("create_kernel", [&](xdev_error* e) { return opt_.create_kernel(backend_, &c, &k, e); });
    if (k == 0) throw error(errc::internal, name_ + ": create_kernel: the plugin returned no handle");
    return k;
  }
  /// Runs kernel `k` on `device` (`launch_kernel`); a failure the plugin reports later reaches `done`.
  /// \throws xdev::error the plugin's error when the entry fails at once (a build log, a parameter
  /// list that disagrees with the source).
  /// \throws xdev::error `errc::unimplemented` for an argument that is a window (a view) when the
  /// plugin predates ABI 1.10, whose kernels take whole arrays only.
  void launch_kernel(std::size_t device, kernel_handle k, KernelLaunchArgs<memory_handle> a, Completion done) {
    require(opt_.launch_kernel, "launch_kernel");
    if (const std::size_t w = xdev::detail::first_window(a.args);
        w != a.args.size() && abi_minor_ < kernel_offsets_minor)
      throw error(errc::unimplemented, name_ + ": kernel argument " + std::to_string(w) + " is a window (at byte " +
                                           std::to_string(a.args[w].offset) + " of its array), but this plugin (ABI " +
                                           std::to_string(XDEV_ABI_MAJOR) + "." + std::to_string(abi_minor_) +
                                           ") takes whole arrays only; kernels on views need ABI 1." +
                                           std::to_string(kernel_offsets_minor) + " (pass the offset as a scalar)");
    std::vector<xdev_kernel_arg> args;
    std::vector<std::uint64_t> offsets;
    const xdev_kernel_launch l = detail::to_c(a, args, offsets);
    start("launch_kernel", std::move(done), nullptr,
          [&](const xdev_completion* c, const xdev_host_task*, xdev_error* e) {
            return opt_.launch_kernel(backend_, device, k, &l, c, e);
          });
  }
  void destroy_kernel(kernel_handle k) noexcept {
    if (opt_.destroy_kernel != nullptr) opt_.destroy_kernel(backend_, k);
  }

  // ---- pinned host memory (ABI 1.9; concepts::AllocatesPinned) ---------------------------------

  /// Whether the plugin gives pinned host memory (both entries of ABI 1.9).
  [[nodiscard]] bool allocates_pinned() const noexcept { return opt_.allocate_host != nullptr; }
  /// The plugin's pinned memory (`allocate_host`), or null when it has none (xdev then uses
  /// ordinary host memory). \throws xdev::error the plugin's error ("OPENCL: allocate_host: ...").
  void* allocate_pinned(std::size_t device, std::size_t bytes) {
    if (opt_.allocate_host == nullptr) return nullptr;
    void* p = nullptr;
    call("allocate_host", [&](xdev_error* e) { return opt_.allocate_host(backend_, device, bytes, &p, e); });
    if (p == nullptr) throw error(errc::internal, name_ + ": allocate_host: the plugin returned no memory");
    return p;
  }
  void deallocate_pinned(std::size_t device, void* p, std::size_t bytes) noexcept {
    if (opt_.deallocate_host != nullptr) opt_.deallocate_host(backend_, device, p, bytes);
  }

  // ---- the Backend concept -------------------------------------------------------------------

  /// How many devices the plugin reported when this backend object was created.
  [[nodiscard]] std::size_t device_count() const noexcept { return devices_; }

  /// Device memory from the plugin's `allocate`.
  /// \throws xdev::error the plugin's error, e.g. `errc::out_of_memory` "REF: allocate: ...".
  memory_handle allocate(std::size_t device, std::size_t bytes) {
    require(api_->allocate, "allocate");
    xdev_memory m = 0;
    call("allocate", [&](xdev_error* e) { return api_->allocate(backend_, device, bytes, &m, e); });
    return m;
  }
  /// Returns memory to the plugin's `deallocate`.
  void deallocate(std::size_t device, memory_handle h, std::size_t bytes) noexcept {
    const InEntry in(*this);
    if (api_->deallocate != nullptr) api_->deallocate(backend_, device, h, bytes);
  }

  /// Host→device, device→host and device→device transfers through the plugin's entries.
  /// \throws xdev::error `errc::unimplemented` naming a null entry, or the plugin's error when the
  /// entry fails at once; a failure reported later reaches `done`.
  void copy_to_device(std::size_t device, const void* src, memory_handle dst, std::size_t dst_offset, std::size_t bytes,
                      Completion done) {
    require(api_->copy_to_device, "copy_to_device");
    start("copy_to_device", std::move(done), nullptr,
          [&](const xdev_completion* c, const xdev_host_task*, xdev_error* e) {
            return api_->copy_to_device(backend_, device, src, dst, dst_offset, bytes, c, e);
          });
  }
  void copy_to_host(std::size_t device, memory_handle src, std::size_t src_offset, void* dst, std::size_t bytes,
                    Completion done) {
    require(api_->copy_to_host, "copy_to_host");
    start("copy_to_host", std::move(done), nullptr,
          [&](const xdev_completion* c, const xdev_host_task*, xdev_error* e) {
            return api_->copy_to_host(backend_, device, src, src_offset, dst, bytes, c, e);
          });
  }
  void copy_between(std::size_t src_device, memory_handle src, std::size_t src_offset, std::size_t dst_device,
                    memory_handle dst, std::size_t dst_offset, std::size_t bytes, Completion done) {
    require(api_->copy_between, "copy_between");
    start("copy_between", std::move(done), nullptr,
          [&](const xdev_completion* c, const xdev_host_task*, xdev_error* e) {
            return api_->copy_between(backend_, src_device, src, src_offset, dst_device, dst, dst_offset, bytes, c, e);
          });
  }
  /// A strided window's transfers (`concepts::StridedTransfers`): one call of the plugin's
  /// `copy_to_host_strided` / `copy_to_device_strided` (ABI 1.11) when it has both, else one
  /// `copy_to_host` / `copy_to_device` per row.
  void copy_to_host_strided(std::size_t device, memory_handle src, const StridedRegion& r, void* dst, Completion done) {
    if (opt_.copy_to_host_strided == nullptr)
      return xdev::detail::copy_rows_to_host(*this, device, src, r, static_cast<std::byte*>(dst), std::move(done));
    const xdev_strided_region region = detail::to_c(r);
    start("copy_to_host_strided", std::move(done), nullptr,
          [&](const xdev_completion* c, const xdev_host_task*, xdev_error* e) {
            return opt_.copy_to_host_strided(backend_, device, src, &region, dst, c, e);
          });
  }
  void copy_to_device_strided(std::size_t device, const void* src, memory_handle dst, const StridedRegion& r,
                              Completion done) {
    if (opt_.copy_to_device_strided == nullptr)
      return xdev::detail::copy_rows_to_device(*this, device, static_cast<const std::byte*>(src), dst, r,
                                               std::move(done));
    const xdev_strided_region region = detail::to_c(r);
    start("copy_to_device_strided", std::move(done), nullptr,
          [&](const xdev_completion* c, const xdev_host_task*, xdev_error* e) {
            return opt_.copy_to_device_strided(backend_, device, src, dst, &region, c, e);
          });
  }
  /// A copy between strided windows (`concepts::StridedCopies`): one call of the plugin's
  /// `copy_between_strided` (ABI 1.11) when it has it, else one `copy_between` per row.
  void copy_between_strided(std::size_t sd, memory_handle src, const StridedRegion& sr, std::size_t dd,
                            memory_handle dst, const StridedRegion& dr, Completion done) {
    if (opt_.copy_between_strided == nullptr)
      return xdev::detail::copy_rows_between(*this, sd, src, sr, dd, dst, dr, std::move(done));
    const xdev_strided_region from = detail::to_c(sr), to = detail::to_c(dr);
    start("copy_between_strided", std::move(done), nullptr,
          [&](const xdev_completion* c, const xdev_host_task*, xdev_error* e) {
            return opt_.copy_between_strided(backend_, sd, src, &from, dd, dst, &to, c, e);
          });
  }
  /// A window for an op (`concepts::OpensWindows`): the plugin's `open_window` (ABI 1.12), or
  /// nullopt when it has no such entry or no window at that offset (the op then runs through the
  /// CPU fallback). \throws xdev::error the plugin's error when the entry fails.
  std::optional<memory_handle> open_window(std::size_t device, memory_handle h, std::size_t bytes) {
    if (opt_.open_window == nullptr) return std::nullopt;
    xdev_memory w = 0;
    call("open_window", [&](xdev_error* e) { return opt_.open_window(backend_, device, h, bytes, &w, e); });
    if (w == 0) return std::nullopt;
    return w;
  }
  void close_window(std::size_t device, memory_handle w) noexcept {
    const InEntry in(*this);
    opt_.close_window(backend_, device, w);
  }
  /// Runs `task` in device order through the plugin; an exception `task` throws reaches `done`
  /// unchanged (it never crosses into the plugin).
  void execute(std::size_t device, HostTask task, Completion done) {
    require(api_->execute, "execute");
    start("execute", std::move(done), std::move(task),
          [&](const xdev_completion* c, const xdev_host_task* t, xdev_error* e) {
            return api_->execute(backend_, device, t, c, e);
          });
  }

  // ---- the portable operations (see op_args.hpp); `implements` says which dtypes run here -----

  /// Every op: converts its `ops::*Args` into the C struct (scalars as their bits) and calls the
  /// plugin's entry for it (`c_op<C>`, the op table of <xdev/plugin/detail/op_table.hpp>). xdev
  /// calls it only when `implements` accepts the op's dtypes (`ops::has_native_op` sees this
  /// member for every op with a C twin). `binary` with `min` or `max` runs only when
  /// `implements_binary` accepts them; called directly with an operator the plugin's ABI minor
  /// predates, it throws `errc::unimplemented` (`errc::invalid_argument` for a value that is no
  /// `BinaryOp`) rather than pass a code the plugin cannot know.
  /// \throws xdev::error `errc::unimplemented` when the plugin has no such entry (or its table's
  /// ABI minor predates it), or the plugin's error when the entry fails at once; a failure
  /// reported later reaches `done`.
  template <class Args>
  requires requires(const Args& a) { detail::to_c(a); }
  void run_op(std::size_t device, const Args& a, Completion done) {
    using Row = detail::c_op<detail::c_args_of<Args>>;
    if constexpr (Row::code == XDEV_OP_BINARY) {
      if (!implements_binary(a.op)) throw binary_refused(a.op);
    }
    const auto c = detail::to_c(a);
    auto* fn = entry<Row>();
    require(fn, Row::name);
    start(Row::name, std::move(done), nullptr, [&](const xdev_completion* d, const xdev_host_task*, xdev_error* e) {
      return fn(backend_, device, &c, d, e);
    });
  }

 private:
  void read_capabilities() {
    require(api_->capabilities, "capabilities");
    const xdev_capabilities* c = nullptr;
    call("capabilities", [&](xdev_error* e) { return api_->capabilities(backend_, &c, e); });
    if (c == nullptr) throw error(errc::internal, name_ + ": capabilities: the plugin returned none (null)");
    detail::check_struct_size(c->struct_size, sizeof(xdev_capabilities),
                              ("xdev_capabilities from plugin " + name_).c_str());
    caps_ = detail::from_c(*c, name_);
  }

  // The table's entry of op row `Row`, or null when it has none or its ABI minor predates it
  // (never read past the table's `struct_size`).
  template <class Row>
  [[nodiscard]] auto entry() const noexcept
      -> std::remove_cvref_t<decltype(std::declval<const xdev_plugin_api&>().*Row::entry)> {
    return detail::table_has(api_, Row::minor, Row::entry_end) ? api_->*Row::entry : nullptr;
  }

  void read_op_dtypes() {
    detail::each_c_op([&]<class Row>(std::type_identity<Row>) {
      if (entry<Row>() == nullptr)
        op_masks_[Row::code] = 0;
      else
        op_masks_[Row::code] = api_->op_dtypes != nullptr ? api_->op_dtypes(backend_, Row::code) : ~std::uint64_t{0};
    });
  }

  // Why `binary` refuses `op` (see `implements_binary`).
  [[nodiscard]] error binary_refused(ops::BinaryOp op) const {
    if (op != ops::BinaryOp::min && op != ops::BinaryOp::max)
      return error(errc::invalid_argument,
                   name_ + ": binary: unknown BinaryOp value " + std::to_string(static_cast<int>(op)));
    const std::string major = std::to_string(XDEV_ABI_MAJOR) + ".";
    return error(errc::unimplemented, name_ + ": binary: operator " + ops::name_of(op) + " needs plugin ABI " + major +
                                          std::to_string(binary_min_max_minor) + ", the plugin reports " + major +
                                          std::to_string(abi_minor_));
  }

  // \throws xdev::error `errc::unimplemented` naming `entry` when the plugin leaves it null.
  template <class Fn>
  void require(Fn* fn, const char* entry) const {
    if (fn == nullptr)
      throw error(errc::unimplemented, name_ + ": " + entry + ": the plugin does not provide this entry");
  }

  [[nodiscard]] error failure(const char* entry, xdev_status s, const detail::ErrorSink& sink) const {
    return error(detail::errc_of(s), name_ + ": " + entry + ": " + detail::status_text(s, sink.text()));
  }

  // A synchronous entry: `f(err)` returns its status.
  // Marks the calling thread as inside one of the plugin's entries (see the destructor).
  class InEntry {
   public:
    explicit InEntry(const PluginBackend& b) noexcept : b_(b) {
      b_.active_.fetch_add(1, std::memory_order_acq_rel);
      ++entry_depth;
    }
    ~InEntry() {
      --entry_depth;
      if (b_.active_.fetch_sub(1, std::memory_order_acq_rel) == 1) b_.active_.notify_all();
    }
    InEntry(const InEntry&) = delete;
    InEntry& operator=(const InEntry&) = delete;

   private:
    const PluginBackend& b_;
  };
  // How many plugin entries the current thread is inside (of any plugin): a backend destroyed from
  // inside an entry (its completion dropped the last handle) waits only for the other threads.
  static inline thread_local int entry_depth = 0;

  template <class F>
  void call(const char* entry, F&& f) const {
    const InEntry in(*this);
    detail::ErrorSink sink;
    const xdev_status s = std::forward<F>(f)(&sink.c);
    if (s != XDEV_OK) throw failure(entry, s, sink);
  }

  // An asynchronous entry: `f(completion, host_task, err)` returns its status; `done` is called exactly once
  // through the completion, or (when the entry returns an error) not at all and this throws.

  template <class F>
  void start(const char* entry, Completion done, HostTask task, F&& f) {
    auto* ctx = new detail::AsyncCall(std::move(done), name_, entry);
    const xdev_completion completion = ctx->completion();
    xdev_host_task host_task{};
    if (task) {
      ctx->set_task(std::move(task));
      host_task = ctx->host_task();
    }
    detail::ErrorSink sink;
    const InEntry in(*this);
    const xdev_status s = std::forward<F>(f)(&completion, &host_task, &sink.c);
    if (s == XDEV_OK) return ctx->returned_ok();
    if (ctx->returned_error()) throw failure(entry, s, sink);
  }

  std::shared_ptr<void> library_;  // first member: released last, after `destroy`
  const xdev_plugin_api* api_;
  ClientOptions options_;
  std::string name_;
  std::string version_;
  std::string platform_;
  // The optional entries the table has, by ABI minor (<xdev/plugin/detail/optional_entries.hpp>).
  detail::OptionalEntries opt_{};
  void* backend_ = nullptr;
  std::uint32_t abi_minor_ = 0;
  CapabilitySet caps_{};
  std::size_t devices_ = 0;
  std::array<std::uint64_t, XDEV_OP_COUNT> op_masks_{};
  mutable std::atomic<int> active_{0};  // threads inside an entry (InEntry)
};

}  // namespace xdev::plugin
