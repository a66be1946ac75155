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
#include <xdev/core/dtype.hpp>
#include <xdev/core/error.hpp>
#include <xdev/ops/op_args.hpp>
#include <xdev/plugin/detail/abi_bridge.hpp>
#include <xdev/plugin/detail/op_marshal.hpp>
#include <xdev/plugin/detail/op_table.hpp>
#include <xdev/policy/capabilities.hpp>
#include <xdev/policy/capability_set.hpp>
#include <xdev/version.hpp>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

namespace xdev::plugin {

// The C enumerations of <xdev/plugin/abi.h> are the values of the C++ ones.
static_assert(static_cast<std::uint32_t>(ops::OpKind::fill) == XDEV_OP_FILL &&
                  static_cast<std::uint32_t>(ops::OpKind::scale) == XDEV_OP_SCALE &&
                  static_cast<std::uint32_t>(ops::OpKind::axpy) == XDEV_OP_AXPY &&
                  static_cast<std::uint32_t>(ops::OpKind::binary) == XDEV_OP_BINARY &&
                  static_cast<std::uint32_t>(ops::OpKind::sum) == XDEV_OP_SUM &&
                  static_cast<std::uint32_t>(ops::OpKind::sum_axis) == XDEV_OP_SUM_AXIS &&
                  static_cast<std::uint32_t>(ops::OpKind::dot) == XDEV_OP_DOT &&
                  static_cast<std::uint32_t>(ops::OpKind::gemm) == XDEV_OP_GEMM &&
                  static_cast<std::uint32_t>(ops::OpKind::gather) == XDEV_OP_GATHER &&
                  static_cast<std::uint32_t>(ops::OpKind::rng) == XDEV_OP_RNG &&
                  static_cast<std::uint32_t>(ops::OpKind::convert) == XDEV_OP_CONVERT,
              "xdev::ops::OpKind and the XDEV_OP_* values of <xdev/plugin/abi.h> disagree");
static_assert(static_cast<int>(DType::bool_) == XDEV_DTYPE_BOOL && static_cast<int>(DType::u8) == XDEV_DTYPE_U8 &&
                  static_cast<int>(DType::i32) == XDEV_DTYPE_I32 && static_cast<int>(DType::i64) == XDEV_DTYPE_I64 &&
                  static_cast<int>(DType::f16) == XDEV_DTYPE_F16 && static_cast<int>(DType::bf16) == XDEV_DTYPE_BF16 &&
                  static_cast<int>(DType::f32) == XDEV_DTYPE_F32 && static_cast<int>(DType::f64) == XDEV_DTYPE_F64,
              "xdev::DType and the XDEV_DTYPE_* values of <xdev/plugin/abi.h> disagree");
static_assert(static_cast<int>(ops::BinaryOp::add) == XDEV_BINARY_ADD &&
                  static_cast<int>(ops::BinaryOp::mul) == XDEV_BINARY_MUL &&
                  static_cast<int>(ops::BinaryOp::min) == XDEV_BINARY_MIN &&
                  static_cast<int>(ops::BinaryOp::max) == XDEV_BINARY_MAX,
              "xdev::ops::BinaryOp and XDEV_BINARY_* disagree");
static_assert(detail::binary_code(ops::BinaryOp::min) == XDEV_BINARY_MIN &&
                  detail::binary_code(ops::BinaryOp::max) == XDEV_BINARY_MAX,
              "detail::binary_code and XDEV_BINARY_* disagree");

/// The ABI minor that added the binary operators `min` and `max` (`XDEV_BINARY_MIN`, `_MAX`).
inline constexpr std::uint32_t binary_min_max_minor = 2;
static_assert(binary_min_max_minor <= XDEV_ABI_MINOR, "this <xdev/plugin/abi.h> predates binary min/max");

/// The ABI minor that appended `describe_device` to the table (`PluginBackend::device_description`).
inline constexpr std::uint32_t describe_device_minor = 3;
static_assert(describe_device_minor <= XDEV_ABI_MINOR, "this <xdev/plugin/abi.h> predates describe_device");

/// The ABI minor that added the operation `exp` (`XDEV_OP_EXP`, the table's last entry).
inline constexpr std::uint32_t exp_minor = 4;
static_assert(exp_minor <= XDEV_ABI_MINOR, "this <xdev/plugin/abi.h> predates exp");

namespace detail {

/// The size of a table of ABI 1.3: everything before `exp`, which 1.4 appended.
inline constexpr std::size_t table_size_v1_3 = offsetof(xdev_plugin_api, exp);

/// The size of a table of ABI 1.1 and 1.2 (1.2 changed no layout): everything before
/// `describe_device`, which 1.3 appended. The smallest table `check_table` accepts.
inline constexpr std::size_t table_size_v1_1 = offsetof(xdev_plugin_api, describe_device);

/// True when `api` is a table of ABI `minor` or newer that is large enough to hold the field ending
/// at `end` (`offsetof(field) + sizeof(field)`): only then may that field be read. (A pointer, not
/// a reference: the table may be smaller than `xdev_plugin_api`, and a reference would let the
/// compiler assume all of it readable.)
inline bool table_has(const xdev_plugin_api* api, std::uint32_t minor, std::size_t end) noexcept {
  return api->abi_minor >= minor && api->struct_size >= end;
}

// Where the plugin reports a failing call's message (copied during `set`).
struct ErrorSink {
  ErrorSink() noexcept : c{sizeof(xdev_error), this, &ErrorSink::set} {}
  ErrorSink(const ErrorSink&) = delete;
  ErrorSink& operator=(const ErrorSink&) = delete;

