/// \file
/// User kernels of the OpenCL plugin (`xdev::Kernel` with `xdev::opencl_c`, through ABI 1.9): a
/// `UserKernel` keeps the source and, per device, the program built for that device and its
/// kernel object, made on the first launch there. A build failure is kept with its log (the same
/// source fails the same way), and the kernel's signature is checked against the declared
/// parameters (count, `__global` pointer or value, element type) with the argument information
/// the build asks for (`-cl-kernel-arg-info`).
#pragma once

#include "cl_error.hpp"

#include <xdev/backend/user_kernel.hpp>
#include <xdev/core/dtype.hpp>
#include <xdev/core/error.hpp>

#include <cstddef>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace xdev_opencl::detail {

// The OpenCL C names of an element type (a bool buffer is bytes: `uchar`, `char` or `bool`; bf16
// has no OpenCL type and travels as 16-bit integers).
inline std::vector<std::string_view> opencl_type_names(xdev::DType t) {
  switch (t) {
    case xdev::DType::bool_:
      return {"bool", "uchar", "char"};
    case xdev::DType::u8:
      return {"uchar"};
    case xdev::DType::i32:
      return {"int"};
    case xdev::DType::i64:
      return {"long"};
    case xdev::DType::f16:
      return {"half"};
    case xdev::DType::bf16:
      return {"ushort", "short"};
    case xdev::DType::f32:
      return {"float"};
    case xdev::DType::f64:
      return {"double"};
  }
  return {};
}

// True for the OpenCL C scalar type names `opencl_type_names` can give (a vector type such as
// float4, or a struct, is not compared).
inline bool is_plain_opencl_type(std::string_view name) {
  for (std::string_view n :
       {"bool", "char", "uchar", "short", "ushort", "int", "uint", "long", "ulong", "half", "float", "double"})
    if (n == name) return true;
  return false;
}

// A user kernel: its source, and per device the program and kernel object built there.
class UserKernel {
 public:
  UserKernel(xdev::KernelSource source, std::size_t devices) : source_(std::move(source)), per_device_(devices) {}
  UserKernel(const UserKernel&) = delete;
  UserKernel& operator=(const UserKernel&) = delete;
  // Releases the objects; launches already enqueued keep what they use (OpenCL retains it).
  ~UserKernel() {
    for (Built& b : per_device_) {
      if (b.kernel != nullptr) clReleaseKernel(b.kernel);
      if (b.program != nullptr) clReleaseProgram(b.program);
    }
  }

  [[nodiscard]] const xdev::KernelSource& source() const noexcept { return source_; }

  // The kernel object for device `index` (`id` in `context`), built on the first call.
  // \throws xdev::error `errc::invalid_argument` with the build log, for a missing entry, or for a
  // signature that disagrees with the parameters; the same error again on later calls.
  cl_kernel for_device(std::size_t index, cl_context context, cl_device_id id, const std::string& label) {
    std::lock_guard lk(m_);
    Built& b = per_device_.at(index);
    if (b.kernel != nullptr) return b.kernel;
    if (!b.failure.empty()) throw xdev::error(xdev::errc::invalid_argument, b.failure);
    try {
      build(b, context, id, label);
    } catch (const xdev::error& e) {
      if (e.code() == xdev::errc::invalid_argument) b.failure = e.what();
      if (b.kernel != nullptr) clReleaseKernel(b.kernel);
      if (b.program != nullptr) clReleaseProgram(b.program);
      b.kernel = nullptr;
      b.program = nullptr;
      throw;
    }
    return b.kernel;
  }

 private:
  struct Built {
    cl_program program = nullptr;
    cl_kernel kernel = nullptr;
    std::string failure;  // the build's error, kept: the same source fails the same way
  };

  std::string where(const std::string& label) const { return label + ": kernel \"" + source_.entry + "\""; }

  void build(Built& b, cl_context context, cl_device_id id, const std::string& label) {
    const char* text = source_.source.data();
    const std::size_t length = source_.source.size();
    cl_int err = CL_SUCCESS;
    b.program = clCreateProgramWithSource(context, 1, &text, &length, &err);
    if (err != CL_SUCCESS || b.program == nullptr) throw cl_failure(where(label), "clCreateProgramWithSource", err);
    const std::string options = source_.options + (source_.options.empty() ? "" : " ") + "-cl-kernel-arg-info";
    err = clBuildProgram(b.program, 1, &id, options.c_str(), nullptr, nullptr);
    if (err != CL_SUCCESS) {
      std::string log = build_log(b.program, id);
      if (err == CL_BUILD_PROGRAM_FAILURE || err == CL_INVALID_BUILD_OPTIONS || err == CL_COMPILE_PROGRAM_FAILURE)
        throw xdev::error(xdev::errc::invalid_argument, where(label) + " does not build (" +
                                                            std::string(cl_error_name(err)) + ", options \"" + options +
                                                            "\"):\n" + log);
      throw cl_failure(where(label) + ": clBuildProgram log:\n" + log, "clBuildProgram", err);
    }
    b.kernel = clCreateKernel(b.program, source_.entry.c_str(), &err);
    if (err == CL_INVALID_KERNEL_NAME)
      throw xdev::error(xdev::errc::invalid_argument,
                        where(label) + ": the source has no __kernel function named \"" + source_.entry + "\"");
    if (err != CL_SUCCESS || b.kernel == nullptr) throw cl_failure(where(label), "clCreateKernel", err);
    check_signature(b.kernel, label);
  }

