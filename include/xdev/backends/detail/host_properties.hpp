/// \file
/// What the host backend reports as its devices' properties: the CPU's model and vendor
/// (/proc/cpuinfo), the kernel as the "driver", the machine type as the architecture, and the machine's memory, total
/// (sysconf) and available now (/proc/meminfo's MemAvailable, else sysconf's free pages).
#pragma once

#include <xdev/backend/device_properties.hpp>

#include <sys/utsname.h>
#include <unistd.h>

#include <cstddef>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>

namespace xdev::backends::detail {

/// The value of the first "key : value" line of `file` whose key is `key` ("" when none).
inline std::string proc_field(const char* file, std::string_view key) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string_view k(line.data(), colon);
    while (!k.empty() && (k.back() == ' ' || k.back() == '\t')) k.remove_suffix(1);
    if (k != key) continue;
    std::string_view v(line);
    v.remove_prefix(colon + 1);
    while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
    return std::string(v);
  }
  return {};
}

/// The parts of the host's properties that do not change while the process runs.
inline DeviceProperties host_static_properties() {
  DeviceProperties p;
  p.type = DeviceType::cpu;
  p.name = proc_field("/proc/cpuinfo", "model name");
  p.vendor = proc_field("/proc/cpuinfo", "vendor_id");
  if (struct utsname u{}; ::uname(&u) == 0) {
    p.driver_version = std::string(u.sysname) + ' ' + u.release;
    p.architecture = u.machine;
  }
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) p.memory_total = static_cast<std::size_t>(pages) * static_cast<std::size_t>(page);
  return p;
}

/// The memory available now: MemAvailable (what the kernel could give without swapping), else the
/// free pages; nullopt when neither can be read.
inline std::optional<std::size_t> host_memory_available() {
  const std::string kb = proc_field("/proc/meminfo", "MemAvailable");
  std::size_t n = 0;
  std::size_t i = 0;
  for (; i < kb.size() && kb[i] >= '0' && kb[i] <= '9' && n < (std::size_t{1} << 50); ++i)
    n = n * 10 + static_cast<std::size_t>(kb[i] - '0');
  if (i > 0) return n * 1024;
  const long pages = ::sysconf(_SC_AVPHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) return static_cast<std::size_t>(pages) * static_cast<std::size_t>(page);
  return std::nullopt;
}

}  // namespace xdev::backends::detail