  static void set(void* context, xdev_status code, const char* message) noexcept {
    auto* self = static_cast<ErrorSink*>(context);
    if (self->was_set) return;  // the first message describes the failure
    self->was_set = true;
    self->code = code;
    try {
      self->message = message != nullptr ? message : "";
    } catch (...) {  // out of memory: the status alone reports the failure
      self->message.clear();
    }
  }

  [[nodiscard]] const char* text() const noexcept { return was_set ? message.c_str() : nullptr; }

  xdev_error c;
  xdev_status code = XDEV_OK;
  std::string message;
  bool was_set = false;
};

/// The version string xdev passes to plugins in `xdev_host_info` ("0.1.0").
inline const char* host_version() noexcept {
  static const std::string v = std::to_string(XDEV_VERSION_MAJOR) + "." + std::to_string(XDEV_VERSION_MINOR) + "." +
                               std::to_string(XDEV_VERSION_PATCH);
  return v.c_str();
}

// The host-side context of one asynchronous plugin call, freed exactly once. Two references: the
// call's and the completion's. The completion drops its reference when the plugin calls it; the
// call drops its own when the entry returns, and the completion's too when the entry returns an
// error and the plugin (as the rules say) never called it. `claimed` decides who delivers `done`,
// so a plugin that completes and then returns an error neither double-frees nor double-reports.
class AsyncCall {
 public:
  AsyncCall(Completion done, std::string where) noexcept : done_(std::move(done)), where_(std::move(where)) {}
  AsyncCall(const AsyncCall&) = delete;
  AsyncCall& operator=(const AsyncCall&) = delete;

  /// Makes this an `execute`: `task` runs through `host_task()`.
  void set_task(HostTask task) noexcept {
    task_ = std::move(task);
    has_task_ = true;
  }

  [[nodiscard]] xdev_completion completion() noexcept {
    return {sizeof(xdev_completion), this, &AsyncCall::on_complete};
  }
  [[nodiscard]] xdev_host_task host_task() noexcept { return {sizeof(xdev_host_task), this, &AsyncCall::on_run}; }

  /// The entry returned XDEV_OK: the completion delivers (or has delivered) the result.
  void returned_ok() noexcept { release(); }

  /// The entry returned an error. True when the caller reports it (the plugin did not complete;
  /// the context is freed and `done` destroyed uncalled); false when the plugin had completed
  /// before returning the error (breaking the rules): that completion has reported.
  bool returned_error() noexcept {
    if (claimed_.exchange(true, std::memory_order_acq_rel)) {
      release();
      return false;
    }
    Completion unused = std::move(done_);
    release();
    release();
    return true;
  }

 private:
  static void on_complete(void* context, xdev_status code, const char* message) noexcept {
    auto* self = static_cast<AsyncCall*>(context);
    if (self->claimed_.exchange(true, std::memory_order_acq_rel)) return self->release();
    Completion done = std::move(self->done_);
    std::exception_ptr ep = self->outcome(code, message);
    self->release();
    // xdev's completions do not throw (their handlers' errors are kept on the device); nothing
    // may unwind into the plugin.
    try {
      done(std::move(ep));
    } catch (...) {
    }
  }

