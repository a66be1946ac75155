/// \file
/// The device-generic GoogleTest harness: one test body, run on every device type under test.
/// See docs/testing.md.
///
/// A *target* names one device type under test and says how to get its runtime:
///
///     struct SimTarget {
///       using backend = acme::Simulated;
///       static std::string name() { return "SIM"; }
///       static xdev::Runtime<acme::Simulated>* runtime(std::string& why_unavailable) {
///         if (!acme::hardware_present()) {
///           why_unavailable = "no SIM board found";
///           return nullptr;
///         }
///         static xdev::Runtime<acme::Simulated> rt({}, 2);  // created once, on first use
///         return &rt;
///       }
///     };
///
/// A target may instead give erased devices, for device types only known at run time (plugins) or
/// to run a suite through `xdev::AnyDevice`: `static std::vector<xdev::AnyDevice>
/// devices(std::string& why_unavailable);` in place of `backend` and `runtime` (an empty vector,
/// with the reason set, when unavailable). `this->device()` is then an `AnyDevice`:
///
///     struct AnySimTarget {
///       static std::string name() { return "ANYSIM"; }
///       static std::vector<xdev::AnyDevice> devices(std::string& why_unavailable) {
///         auto* rt = SimTarget::runtime(why_unavailable);
///         if (rt == nullptr) return {};
///         return {rt->device(0), rt->device(1)};
///       }
///     };
///
/// A suite is written once and instantiated for a list of targets; test names read
/// `Suite/TARGET.Test` (`Ops/HOST.Gemm`):
///
///     using MyTargets = xdev::testing::Targets<xdev::testing::HostTarget, SimTarget>;
///     XDEV_DEVICE_TEST_SUITE(Ops, MyTargets);
///     XDEV_DEVICE_TEST(Ops, Fill) {
///       auto dev = this->device();
///       if (!this->require_dtype(xdev::DType::f64)) return;
///       ...
///     }
///
/// Availability: a target whose runtime is unavailable skips every test with its reason, unless
/// the environment variable `XDEV_TEST_DEVICES` (a comma-separated list of target names, e.g.
/// `HOST,FALLBACK`) lists it: then each of its tests fails with the reason, so a CI job that is
/// meant to test a device cannot pass by skipping it. A malformed `XDEV_TEST_DEVICES` fails every
/// device test with a message naming the variable, its value and what is accepted.
///
/// Only test code includes this header (it includes <gtest/gtest.h>); nothing else in xdev does.
#pragma once

#include <xdev/backend/concepts.hpp>
#include <xdev/backends/host.hpp>
#include <xdev/core/dtype.hpp>
#include <xdev/core/env.hpp>
#include <xdev/core/error.hpp>
#include <xdev/device/device.hpp>
#include <xdev/device/runtime.hpp>
#include <xdev/ops/ops.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <typeinfo>
#include <utility>
#include <vector>

namespace xdev::concepts {

// clang-format 14 mangles concept definitions.
// clang-format off

/// A device test target: `using backend = B;` (an `xdev::concepts::Backend`),
/// `static std::string name();` (the name tests are listed under and `XDEV_TEST_DEVICES` uses) and
/// `static xdev::Runtime<B>* runtime(std::string& why_unavailable);` (the runtime to test, or
/// nullptr with the reason set when the device type is unavailable here).
template <class T>
concept DeviceTestTarget = requires(std::string& why) {
  typename T::backend;
  { T::name() } -> std::convertible_to<std::string>;
  { T::runtime(why) } -> std::same_as<Runtime<typename T::backend>*>;
} && Backend<typename T::backend>;

/// A device test target giving erased devices: `static std::string name();` (as above) and
/// `static std::vector<xdev::AnyDevice> devices(std::string& why_unavailable);` (the devices to
/// test, in order, or an empty vector with the reason set when they are unavailable here). This
/// header does not name `AnyDevice` (the harness needs only the typed stack): any vector of device
/// handles with a `backend_type` and `valid()` is accepted; <xdev/testing/erased_targets.hpp> has
/// the ready-made erased targets.
template <class T>
concept AnyDeviceTestTarget = requires(std::string& why) {
  { T::name() } -> std::convertible_to<std::string>;
  typename decltype(T::devices(why))::value_type::backend_type;
  { T::devices(why) } -> std::same_as<std::vector<typename decltype(T::devices(why))::value_type>>;
  { T::devices(why).front().valid() } -> std::convertible_to<bool>;
};

// clang-format on

}  // namespace xdev::concepts