  static std::string build_log(cl_program p, cl_device_id id) {
    std::size_t size = 0;
    if (clGetProgramBuildInfo(p, id, CL_PROGRAM_BUILD_LOG, 0, nullptr, &size) != CL_SUCCESS || size == 0)
      return "(no build log)";
    std::string log(size, '\0');
    if (clGetProgramBuildInfo(p, id, CL_PROGRAM_BUILD_LOG, size, log.data(), nullptr) != CL_SUCCESS)
      return "(no build log)";
    while (!log.empty() && (log.back() == '\0' || log.back() == '\n' || log.back() == ' ')) log.pop_back();
    return log.empty() ? "(an empty build log)" : log;
  }

  static std::string arg_string(cl_kernel k, cl_uint i, cl_kernel_arg_info what) {
    std::size_t size = 0;
    if (clGetKernelArgInfo(k, i, what, 0, nullptr, &size) != CL_SUCCESS || size == 0) return {};
    std::string s(size, '\0');
    if (clGetKernelArgInfo(k, i, what, size, s.data(), nullptr) != CL_SUCCESS) return {};
    while (!s.empty() && s.back() == '\0') s.pop_back();
    return s;
  }

  // The source's signature against the declared parameters: the count always; pointer or value and
  // the element type where the runtime gives argument information.
  void check_signature(cl_kernel k, const std::string& label) const {
    cl_uint count = 0;
    cl_check(clGetKernelInfo(k, CL_KERNEL_NUM_ARGS, sizeof count, &count, nullptr), where(label), "clGetKernelInfo");
    const auto& params = source_.params;
    if (count != params.size())
      throw xdev::error(xdev::errc::invalid_argument, where(label) + " takes " + std::to_string(count) +
                                                          " arguments in the source, but " +
                                                          std::to_string(params.size()) + " parameters are declared");
    for (cl_uint i = 0; i < count; ++i) {
      cl_kernel_arg_address_qualifier q = 0;
      if (clGetKernelArgInfo(k, i, CL_KERNEL_ARG_ADDRESS_QUALIFIER, sizeof q, &q, nullptr) != CL_SUCCESS)
        return;  // no argument information from this runtime: the count is all we can check
      const std::string type = arg_string(k, i, CL_KERNEL_ARG_TYPE_NAME);
      const std::string name = arg_string(k, i, CL_KERNEL_ARG_NAME);
      const bool pointer = type.find('*') != std::string::npos;
      const bool global = q == CL_KERNEL_ARG_ADDRESS_GLOBAL || q == CL_KERNEL_ARG_ADDRESS_CONSTANT;
      const xdev::KernelParam& p = params[i];
      const std::string declared = xdev::describe(p);
      auto mismatch = [&](const std::string& why) {
        return xdev::error(xdev::errc::invalid_argument, where(label) + ": argument " + std::to_string(i) +
                                                             (name.empty() ? "" : " (" + name + ")") + " is `" + type +
                                                             "` in the source, declared " + declared + ": " + why);
      };
      if (p.kind == xdev::KernelArgKind::buffer && !(pointer && global))
        throw mismatch("a buffer parameter must be a __global pointer");
      if (p.kind == xdev::KernelArgKind::scalar && (pointer || q == CL_KERNEL_ARG_ADDRESS_LOCAL))
        throw mismatch("a scalar parameter is passed by value");
      std::string base = type.substr(0, type.find('*'));
      while (!base.empty() && base.back() == ' ') base.pop_back();
      if (!is_plain_opencl_type(base)) continue;  // a vector or struct type: not compared
      bool same = false;
      for (std::string_view n : opencl_type_names(p.dtype)) same = same || n == base;
      if (!same) throw mismatch("the element types differ");
    }
  }

  const xdev::KernelSource source_;
  std::mutex m_;  // builds one device at a time
  std::vector<Built> per_device_;
};

}  // namespace xdev_opencl::detail
