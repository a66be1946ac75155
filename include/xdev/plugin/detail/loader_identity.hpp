/// \file
/// Internal: a plugin's identity read from the descriptor the loader checked (before the dynamic
/// loader maps it), and the allowlist the environment names (`XDEV_PLUGIN_ALLOWLIST`).
#pragma once

#include <xdev/core/env.hpp>
#include <xdev/core/error.hpp>
#include <xdev/plugin/detail/loader_elf.hpp>
#include <xdev/plugin/detail/loader_trust.hpp>
#include <xdev/plugin/detail/sha256.hpp>
#include <xdev/plugin/identity.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <istream>
#include <memory>
#include <streambuf>
#include <string>
#include <system_error>

namespace xdev::plugin::detail {

/// A read-only, seekable stream buffer over an open descriptor, reading with `pread` (the
/// descriptor's own offset is never moved).
class DescriptorBuf : public std::streambuf {
 public:
  explicit DescriptorBuf(int fd) noexcept : fd_(fd) {}

 protected:
  int_type underflow() override {
    if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
    ssize_t got = 0;
    do {
      got = ::pread(fd_, buffer_, sizeof buffer_, next_);
    } while (got < 0 && errno == EINTR);
    if (got <= 0) return traits_type::eof();
    next_ += got;
    setg(buffer_, buffer_, buffer_ + got);
    return traits_type::to_int_type(*gptr());
  }

  pos_type seekpos(pos_type pos, std::ios_base::openmode) override {
    if (off_type(pos) < 0) return pos_type(off_type(-1));
    next_ = static_cast<off_t>(off_type(pos));
    setg(buffer_, buffer_, buffer_);
    return pos;
  }

  pos_type seekoff(off_type off, std::ios_base::seekdir dir, std::ios_base::openmode which) override {
    if (dir == std::ios_base::beg) return seekpos(pos_type(off), which);
    if (dir == std::ios_base::cur) return seekpos(pos_type(off_type(next_) - (egptr() - gptr()) + off), which);
    return pos_type(off_type(-1));
  }

 private:
  int fd_;
  off_t next_ = 0;
  char buffer_[4096];
};

/// The SHA-256 of the plugin open as `file`.
/// \throws xdev::error `errc::unavailable` naming `context` when the file cannot be read.
inline std::string hash_plugin_file(const PluginFile& file, const std::string& context) {
  try {
    return sha256_of_descriptor(file.fd());
  } catch (const std::system_error& e) {
    throw error(errc::unavailable, context + ": cannot read it to hash it (" + e.code().message() + ")");
  }
}

/// The identity of the plugin open as `file` (of real path `canonical`): its build-id always, its
/// SHA-256 only when `hash` (it reads the whole file).
/// \throws xdev::error `errc::unavailable` naming `context` when the file cannot be read.
inline Identity read_identity(const PluginFile& file, const std::filesystem::path& canonical, bool hash,
                              const std::string& context) {
  Identity identity;
  identity.real_path = canonical;
  struct stat st {};
  if (::fstat(file.fd(), &st) != 0)
    throw error(errc::unavailable,
                context + ": cannot read its status (" + std::generic_category().message(errno) + ")");
  DescriptorBuf buffer(file.fd());
  std::istream in(&buffer);
  identity.build_id = elf_build_id(in, static_cast<std::uint64_t>(st.st_size));
  if (hash) identity.sha256 = hash_plugin_file(file, context);
  return identity;
}

/// The largest allowlist file read (a list of digests is a few kilobytes).
inline constexpr std::uintmax_t max_allowlist_bytes = 16u << 20;

/// Reads and parses the allowlist file `path` (absolute). The file is checked as a plugin is
/// (owner and mode of it and the directories above it): a list that others can write pins nothing.
/// \throws xdev::error: `errc::invalid_argument` for a relative path, a file too large or a
///         malformed line; `errc::not_found` or `errc::permission_denied` when it cannot be opened;
///         `errc::permission_denied` when it is not trusted and `allow_insecure` is false.
inline Allowlist read_allowlist(const std::filesystem::path& path, bool allow_insecure) {
  const std::string context = "plugin allowlist \"" + path.string() + "\"";
  if (!path.is_absolute()) throw error(errc::invalid_argument, context + " is not an absolute path");
  std::error_code ec;
  const auto canonical = std::filesystem::canonical(path, ec);
  if (ec) throw error(errc::not_found, context + ": " + ec.message());
  PluginFile file = open_plugin_file(canonical, context);
  struct stat st {};
  if (::fstat(file.fd(), &st) != 0 || !S_ISREG(st.st_mode))
    throw error(errc::invalid_argument, context + " is not a regular file");
  if (const std::string why = untrusted_reason(file, canonical); !why.empty() && !allow_insecure)
    throw error(errc::permission_denied, context + " is not trusted: " + why +
                                             " (it must be owned by root or this process's user and writable by "
                                             "nobody else, as plugins are; XDEV_ALLOW_INSECURE_PLUGINS=1 reads it "
                                             "anyway)");
  if (static_cast<std::uintmax_t>(st.st_size) > max_allowlist_bytes)
    throw error(errc::invalid_argument, context + " is larger than " + std::to_string(max_allowlist_bytes) + " bytes");
  std::string text(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t have = 0;
  while (have < text.size()) {
    const ssize_t got = ::pread(file.fd(), text.data() + have, text.size() - have, static_cast<off_t>(have));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    have += static_cast<std::size_t>(got);
  }
  text.resize(have);
  return Allowlist::parse(text, "\"" + path.string() + "\"");
}

/// The allowlist `XDEV_PLUGIN_ALLOWLIST` names, or null when the variable is unset or empty.
/// \throws what `read_allowlist` throws, naming the variable.
inline std::shared_ptr<const Allowlist> allowlist_from_environment(bool allow_insecure) {
  const auto v = getenv_string("XDEV_PLUGIN_ALLOWLIST");
  if (!v || v->empty()) return nullptr;
  try {
    return std::make_shared<const Allowlist>(read_allowlist(*v, allow_insecure));
  } catch (const error& e) {
    throw error(e.condition(), "XDEV_PLUGIN_ALLOWLIST: " + e.message());
  }
}

}  // namespace xdev::plugin::detail
