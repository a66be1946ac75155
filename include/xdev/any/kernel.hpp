/// \file
/// User device code on devices whose memory the host cannot address: `xdev::Kernel` holds a
/// kernel's source and parameter list; `launch` runs it on an `AnyStream` (or a device's default
/// stream) over an `NDRange` of work items, with arrays and scalars as arguments. The backend
/// compiles it for each device on first use and keeps the result; a build failure is an
/// `errc::invalid_argument` carrying the compiler's log. Launches go through the stream, the
/// in-flight bound and the completion tokens like every other operation.
///
///     const xdev::Kernel axpb({.source = R"(
///         __kernel void axpb(__global float* y, __global const float* x, float a, float b) {
///           size_t i = get_global_id(0);
///           y[i] = a * x[i] + b;
///         })",
///                              .entry = "axpb",
///                              .params = {xdev::KernelParam::buffer<float>(), xdev::KernelParam::buffer<float>(),
///                                         xdev::KernelParam::scalar<float>(), xdev::KernelParam::scalar<float>()}});
///     axpb.launch(stream, {y.size()}, {y, x, 2.0F, 1.0F}).get();
///
/// Today the OpenCL plugin runs such kernels (language `xdev::opencl_c`); other devices refuse
/// with `errc::unimplemented` naming the device. C++ kernels for host-addressable memory are
/// `parallel_for` (<xdev/any/parallel.hpp>).
#pragma once

#include <xdev/any/any_device.hpp>
#include <xdev/async/submit.hpp>
#include <xdev/async/use_future.hpp>
#include <xdev/backend/completion.hpp>
#include <xdev/backend/user_kernel.hpp>
#include <xdev/core/dtype.hpp>
#include <xdev/core/error.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace xdev {

/// One argument of a launch: an array or buffer (a buffer parameter), or a value of a dtype (a
/// scalar parameter). Built implicitly from either, so a launch takes `{y, x, 2.0F}`. It refers to
/// the array; the launch reads its device and memory when it is called.
class KernelArg {
 public:
  template <class T>
  KernelArg(const AnyBuffer<T>& b) noexcept  // NOLINT(google-explicit-constructor): an argument list
      : kind_(KernelArgKind::buffer),
        dtype_(dtype_of<T>),
        device_(&b.device()),
        memory_(b.native_handle()),
        empty_(b.empty()) {}
  template <class T>
  KernelArg(const AnyArray<T>& a) noexcept  // NOLINT(google-explicit-constructor)
      : KernelArg(a.buffer()) {}
  /// A window of an array (`xdev::slice`): the kernel's pointer starts at the window's first
  /// element (`view.offset()` elements into the array); a strided window's kernel indexes it with
  /// `view.stride(d)`, passed as scalars. The backend must take windows (the OpenCL plugin does, at
  /// offsets that are multiples of the device's sub-buffer alignment); elsewhere the launch fails
  /// with `errc::unimplemented` through its token.
  /// \throws xdev::error `errc::invalid_argument` for a default-constructed view (of no array).
  template <class T>
  KernelArg(const AnyArrayView<T>& v)  // NOLINT(google-explicit-constructor)
      : KernelArg(v.buffer()) {
    offset_ = static_cast<std::uint64_t>(v.offset() * sizeof(T));
    empty_ = v.empty();
  }
  template <class T>
  requires HasDType<T> &&(!std::is_same_v<T, bool>)KernelArg(T value) noexcept  // NOLINT(google-explicit-constructor)
      : kind_(KernelArgKind::scalar), dtype_(dtype_of<T>) {
    static_assert(sizeof(T) <= sizeof(std::uint64_t));
    std::memcpy(&bits_, &value, sizeof(T));
  }

  [[nodiscard]] KernelArgKind kind() const noexcept { return kind_; }
  [[nodiscard]] DType dtype() const noexcept { return dtype_; }
  /// The buffer's device (null for a scalar).
  [[nodiscard]] const AnyDevice* device() const noexcept { return device_; }
  [[nodiscard]] detail::erased_handle memory() const noexcept { return memory_; }
  [[nodiscard]] bool empty_buffer() const noexcept { return empty_; }
  [[nodiscard]] std::uint64_t scalar_bits() const noexcept { return bits_; }
  /// For a window: the byte offset of its first element in the array (0 for a whole array).
  [[nodiscard]] std::uint64_t offset() const noexcept { return offset_; }