  static void on_run(void* context) noexcept {
    auto* self = static_cast<AsyncCall*>(context);
    try {
      HostTask task = std::move(self->task_);
      if (task) task();
    } catch (...) {
      self->task_error_ = std::current_exception();  // reaches the completion with its type
    }
    self->ran_.store(true, std::memory_order_release);
  }

  std::exception_ptr outcome(xdev_status code, const char* message) noexcept {
    try {
      if (task_error_) return task_error_;
      if (code != XDEV_OK)
        return std::make_exception_ptr(error(errc_of(code), where_ + ": " + status_text(code, message)));
      if (has_task_ && !ran_.load(std::memory_order_acquire))
        return std::make_exception_ptr(
            error(errc::internal, where_ + ": the plugin reported success without running the host task"));
      return nullptr;
    } catch (...) {
      return std::current_exception();
    }
  }

  void release() noexcept {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  std::atomic<int> refs_{2};
  std::atomic<bool> claimed_{false};
  Completion done_;
  std::string where_;
  HostTask task_;
  std::exception_ptr task_error_;
  bool has_task_ = false;
  std::atomic<bool> ran_{false};
};

/// The checks every table must pass before any of its fields beyond the versions is read: a table,
/// the same major, a supported minor, at least the v1.1 size (`table_size_v1_1`: a 1.1 or 1.2 table
/// ends before the fields 1.3 appended), and a valid name.
inline void check_table_header(const xdev_plugin_api* api, std::string_view where) {
  const std::string at = std::string(where) + ": ";
  if (api == nullptr) throw error(errc::incompatible_abi, at + "the plugin's entry returned no table (null)");
  constexpr std::size_t versions_end = offsetof(xdev_plugin_api, abi_minor) + sizeof(std::uint32_t);
  if (api->struct_size < versions_end)
    throw error(errc::incompatible_abi, at + "xdev_plugin_api: expected at least " + std::to_string(table_size_v1_1) +
                                            " bytes, got " + std::to_string(api->struct_size));
  const std::string version = std::to_string(api->abi_major) + "." + std::to_string(api->abi_minor);
  const std::string supported = "this xdev accepts ABI " + std::to_string(XDEV_ABI_MAJOR) + "." +
                                std::to_string(XDEV_ABI_MIN_MINOR) + " and newer minors of major " +
                                std::to_string(XDEV_ABI_MAJOR);
  if (api->abi_major != XDEV_ABI_MAJOR)
    throw error(errc::incompatible_abi, at + "the plugin was built for ABI major " + std::to_string(api->abi_major) +
                                            " (ABI " + version + "), " + supported);
  if (api->abi_minor < XDEV_ABI_MIN_MINOR)
    throw error(errc::incompatible_abi, at + "the plugin was built for ABI " + version + ", older than " +
                                            std::to_string(XDEV_ABI_MAJOR) + "." + std::to_string(XDEV_ABI_MIN_MINOR) +
                                            "; " + supported);
  if (api->struct_size < table_size_v1_1)
    throw error(errc::incompatible_abi, at + "xdev_plugin_api of ABI " + version + ": expected at least " +
                                            std::to_string(table_size_v1_1) + " bytes, got " +
                                            std::to_string(api->struct_size));
  if (api->name == nullptr) throw error(errc::invalid_argument, at + "the plugin has no name (null)");
  if (!is_plugin_name(api->name))
    throw error(errc::invalid_argument, at + "the plugin's name \"" + std::string(api->name) +
                                            "\" is not accepted: use upper case letters, digits and '_', starting "
                                            "with a letter ([A-Z][A-Z0-9_]*, e.g. \"OPENCL\")");
}

}  // namespace detail

/// Checks a plugin table against the ABI rules of <xdev/plugin/abi.h> before anything but its
/// entry has run; `where` (the library's path, say) starts every message. A newer minor with a
/// larger table is accepted (only the fields this header knows are read), and so is a 1.1 or 1.2
/// table, which ends before the 1.3 field `describe_device` (its devices have no description).
/// \throws xdev::error
/// - `errc::incompatible_abi` for a null table, an `abi_major` other than XDEV_ABI_MAJOR (naming
///   both), an `abi_minor` below XDEV_ABI_MIN_MINOR, a `struct_size` smaller than the v1.1 table
///   ("xdev_plugin_api of ABI 1.1: expected at least 232 bytes, got 200": the size of a 1.1 or 1.2
///   table, `detail::table_size_v1_1`), or a null required entry (naming it);
/// - `errc::invalid_argument` for a null name or one not matching `[A-Z][A-Z0-9_]*`.
inline void check_table(const xdev_plugin_api* api, std::string_view where) {
  detail::check_table_header(api, where);
  const auto require = [&](const void* entry, const char* entry_name) {
    if (entry == nullptr)
      throw error(errc::incompatible_abi, std::string(where) + ": plugin " + api->name + ": the required entry `" +
                                              entry_name +
                                              "` is null (only op_dtypes, the operations and describe_device may be)");
  };
  require(reinterpret_cast<const void*>(api->initialize), "initialize");
  require(reinterpret_cast<const void*>(api->create), "create");
  require(reinterpret_cast<const void*>(api->destroy), "destroy");
  require(reinterpret_cast<const void*>(api->capabilities), "capabilities");
  require(reinterpret_cast<const void*>(api->device_count), "device_count");
  require(reinterpret_cast<const void*>(api->allocate), "allocate");
  require(reinterpret_cast<const void*>(api->deallocate), "deallocate");
  require(reinterpret_cast<const void*>(api->copy_to_device), "copy_to_device");
  require(reinterpret_cast<const void*>(api->copy_to_host), "copy_to_host");
  require(reinterpret_cast<const void*>(api->copy_between), "copy_between");
  require(reinterpret_cast<const void*>(api->execute), "execute");
}

/// Calls the plugin's `initialize` (what the loader does once per loaded library; call it yourself
/// only for a table you obtained without the loader, once per process, after `check_table`).
/// \throws xdev::error with the plugin's code and message: "REF: initialize: <message>".
inline void initialize_plugin(const xdev_plugin_api& api) {
  const xdev_host_info host{sizeof(xdev_host_info), XDEV_ABI_MAJOR, XDEV_ABI_MINOR,
                            detail::host_version(), nullptr,        nullptr};
  detail::ErrorSink sink;
  if (api.initialize == nullptr)
    throw error(errc::unimplemented, std::string(api.name) + ": initialize: the plugin does not provide this entry");
  const xdev_status s = api.initialize(&host, &sink.c);
  if (s != XDEV_OK)
    throw error(detail::errc_of(s), std::string(api.name) + ": initialize: " + detail::status_text(s, sink.text()));
}

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
    // A 1.1 or 1.2 table ends before `describe_device`: never read past its `struct_size`.
    if (detail::table_has(api, describe_device_minor,
                          offsetof(xdev_plugin_api, describe_device) + sizeof(api->describe_device)))
      describe_ = api->describe_device;
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
    if (describe_ == nullptr) return {};
    const char* text = nullptr;
    call("describe_device", [&](xdev_error* e) { return describe_(backend_, device, &text, e); });
    return text != nullptr ? std::string(text) : std::string();
  }
  /// The options this backend object was created with.
  [[nodiscard]] const ClientOptions& options() const noexcept { return options_; }
  /// The plugin's table.
  [[nodiscard]] const xdev_plugin_api& api() const noexcept { return *api_; }
  /// The keep-alive of the plugin's library.
  [[nodiscard]] const std::shared_ptr<void>& library() const noexcept { return library_; }
  /// The plugin's backend object (what `create` returned), for calling the table directly.
  [[nodiscard]] void* native_handle() const noexcept { return backend_; }

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
    auto* ctx = new detail::AsyncCall(std::move(done), name_ + ": " + entry);
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
  // The table's `describe_device` when it has one (ABI 1.3 and a table large enough), else null.
  decltype(xdev_plugin_api::describe_device) describe_ = nullptr;
  void* backend_ = nullptr;
  std::uint32_t abi_minor_ = 0;
  CapabilitySet caps_{};
  std::size_t devices_ = 0;
  std::array<std::uint64_t, XDEV_OP_COUNT> op_masks_{};
  mutable std::atomic<int> active_{0};  // threads inside an entry (InEntry)
};

}  // namespace xdev::plugin