namespace xdev::testing {

/// The environment variable listing the targets that must be available (fixed name).
inline constexpr const char* test_devices_variable = "XDEV_TEST_DEVICES";

/// A list of targets to instantiate a device test suite for (an alias of `::testing::Types`).
template <class... Ts>
using Targets = ::testing::Types<Ts...>;

/// The host backend as a target named "HOST": one runtime with 2 devices (whatever
/// `XDEV_HOST_DEVICES` says), so multi-device tests run on any machine. Always available.
struct HostTarget {
  using backend = backends::Host;
  static std::string name() { return "HOST"; }
  /// \throws xdev::error as `Runtime` (a malformed `XDEV_MAX_INFLIGHT`), which fails the test.
  static Runtime<backends::Host>* runtime(std::string& /*why_unavailable*/) {
    static Runtime<backends::Host> rt({}, backends::Host::Options{.devices = 2});
    return &rt;
  }
};

// ---- availability ---------------------------------------------------------------------------

/// What a device test does about its target's availability.
enum class Action : std::uint8_t {
  run,   ///< the target is available: run the test
  skip,  ///< unavailable and not required: skip with the message
  fail,  ///< unavailable but required by `XDEV_TEST_DEVICES`, or the variable is malformed: fail
};

/// The decision of `availability_decision`: an action and, for skip and fail, the message to print.
struct AvailabilityDecision {
  Action action = Action::run;
  std::string message;
};

namespace detail {

// Target names seen by the name generator of any device test suite in this program, each with the
// C++ types that used it (two types with one name would make test names and XDEV_TEST_DEVICES
// ambiguous).
struct TargetRegistry {
  std::mutex m;
  std::map<std::string, std::set<std::string>> names;