 private:
  KernelArgKind kind_;
  DType dtype_;
  const AnyDevice* device_ = nullptr;
  detail::erased_handle memory_{};
  bool empty_ = false;
  std::uint64_t bits_ = 0;
  std::uint64_t offset_ = 0;
};

/// A user kernel (see the file comment). Copies share the compiled forms; the backend's kernel
/// objects are let go when the last copy is destroyed (launches already submitted still run).
class Kernel {
 public:
  /// Checks the source's shape: a language, a source, an entry that is a C identifier, at most 64
  /// parameters. Nothing is compiled yet: each backend compiles it on its first launch there.
  /// \throws xdev::error `errc::invalid_argument` naming what is missing.
  explicit Kernel(KernelSource source) : state_(std::make_shared<State>(std::move(source))) {
    const KernelSource& s = state_->source;
    auto bad = [&](const std::string& what) {
      return error(errc::invalid_argument, "Kernel \"" + s.entry + "\": " + what);
    };
    if (s.language.empty()) throw bad("no language (xdev::opencl_c for OpenCL C)");
    if (s.source.empty()) throw bad("the source is empty");
    const bool identifier = !s.entry.empty() && !(s.entry[0] >= '0' && s.entry[0] <= '9') &&
                            s.entry.find_first_not_of(
                                "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") == std::string::npos;
    if (!identifier) throw bad("the entry must be the kernel function's name, a C identifier");
    if (s.params.size() > max_params)
      throw bad(std::to_string(s.params.size()) + " parameters, more than " + std::to_string(max_params));
    for (std::size_t i = 0; i < s.params.size(); ++i)
      if (s.params[i].kind != KernelArgKind::buffer && s.params[i].kind != KernelArgKind::scalar)
        throw bad("parameter " + std::to_string(i) + " has no kind (buffer or scalar)");
  }

  /// The most parameters a kernel may declare.
  static constexpr std::size_t max_params = 64;

  [[nodiscard]] const KernelSource& source() const noexcept { return state_->source; }
  [[nodiscard]] const std::string& name() const noexcept { return state_->source.entry; }

  /// Runs the kernel on `s`'s device over `global` work items (work-groups of the backend's
  /// choice), after the stream's earlier work; completes through `token` (a future by default).
  /// \throws xdev::error `errc::invalid_argument` for a range of no or more than 3 extents, a count
  ///         of arguments other than the parameters', an argument of another kind or dtype than its
  ///         parameter (naming both), or an array of another device; `errc::unimplemented` when the
  ///         device does not run kernels in the source's language. Nothing is submitted then. A
  ///         build failure arrives through the token, with the compiler's log.
  template <class Token = const use_future_t&>
  auto launch(const AnyStream& s, NDRange global, std::initializer_list<KernelArg> args,
              Token&& token = use_future) const {
    return launch(s, global, NDRange{}, args, std::forward<Token>(token));
  }
  /// As above, with work-groups of `local` work items (of the same dims as `global`, dividing it).
  template <class Token = const use_future_t&>
  auto launch(const AnyStream& s, NDRange global, NDRange local, std::initializer_list<KernelArg> args,
              Token&& token = use_future) const {
    const AnyDevice& dev = s.device();
    if (!dev.valid()) throw error(errc::invalid_argument, "Kernel \"" + name() + "\": the stream names no device");
    const std::uint64_t handle = handle_for(dev);  // the backend takes the source first (or refuses it)
    KernelLaunchArgs<detail::erased_handle> a = check(dev, global, local, args);
    return s.template submit<void>(nullptr,
                                   detail::queue_ordered(
                                       [dev, state = state_, handle, a = std::move(a)](Completion done) mutable {
                                         if (a.global.size() == 0)
                                           return done(nullptr);  // no work items: nothing to run
                                         dev.model().launch_kernel(handle, std::move(a),
                                                                   dev.keep_alive(std::move(done)));
                                       },
                                       detail::activity_tag{tools::Category::op, "kernel"}),
                                   std::forward<Token>(token));
  }
  /// `launch` on `dev`'s default stream.
  template <class Token = const use_future_t&>
  auto launch(const AnyDevice& dev, NDRange global, std::initializer_list<KernelArg> args,
              Token&& token = use_future) const {
    if (!dev.valid()) throw error(errc::invalid_argument, "Kernel \"" + name() + "\": the handle names no device");
    return launch(dev.default_stream(), global, NDRange{}, args, std::forward<Token>(token));
  }

