/// \file
/// The OpenCL plugin's environment variables, parsed without OpenCL (so that the fuzz harness of
/// tests/fuzz/ can feed them): `XDEV_OPENCL_DEVICE_TYPE`.
#pragma once

#include <xdev/core/env.hpp>
#include <xdev/core/error.hpp>

#include <cctype>
#include <string>
#include <string_view>

namespace xdev_opencl::detail {

inline std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

inline std::string trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

/// The device types a value of `XDEV_OPENCL_DEVICE_TYPE` names, as bits (the backend maps them to
/// `CL_DEVICE_TYPE_*`).
struct DeviceTypes {
  bool cpu = false;
  bool gpu = false;
  bool accelerator = false;
  bool all = false;
};

/// Parses `text`: a comma-separated list of `cpu`, `gpu`, `accelerator`, `all` (any case, blanks
/// around items ignored). \throws xdev::error `errc::invalid_argument` naming the variable and the
/// item that is not a device type.
inline DeviceTypes parse_device_types(std::string_view text) {
  DeviceTypes types;
  std::string_view rest = text;
  while (true) {
    const auto comma = rest.find(',');
    const std::string item = lower(trim(rest.substr(0, comma)));
    if (item == "cpu")
      types.cpu = true;
    else if (item == "gpu")
      types.gpu = true;
    else if (item == "accelerator")
      types.accelerator = true;
    else if (item == "all")
      types.all = true;
    else
      throw xdev::error(xdev::errc::invalid_argument,
                        "XDEV_OPENCL_DEVICE_TYPE=\"" + std::string(text) + "\": \"" + item +
                            "\" is not a device type; accepted: a comma-separated list of cpu, gpu, accelerator, all");
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return types;
}

/// `XDEV_OPENCL_DEVICE_TYPE` as set in the environment; unset: every type.
inline DeviceTypes device_types_from_environment() {
  const auto text = xdev::getenv_string("XDEV_OPENCL_DEVICE_TYPE");
  if (!text) return DeviceTypes{.all = true};
  return parse_device_types(*text);
}

}  // namespace xdev_opencl::detail