  static TargetRegistry& get() {
    static TargetRegistry r;
    return r;
  }
};

inline void register_target(const std::string& name, const char* type_name) {
  auto& r = TargetRegistry::get();
  std::lock_guard lk(r.m);
  r.names[name].insert(type_name);
}

// The device type of a target that gives erased devices (`AnyDevice`).
template <class Target>
using erased_device_t = typename decltype(Target::devices(std::declval<std::string&>()))::value_type;

// The backend and device type of a typed target; the erased backend and `AnyDevice` for one that
// gives AnyDevices.
template <class Target, bool Erased>
struct target_types {
  using device = erased_device_t<Target>;
  using backend = typename device::backend_type;
};
template <class Target>
struct target_types<Target, false> {
  using backend = typename Target::backend;
  using device = Device<backend>;
};

inline bool is_name_char(char c) noexcept {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

inline std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out.empty() ? "(none)" : out;
}

// The problem with `value` as XDEV_TEST_DEVICES, or nullopt when it is well formed; `names`
// receives the listed names.
inline std::optional<std::string> check_test_devices(std::string_view value, const std::vector<std::string>& known,
                                                     std::vector<std::string>& names) {
  const std::string accepted =
      "; accepted: a comma-separated list of device test target names, without spaces, "
      "each one of: " +
      join(known);
  const std::string head = std::string(test_devices_variable) + "=\"" + std::string(value) + "\"";
  std::size_t item = 1;
  for (std::size_t begin = 0;; ++item) {
    const std::size_t end = std::min(value.find(',', begin), value.size());
    const std::string_view name = value.substr(begin, end - begin);
    if (name.empty()) return head + " is malformed: item " + std::to_string(item) + " is empty" + accepted;
    for (char c : name)
      if (!is_name_char(c))
        return head + " is malformed: item " + std::to_string(item) + " \"" + std::string(name) + "\" contains " +
               (c == ' ' || c == '\t' || c == '\n' || c == '\r' ? std::string("whitespace")
                                                                : "the character '" + std::string(1, c) + "'") +
               accepted;
    if (std::find(known.begin(), known.end(), name) == known.end())
      return head + " names \"" + std::string(name) + "\", which is no device test target of this program" + accepted;
    names.emplace_back(name);
    if (end == value.size()) return std::nullopt;
    begin = end + 1;
  }
}

}  // namespace detail

/// Every target name used by a device test suite of this program, sorted. Suites register their
/// targets' names while GoogleTest registers their tests (before `main`).
inline std::vector<std::string> registered_target_names() {
  auto& r = detail::TargetRegistry::get();
  std::lock_guard lk(r.m);
  std::vector<std::string> out;
  for (const auto& [name, types] : r.names) out.push_back(name);
  return out;
}

/// Parses a value of `XDEV_TEST_DEVICES`: target names separated by commas, no empty item, no
/// whitespace, each one of `known` (by default, the targets of this program's device test suites).
///
///     parse_test_devices("HOST,FALLBACK", {"FALLBACK", "HOST"})   // {"HOST", "FALLBACK"}
///
/// \throws xdev::error `errc::invalid_argument` naming the variable, the value, the problem and the
/// accepted names.
inline std::vector<std::string> parse_test_devices(std::string_view value,
                                                   const std::vector<std::string>& known = registered_target_names()) {
  std::vector<std::string> names;
  if (auto problem = detail::check_test_devices(value, known, names)) throw error(errc::invalid_argument, *problem);
  return names;
}

/// Decides whether a test of target `target` runs, skips or fails. Deterministic: it reads no
/// environment (the fixture passes the value of `XDEV_TEST_DEVICES`, nullopt when unset; an empty
/// value counts as unset, as for every xdev variable).
/// - malformed `env_value` (see `parse_test_devices`, checked against `known`): fail, whatever the
///   target's availability, with the parse problem;
/// - available: run;
/// - unavailable and listed in `env_value`: fail, naming the target, `why_unavailable` and the variable;
/// - unavailable and not listed: skip, naming the target and `why_unavailable`.
inline AvailabilityDecision availability_decision(std::string_view target, bool available,
                                                  std::string_view why_unavailable,
                                                  std::optional<std::string_view> env_value,
                                                  const std::vector<std::string>& known = registered_target_names()) {
  std::vector<std::string> listed;
  if (env_value && !env_value->empty()) {
    if (auto problem = detail::check_test_devices(*env_value, known, listed)) return {Action::fail, *problem};
  }
  if (available) return {Action::run, {}};
  const std::string why =
      why_unavailable.empty() ? std::string("its target gave no reason") : std::string(why_unavailable);
  const std::string head = "device test target " + std::string(target) + " is unavailable: " + why;
  if (std::find(listed.begin(), listed.end(), target) != listed.end())
    return {Action::fail, head + "; " + test_devices_variable + "=\"" + std::string(*env_value) +
                              "\" requires it, so its tests fail instead of skipping"};
  return {Action::skip,
          head + " (" + test_devices_variable + " does not list it; list it there to make this a failure)"};
}

/// The GoogleTest name generator of device test suites: a target's name (`HOST`), so tests read
/// `Suite/HOST.Test`. It also records the name for `registered_target_names`.
struct TargetNames {
  template <class Target>
  static std::string GetName(int) {
    std::string name = Target::name();
    detail::register_target(name, typeid(Target).name());
    return name;
  }
};

// ---- the fixture ----------------------------------------------------------------------------

/// The fixture of every device test: resolves the target's runtime before each test (running,
/// skipping or failing the test as `availability_decision` says), gives the body its devices, and
/// after the body waits for each device's work and fails the test for any error that no future or
/// handler received (so one test's work never leaks into the next).
///
/// The runtime is shared by all tests of a target (device memory, random generator positions and
/// metrics persist between tests): seed generators explicitly and compare metrics as deltas.
///
/// A fixture of your own derives from `DeviceTest<Target>`; its `SetUp` calls
/// `DeviceTest<Target>::SetUp()` first and returns when `IsSkipped() || HasFatalFailure()`.
template <class Target>
class DeviceTest : public ::testing::Test {
  static_assert(concepts::DeviceTestTarget<Target> || concepts::AnyDeviceTestTarget<Target>,
                "xdev::testing::DeviceTest<Target>: Target must have `static std::string name();` and either "
                "`using backend = B;` (an xdev backend) with `static xdev::Runtime<B>* runtime(std::string& "
                "why_unavailable);`, or `static std::vector<xdev::AnyDevice> devices(std::string& why_unavailable);`");

 public:
  using target = Target;
  /// True for a target that gives `AnyDevice`s (`concepts::AnyDeviceTestTarget`).
  static constexpr bool erased = concepts::AnyDeviceTestTarget<Target> && !concepts::DeviceTestTarget<Target>;
  /// The target's backend; `xdev::detail::erased_backend` for a target that gives `AnyDevice`s.
  using backend = typename detail::target_types<Target, erased>::backend;
  /// `Device<backend>`, or `AnyDevice` for a target that gives `AnyDevice`s.
  using device_type = typename detail::target_types<Target, erased>::device;