 private:
  // The backend's kernel object for one runtime (a backend object), made on the first launch there.
  struct Made {
    const void* runtime;
    AnyDevice device;  // keeps a registry backend alive while the handle lives; destroys it
    std::uint64_t handle;
  };
  struct State {
    explicit State(KernelSource s) : source(std::move(s)) {}
    State(const State&) = delete;
    State& operator=(const State&) = delete;
    ~State() {
      for (Made& m : made)
        if (m.device.valid()) m.device.model().destroy_kernel(m.handle);
    }
    const KernelSource source;
    std::mutex m;
    std::vector<Made> made;  // under m
  };

  // The backend's handle for `dev`'s runtime, created on first use.
  std::uint64_t handle_for(const AnyDevice& dev) const {
    const void* runtime = dev.model().identity.runtime;
    std::lock_guard lk(state_->m);
    for (const Made& m : state_->made)
      if (m.runtime == runtime && m.device.valid()) return m.handle;
    const std::uint64_t h = dev.model().create_kernel(state_->source);
    state_->made.push_back({runtime, dev, h});
    return h;
  }

  KernelLaunchArgs<detail::erased_handle> check(const AnyDevice& dev, const NDRange& global, const NDRange& local,
                                                std::initializer_list<KernelArg> args) const {
    const KernelSource& src = state_->source;
    auto bad = [&](const std::string& what) {
      return error(errc::invalid_argument, "Kernel \"" + src.entry + "\" on " + dev.name() + ": " + what);
    };
    if (global.dims() < 1 || global.dims() > NDRange::max_dims)
      throw bad("the global range " + describe(global) + " must have 1 to 3 extents");
    if (!local.empty()) {
      if (local.dims() != global.dims())
        throw bad("the work-group " + describe(local) + " and the global range " + describe(global) +
                  " differ in dims");
      for (std::uint32_t d = 0; d < global.dims(); ++d)
        if (local[d] == 0 || global[d] % local[d] != 0)
          throw bad("the work-group " + describe(local) + " does not divide the global range " + describe(global));
    }
    if (args.size() != src.params.size())
      throw bad(std::to_string(args.size()) + " arguments for " + std::to_string(src.params.size()) + " parameters");
    KernelLaunchArgs<detail::erased_handle> out{global, local, {}};
    out.args.reserve(args.size());
    std::size_t i = 0;
    for (const KernelArg& a : args) {
      const KernelParam& p = src.params[i];
      const KernelParam given{a.kind(), a.dtype()};
      if (given != p)
        throw bad("argument " + std::to_string(i) + " (" + describe(given) + ") does not match parameter " +
                  std::to_string(i) + " (" + describe(p) + ")");
      if (a.kind() == KernelArgKind::buffer) {
        if (a.device() == nullptr || !(*a.device() == dev))
          throw bad("argument " + std::to_string(i) + " is an array of " +
                    (a.device() != nullptr && a.device()->valid() ? a.device()->name() : std::string("no device")) +
                    ", not of the launch's device");
        if (a.empty_buffer()) throw bad("argument " + std::to_string(i) + " is an empty array or window");
        out.args.push_back({a.memory(), 0, a.offset()});
      } else {
        out.args.push_back({{}, a.scalar_bits()});
      }
      ++i;
    }
    return out;
  }

  std::shared_ptr<State> state_;
};

}  // namespace xdev
