/// \file
/// Internal: whether a plugin file may be trusted before any of its code runs (docs/security.md).
/// The loader opens the file once, checks that descriptor and every directory above the file's
/// real path, and hands the dynamic loader that same descriptor (`/proc/self/fd/N`), so the file
/// checked is the file loaded.
#pragma once

#include <xdev/core/env.hpp>

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>

namespace xdev::plugin::detail {

/// `XDEV_ALLOW_INSECURE_PLUGINS=1`: load plugins that fail the ownership and mode checks (with a
/// warning). Any other value than 0 or 1 is an error naming the variable.
inline bool insecure_plugins_allowed_by_environment() {
  const auto v = getenv_string("XDEV_ALLOW_INSECURE_PLUGINS");
  if (!v || *v == "0") return false;
  if (*v == "1") return true;
  throw error(errc::invalid_argument, "XDEV_ALLOW_INSECURE_PLUGINS=\"" + *v + "\" is not 0 or 1");
}

/// `XDEV_DISABLE_PLUGIN_UNLOADING=1`: plugins stay mapped until the process ends, so that a leak
/// checker or profiler can still resolve their frames at exit (as the Vulkan and OpenCL loaders
/// offer). Any other value than 0 or 1 is an error naming the variable.
inline bool plugin_unloading_disabled() {
  const auto v = getenv_string("XDEV_DISABLE_PLUGIN_UNLOADING");
  if (!v || *v == "0") return false;
  if (*v == "1") return true;
  throw error(errc::invalid_argument, "XDEV_DISABLE_PLUGIN_UNLOADING=\"" + *v + "\" is not 0 or 1");
}

/// A file opened for loading, whose descriptor names it to the dynamic loader (`loader_path`).
/// The dynamic loader knows an image by that name, and would hand the same image out for another
/// file opened later under the same descriptor number: so once the name was handed to it
/// (`mark_handed_to_loader`), the descriptor stays open, and its number taken, as long as an image
/// of that name is mapped (for good when it never unloads). A descriptor never handed over is just
/// closed: asking the dynamic loader about it would make it open the file (a FIFO would block).
class PluginFile {
 public:
  PluginFile() = default;
  explicit PluginFile(int fd) noexcept : fd_(fd) {}
  PluginFile(PluginFile&& o) noexcept : fd_(std::exchange(o.fd_, -1)), handed_(std::exchange(o.handed_, false)) {}
  PluginFile& operator=(PluginFile&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
      handed_ = std::exchange(o.handed_, false);
    }
    return *this;
  }
  PluginFile(const PluginFile&) = delete;
  PluginFile& operator=(const PluginFile&) = delete;
  ~PluginFile() { reset(); }

  [[nodiscard]] int fd() const noexcept { return fd_; }
  /// The name under which the dynamic loader opens exactly this descriptor's file.
  [[nodiscard]] std::filesystem::path loader_path() const { return "/proc/self/fd/" + std::to_string(fd_); }
  /// Records that `loader_path()` was given to the dynamic loader (see the class comment).
  void mark_handed_to_loader() noexcept { handed_ = true; }

 private:
  void reset() noexcept {
    if (fd_ < 0) return;
    // The name formatted in place: this runs in destructors, where an allocation that fails
    // would end the process.
    char name[32];
    std::snprintf(name, sizeof name, "/proc/self/fd/%d", fd_);
    if (void* still = handed_ ? ::dlopen(name, RTLD_LAZY | RTLD_NOLOAD) : nullptr) {
      ::dlclose(still);
      fd_ = -1;  // kept open on purpose: its number must not name another file to the dynamic loader
      return;
    }
    if (handed_) (void)::dlerror();
    ::close(fd_);
    fd_ = -1;
  }
  int fd_ = -1;
  bool handed_ = false;
};

/// "0755" for messages.
inline std::string octal_mode(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

/// Why `st` (of `what`, "the file" or "the directory", at `path`) cannot be trusted, or "".
/// Trusted: owned by root or by this process's effective user, and writable by nobody else (a
/// group- or world-writable directory is accepted only with the sticky bit, as /tmp has it: there
/// nobody can rename or remove an entry they do not own).
inline std::string distrust(const struct stat& st, const char* what, const std::filesystem::path& path) {
  const uid_t me = ::geteuid();
  const std::string quoted = "\"" + path.string() + "\"";
  if (st.st_uid != 0 && st.st_uid != me)
    return std::string(what) + " " + quoted + " is owned by uid " + std::to_string(st.st_uid) +
           ", neither root nor this process's user (uid " + std::to_string(me) + ")";
  const bool sticky_directory = S_ISDIR(st.st_mode) && (st.st_mode & S_ISVTX) != 0;
  if ((st.st_mode & S_IWOTH) != 0 && !sticky_directory)
    return std::string(what) + " " + quoted + " is writable by every user (mode " + octal_mode(st.st_mode) + ")";
  if ((st.st_mode & S_IWGRP) != 0 && !sticky_directory)
    return std::string(what) + " " + quoted + " is writable by its group (mode " + octal_mode(st.st_mode) + ")";
  return {};
}

/// Opens the plugin file `path` for reading (following symbolic links, as the dynamic loader would).
/// Non-blocking, so that a FIFO or a device put in a plugin's place cannot stall the open: what
/// is not a regular file is refused afterwards (`untrusted_reason`).
/// \throws xdev::error `errc::not_found` or `errc::permission_denied` with the system's reason.
inline PluginFile open_plugin_file(const std::filesystem::path& path, const std::string& context) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int e = errno;
    throw error(e == ENOENT ? errc::not_found : errc::permission_denied,
                context + ": cannot open it (" + std::generic_category().message(e) + ")");
  }
  return PluginFile(fd);
}

/// Why the open file `file`, whose real path is `canonical`, is not to be trusted: the first
/// problem found, or "" when the file and every directory from its own up to "/" pass `distrust`.
inline std::string untrusted_reason(const PluginFile& file, const std::filesystem::path& canonical) {
  struct stat st {};
  if (::fstat(file.fd(), &st) != 0) return "its status cannot be read (" + std::generic_category().message(errno) + ")";
  if (!S_ISREG(st.st_mode)) return "it is not a regular file";
  if (auto why = distrust(st, "the file", canonical); !why.empty()) return why;
  for (auto dir = canonical.parent_path();; dir = dir.parent_path()) {
    struct stat ds {};
    if (::stat(dir.c_str(), &ds) != 0)
      return "the directory \"" + dir.string() + "\" cannot be read (" + std::generic_category().message(errno) + ")";
    if (auto why = distrust(ds, "the directory", dir); !why.empty()) return why;
    if (dir == dir.root_path() || !dir.has_relative_path()) break;
  }
  return {};
}

/// The name to hand the dynamic loader for the checked descriptor `file` (of real path
/// `canonical`): `/proc/self/fd/N`. Without /proc, the path itself, once it still names the very
/// file checked (a narrower window than no check; docs/security.md).
inline std::filesystem::path loader_name_of(PluginFile& file, const std::filesystem::path& canonical,
                                            const std::string& context) {
  auto name = file.loader_path();
  if (::access(name.c_str(), F_OK) == 0) {
    file.mark_handed_to_loader();
    return name;
  }
  struct stat checked {};
  struct stat now {};
  if (::fstat(file.fd(), &checked) != 0 || ::stat(canonical.c_str(), &now) != 0 || checked.st_dev != now.st_dev ||
      checked.st_ino != now.st_ino)
    throw error(errc::permission_denied, context + ": the file changed while it was being checked");
  return canonical;
}

}  // namespace xdev::plugin::detail