  /// Device `i` of the target (call `require_devices(i + 1)` first for `i > 0`).
  /// \throws xdev::error `errc::not_found` when the target has no device `i`.
  [[nodiscard]] device_type device(std::size_t i = 0) const {
    if constexpr (erased) {
      if (i >= devices_.size())
        throw error(errc::not_found, "device " + std::to_string(i) + " of device test target " + Target::name() +
                                         " does not exist; it has " + std::to_string(devices_.size()) + " device(s)");
      return devices_[i];
    } else {
      return runtime_->device(i);
    }
  }
  /// The target's runtime (typed targets only).
  [[nodiscard]] Runtime<backend>& runtime() const noexcept requires(!erased) { return *runtime_; }
  [[nodiscard]] std::size_t device_count() const noexcept {
    if constexpr (erased)
      return devices_.size();
    else
      return runtime_->device_count();
  }

  /// True when the target's devices support dtype `t` (`xdev::capabilities_of` its first device);
  /// otherwise marks the test skipped with the reason and returns false: return from the test at once.
  ///
  ///     if (!this->require_dtype(xdev::DType::f64)) return;
  [[nodiscard]] bool require_dtype(DType t) {
    const CapabilitySet caps = capabilities_of(device());
    if (caps.supports(t)) return true;
    return skip(Target::name() + " does not support dtype " + std::string(name_of(t)) +
                " (its capabilities: " + to_string(caps) + ")");
  }

  /// True when the runtime has at least `n` devices; otherwise skips (see `require_dtype`).
  [[nodiscard]] bool require_devices(std::size_t n) {
    if (device_count() >= n) return true;
    return skip("the test needs " + std::to_string(n) + " " + Target::name() + " devices, but there " +
                (device_count() == 1 ? "is 1" : "are " + std::to_string(device_count())));
  }

  /// True when `condition` holds; otherwise skips with `reason` (see `require_dtype`).
  [[nodiscard]] bool require(bool condition, const std::string& reason) { return condition || skip(reason); }

  /// True when the backend runs user kernels (`concepts::LaunchableBackend`, what
  /// `xdev::parallel_for` needs); otherwise skips (see `require_dtype`). Code calling
  /// `parallel_for` must still sit in `if constexpr (xdev::concepts::LaunchableBackend<B>)`.
  [[nodiscard]] bool require_launchable() {
    if constexpr (erased) {
      return skip(Target::name() + " gives AnyDevices, and xdev::parallel_for takes typed devices only");
    } else if constexpr (concepts::LaunchableBackend<backend>) {
      return true;
    } else {
      return skip(Target::name() + " is not a LaunchableBackend: it has no `launch` member, so it cannot run " +
                  "user kernels (xdev::parallel_for)");
    }
  }

 protected:
  void SetUp() override {
    const std::string name = Target::name();
    if (auto problem = name_problem(name)) FAIL() << *problem;
    std::string why;
    if constexpr (erased) {
      try {
        devices_ = Target::devices(why);
      } catch (const std::exception& e) {
        devices_.clear();
        FAIL() << "getting the devices of device test target " << name << " failed: " << e.what();
      }
      if (std::any_of(devices_.begin(), devices_.end(), [](const device_type& d) { return !d.valid(); })) {
        devices_.clear();
        FAIL() << "device test target " << name << " gave an empty AnyDevice";
      }
      if (devices_.empty() && why.empty()) why = name + " has no devices";
    } else {
      try {
        runtime_ = Target::runtime(why);
      } catch (const std::exception& e) {
        runtime_ = nullptr;
        FAIL() << "creating the runtime of device test target " << name << " failed: " << e.what();
      }
      if (runtime_ != nullptr && runtime_->device_count() == 0) {
        why = name + " has no devices";
        runtime_ = nullptr;
      }
    }
    const auto env = getenv_string(test_devices_variable);
    const auto d =
        availability_decision(name, available(), why, env ? std::optional<std::string_view>(*env) : std::nullopt);
    switch (d.action) {
      case Action::run:
        return;
      case Action::skip:
        forget();
        GTEST_SKIP() << d.message;
      case Action::fail:
        forget();
        FAIL() << d.message;
    }
  }

  void TearDown() override {
    if (!available()) return;
    for (std::size_t i = 0; i < device_count(); ++i) {
      const auto dev = device(i);
      // Each call waits for the device's work and raises (and forgets) its oldest kept error.
      for (bool clean = false; !clean;) {
        try {
          dev.synchronize();
          clean = true;
        } catch (const std::exception& e) {
          ADD_FAILURE() << dev.name() << " kept an error that no future or handler received: " << e.what();
        }
      }
    }
  }

 private:
  // Marks the test skipped with `reason`; returns false for the require_* helpers.
  bool skip(const std::string& reason) {
    [&] { GTEST_SKIP() << reason; }();
    return false;
  }

