// Device test targets and policy backends of xdev's own tests, built on ManualBackend (a backend
// with no op members): every portable op on them runs through the CPU fallback.
#pragma once

#include <xdev/backend/completion.hpp>
#include <xdev/device/runtime.hpp>
#include <xdev/ops/op_args.hpp>
#include <xdev/policy/capabilities.hpp>
#include <xdev/testing/device_test.hpp>

#include "support/manual_backend.hpp"

#include <atomic>
#include <cstddef>
#include <cstring>
#include <string>
#include <string_view>

namespace xdev_test {

// ManualBackend with other capabilities, completing every operation inline (no test thread has to
// drive it), `Devices` devices by default.
template <class Caps, std::size_t Devices = 1>
class PolicyBackend : public ManualBackend {
 public:
  using capabilities = Caps;
  explicit PolicyBackend(std::size_t devices = Devices) : ManualBackend(devices, Mode::inline_completion) {}
};

// Generates its random numbers with Threefry unless a call names a generator.
class ThreeFryBackend : public PolicyBackend<xdev::Capabilities<xdev::RngDefault<xdev::RngAlgorithm::three_fry>>> {
 public:
  static constexpr std::string_view name = "THREEFRY";
  using PolicyBackend::PolicyBackend;
};

// Stores and computes f32 only.
class F32OnlyBackend : public PolicyBackend<xdev::Capabilities<xdev::SupportedDTypes<xdev::DType::f32>>> {
 public:
  static constexpr std::string_view name = "F32ONLY";
  using PolicyBackend::PolicyBackend;
};

// Dense gather up to 20 rows.
class DenseGather2Backend : public PolicyBackend<xdev::Capabilities<xdev::DenseGather<2>>> {
 public:
  static constexpr std::string_view name = "DENSE2";
  using PolicyBackend::PolicyBackend;
};

// Autocast to f16 inside an `AutocastScope(AutocastKey::npu)`.
class NpuAutocastBackend
    : public PolicyBackend<xdev::Capabilities<xdev::Autocast<xdev::AutocastKey::npu, xdev::DType::f16>>> {
 public:
  static constexpr std::string_view name = "NPU16";
  using PolicyBackend::PolicyBackend;
};

// Implements `fill` itself, counting its calls; every other op runs through the CPU fallback.
class FillMemberBackend : public PolicyBackend<xdev::Capabilities<>> {
 public:
  static constexpr std::string_view name = "FILLER";
  using PolicyBackend::PolicyBackend;

  template <class T>
  void fill(std::size_t, const xdev::ops::FillArgs<T, memory_handle>& a, xdev::Completion done) {
    fills.fetch_add(1);
    for (std::size_t i = 0; i < a.n; ++i) std::memcpy(a.x + i * sizeof(T), &a.value, sizeof(T));
    done(nullptr);
  }

  std::atomic<int> fills{0};
};

static_assert(xdev::check_backend<FillMemberBackend>() && xdev::check_backend<ThreeFryBackend>() &&
              xdev::check_backend<F32OnlyBackend>() && xdev::check_backend<DenseGather2Backend>() &&
              xdev::check_backend<NpuAutocastBackend>());

// ManualBackend (no op members) with 2 devices completing inline: every op through the CPU fallback.
struct FallbackTarget {
  using backend = ManualBackend;
  static std::string name() { return "FALLBACK"; }
  static xdev::Runtime<ManualBackend>* runtime(std::string&) {
    static xdev::Runtime<ManualBackend> rt({}, 2, ManualBackend::Mode::inline_completion);
    return &rt;
  }
};

// FillMemberBackend (its own `fill`, every other op through the fallback) with 2 devices.
struct FillMemberTarget {
  using backend = FillMemberBackend;
  static std::string name() { return "FILLER"; }
  static xdev::Runtime<FillMemberBackend>* runtime(std::string&) {
    static xdev::Runtime<FillMemberBackend> rt({}, 2);
    return &rt;
  }
};

// A device type that is never available here.
struct NeverAvailableTarget {
  using backend = ManualBackend;
  static std::string name() { return "NEVER"; }
  static xdev::Runtime<ManualBackend>* runtime(std::string& why_unavailable) {
    why_unavailable = "NEVER devices exist on no machine (a test target that is always unavailable)";
    return nullptr;
  }
};

// F32OnlyBackend as a target, for tests of require_dtype.
struct F32OnlyTarget {
  using backend = F32OnlyBackend;
  static std::string name() { return "F32ONLY"; }
  static xdev::Runtime<F32OnlyBackend>* runtime(std::string&) {
    static xdev::Runtime<F32OnlyBackend> rt({}, 1);
    return &rt;
  }
};

}  // namespace xdev_test