  static std::optional<std::string> name_problem(const std::string& name) {
    if (name.empty() || !std::all_of(name.begin(), name.end(), detail::is_name_char))
      return "device test target name \"" + name + "\" is not accepted: use letters, digits, '_' and '-' only";
    auto& r = detail::TargetRegistry::get();
    std::lock_guard lk(r.m);
    if (auto it = r.names.find(name); it != r.names.end() && it->second.size() > 1)
      return "device test target name \"" + name + "\" is used by " + std::to_string(it->second.size()) +
             " different target types; give each target its own name";
    return std::nullopt;
  }

  bool available() const noexcept {
    if constexpr (erased)
      return !devices_.empty();
    else
      return runtime_ != nullptr;
  }
  void forget() noexcept {
    runtime_ = nullptr;
    devices_.clear();
  }

  Runtime<backend>* runtime_ = nullptr;  // typed targets
  std::vector<device_type> devices_;     // targets that give AnyDevices
};

}  // namespace xdev::testing

/// Declares device test suite `Suite` (fixture `xdev::testing::DeviceTest<Target>`) for the targets
/// of the `xdev::testing::Targets<...>` list given after it; tests are named `Suite/TARGET.Test`.
///
///     XDEV_DEVICE_TEST_SUITE(Ops, xdev::testing::Targets<xdev::testing::HostTarget, MyTarget>);
#define XDEV_DEVICE_TEST_SUITE(Suite, ...)               \
  template <class XdevTarget>                            \
  using Suite = ::xdev::testing::DeviceTest<XdevTarget>; \
  XDEV_DEVICE_TEST_SUITE_F(Suite, __VA_ARGS__)

/// As `XDEV_DEVICE_TEST_SUITE` for a fixture template of your own, `Fixture<Target>`, derived from
/// `xdev::testing::DeviceTest<Target>` (for shared members or helpers).
#define XDEV_DEVICE_TEST_SUITE_F(Fixture, ...) \
  using Fixture##XdevTargetList = __VA_ARGS__; \
  TYPED_TEST_SUITE(Fixture, Fixture##XdevTargetList, ::xdev::testing::TargetNames)

/// Defines test `Name` of device test suite `Suite`. In the body, `TypeParam` is the target,
/// `typename TestFixture::backend` its backend (`xdev::detail::erased_backend` when it gives
/// `AnyDevice`s, then `TestFixture::erased` is true), and `this->device()` its first device.
#define XDEV_DEVICE_TEST(Suite, Name) TYPED_TEST(Suite, Name)

/// Declares a *reusable* device test suite `Suite` (GoogleTest's type-parameterized tests): its
/// tests are defined once, usually in a header, with `XDEV_DEVICE_TEST_P`, listed with
/// `XDEV_REGISTER_DEVICE_TEST_SUITE_P`, and run for the targets of any program that instantiates
/// it with `XDEV_INSTANTIATE_DEVICE_TEST_SUITE_P` (so a backend author runs xdev's own suites on
/// their backend). Test names read `Prefix/Suite/TARGET.Test`. All four macros must be used in the
/// same namespace; <xdev/testing/op_suite.hpp> is the example.
#define XDEV_DEVICE_TEST_SUITE_P(Suite)                  \
  template <class XdevTarget>                            \
  using Suite = ::xdev::testing::DeviceTest<XdevTarget>; \
  TYPED_TEST_SUITE_P(Suite)

/// Defines test `Name` of reusable suite `Suite` (see `XDEV_DEVICE_TEST_SUITE_P`; the body is as
/// for `XDEV_DEVICE_TEST`).
#define XDEV_DEVICE_TEST_P(Suite, Name) TYPED_TEST_P(Suite, Name)

/// Lists every test of reusable suite `Suite`, after their definitions.
#define XDEV_REGISTER_DEVICE_TEST_SUITE_P(Suite, ...) REGISTER_TYPED_TEST_SUITE_P(Suite, __VA_ARGS__)

/// Runs reusable suite `Suite` for the targets of the `xdev::testing::Targets<...>` list given
/// last; `Prefix` (an identifier) starts the test names, `Prefix/Suite/TARGET.Test`.
#define XDEV_INSTANTIATE_DEVICE_TEST_SUITE_P(Prefix, Suite, ...) \
  using Prefix##Suite##XdevTargetList = __VA_ARGS__;             \
  INSTANTIATE_TYPED_TEST_SUITE_P(Prefix, Suite, Prefix##Suite##XdevTargetList, ::xdev::testing::TargetNames)
