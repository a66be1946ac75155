// Plugin identity and the allowlist (docs/security.md, "Pinning plugin builds"): what a loaded
// plugin says it is (real path, build-id, SHA-256), the allowlist format, and that a file the
// allowlist does not admit is refused before any of its code runs.
#include <xdev/plugin/detail/sha256.hpp>
#include <xdev/plugin/identity.hpp>
#include <xdev/plugin/loader.hpp>

#include "plugin_test_support.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>

namespace {

namespace fs = std::filesystem;
namespace plugin = xdev::plugin;
using ::testing::HasSubstr;
using xdev_test::CapturedDiagnostics;
using xdev_test::error_of;
using xdev_test::fixture_plugin;
using xdev_test::is_mapped;
using xdev_test::Markers;
using xdev_test::PluginCopy;
using xdev_test::read_bytes;
using xdev_test::ScopedEnv;
using xdev_test::write_bytes;

// The first whitespace-separated word of `command`'s output line containing `marker` after
// `marker` ("" when the command fails or prints no such line).
std::string word_after(const std::string& command, std::string_view marker) {
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(::popen(command.c_str(), "r"), &::pclose);
  if (!pipe) return {};
  std::array<char, 4096> line{};
  while (std::fgets(line.data(), static_cast<int>(line.size()), pipe.get()) != nullptr) {
    const std::string_view text(line.data());
    const auto at = text.find(marker);
    if (at == std::string_view::npos) continue;
    std::string_view rest = text.substr(at + marker.size());
    rest.remove_prefix(std::min(rest.find_first_not_of(" \t"), rest.size()));
    return std::string(rest.substr(0, rest.find_first_of(" \t\n")));
  }
  return {};
}

std::string sha256_of_file(const fs::path& file) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  EXPECT_GE(fd, 0) << file;
  const std::string digest = plugin::detail::sha256_of_descriptor(fd);
  ::close(fd);
  return digest;
}

// Writes `text` to a fresh file of this test (mode 0644) and returns its path.
fs::path write_text(const PluginCopy& copy, std::string_view name, std::string_view text) {
  const auto file = copy.dir() / name;
  write_bytes(file, text.data(), text.size());
  fs::permissions(file, fs::perms(0644));
  return file;
}

// Flips one byte of `file` where no loader or program reads it: in the compiler's identification
// string (the .comment section), so that the file still loads but its contents differ.
void flip_a_harmless_byte(const fs::path& file) {
  auto bytes = read_bytes(file);
  const std::string_view all(bytes.data(), bytes.size());
  auto at = all.find("GCC: (");
  if (at == std::string_view::npos) at = all.find("clang version");
  ASSERT_NE(at, std::string_view::npos) << "no compiler identification in " << file;
  bytes[at + 2] ^= 0x20;  // "GCC" -> "GcC", "clang" -> "clAng"
  write_bytes(file, bytes.data(), bytes.size());
}

// ---- SHA-256 -----------------------------------------------------------------------------------

TEST(Sha256, MatchesTheFips180Vectors) {
  auto digest = [](std::string_view text) {
    plugin::detail::Sha256 hash;
    hash.update(text);
    return hash.hex_digest();
  };
  EXPECT_EQ(digest(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(digest("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(digest("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  // One million 'a' fed in uneven pieces: every block boundary and the length padding.
  plugin::detail::Sha256 hash;
  const std::string piece(997, 'a');
  std::size_t left = 1000000;
  while (left > 0) {
    const std::size_t n = std::min(left, piece.size());
    hash.update(piece.data(), n);
    left -= n;
  }
  EXPECT_EQ(hash.hex_digest(), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// ---- identity ----------------------------------------------------------------------------------

TEST(Identity, ALoadedPluginNamesItsRealPathBuildIdAndDigest) {
  PluginCopy copy;
  const auto link = copy.dir() / "libxdev_plugin_link.so";
  fs::create_symlink(copy.file().filename(), link);
  const auto lib = plugin::load(link);
  const auto& id = lib->identity();
  EXPECT_EQ(lib->path(), link);
  EXPECT_EQ(id.real_path, fs::canonical(copy.file()));
  EXPECT_EQ(id.sha256, sha256_of_file(copy.file()));
  EXPECT_EQ(id.sha256.size(), 64u);
  const std::string sha256sum = word_after("sha256sum '" + copy.file().string() + "' 2>/dev/null", "");
  if (!sha256sum.empty()) {
    EXPECT_EQ(id.sha256, sha256sum);
  }
  // The fixtures are linked with a build-id (Debian's toolchains pass --build-id).
  const std::string readelf = word_after("readelf -n '" + copy.file().string() + "' 2>/dev/null", "Build ID:");
  if (!readelf.empty()) {
    EXPECT_EQ(id.build_id, readelf);
  }
  EXPECT_THAT(id.build_id, ::testing::MatchesRegex("([0-9a-f][0-9a-f])+"));

  const auto found = plugin::discover(plugin::SearchPath{{copy.dir()}});
  EXPECT_THAT(found.report(), HasSubstr("\n                build-id " + id.build_id + ", sha256 " + id.sha256 + "\n"));
}

// ---- the allowlist format ----------------------------------------------------------------------

TEST(Allowlist, ReadsDigestsBuildIdsCommentsAndSha256sumOutput) {
  const std::string sha(64, 'a');
  const auto list = plugin::Allowlist::parse(
      "# pinned builds\r\n"
      "\n" +
          sha +
          "  /usr/lib/xdev/plugins/libxdev_plugin_ref.so\r\n"
          "   sha256:" +
          std::string(64, 'B') +
          "\n"
          "build-id:0123456789ABCDEF\tthe CUDA plugin\n"
          "128155f10369107061f7b7b7099e23cc99f88204",
      "test list");
  ASSERT_EQ(list.entries().size(), 4u);
  EXPECT_EQ(list.origin(), "test list");
  EXPECT_EQ(list.entries()[0].kind, plugin::Allowlist::Kind::sha256);
  EXPECT_EQ(list.entries()[0].hex, sha);
  EXPECT_EQ(list.entries()[0].label, "/usr/lib/xdev/plugins/libxdev_plugin_ref.so");
  EXPECT_EQ(list.entries()[0].line, 3u);
  EXPECT_EQ(list.entries()[1].hex, std::string(64, 'b'));
  EXPECT_EQ(list.entries()[2].kind, plugin::Allowlist::Kind::build_id);
  EXPECT_EQ(list.entries()[2].hex, "0123456789abcdef");
  EXPECT_EQ(list.entries()[2].label, "the CUDA plugin");
  EXPECT_EQ(list.entries()[3].kind, plugin::Allowlist::Kind::build_id);

  EXPECT_TRUE(list.admits({"/p", "", std::string(64, 'b')}));
  EXPECT_TRUE(list.admits({"/p", "0123456789abcdef", std::string(64, 'c')}));
  EXPECT_FALSE(list.admits({"/p", "", std::string(64, 'c')}));
  EXPECT_FALSE(plugin::Allowlist().admits({"/p", "0123456789abcdef", sha})) << "an empty list admits nothing";
}

TEST(Allowlist, AMalformedLineIsAnErrorNamingTheListAndTheLine) {
  const std::pair<std::string, std::string> cases[] = {
      {"sha256:abcd", "a SHA-256 has 64 hex digits, not 4"},
      {"md5:0123456789abcdef", "unknown kind \"md5\""},
      {"0123456789abcdeg", "not a hex digit: 'g'"},
      {"abc", "a build-id has an even number of hex digits from 8 to 128, not 3"},
      {"build-id:", "no hex digits"},
      {std::string("build-id:") + std::string(130, '0'),
       "a build-id has an even number of hex digits from 8 to 128, not 130"},
  };
  for (const auto& c : cases) {
    const std::string& line = c.first;  // a named variable: clang 14 cannot capture a structured binding
    const std::string& problem = c.second;
    const auto what = error_of([&] { (void)plugin::Allowlist::parse("# ok\n" + line + "\n", "\"/etc/list\""); },
                               xdev::errc::invalid_argument);
    EXPECT_THAT(what, HasSubstr("plugin allowlist \"/etc/list\" line 2: " + problem)) << line;
  }
  // Control characters in the line are not echoed as they are.
  const auto what = error_of([] { (void)plugin::Allowlist::parse("zz\x1b[31m", "l"); }, xdev::errc::invalid_argument);
  EXPECT_THAT(what, HasSubstr("(\"zz?[31m\""));
}

// ---- enforcement -------------------------------------------------------------------------------

TEST(Allowlist, AFlippedByteIsRefusedBeforeThePluginsCodeRuns) {
  Markers markers;
  PluginCopy copy;
  const std::string pinned = sha256_of_file(copy.file());
  const auto options = plugin::LoadOptions{.allowlist = plugin::Allowlist::parse(pinned + "  good\n", "pins")};

  const auto other = copy.dir() / "libxdev_plugin_flipped.so";
  fs::copy_file(copy.file(), other);
  flip_a_harmless_byte(other);
  fs::permissions(other, fs::perms(0755));

  const auto what = error_of([&] { (void)plugin::load(other, options); }, xdev::errc::identity_mismatch);
  EXPECT_THAT(what, HasSubstr("cannot load xdev plugin \"" + other.string() + "\": not on the plugin allowlist pins"));
  EXPECT_THAT(what, HasSubstr("sha256 " + sha256_of_file(other)));
  EXPECT_EQ(markers.count("good", "constructor"), 0) << "the refused file's code ran";
  EXPECT_FALSE(is_mapped(other));

  // The pinned file itself loads; and the flipped one is a working plugin that only the list refused.
  EXPECT_EQ(plugin::load(copy.file(), options)->name(), "GOOD");
  EXPECT_EQ(plugin::load(other)->name(), "GOOD");
}

TEST(Allowlist, ABuildIdPinsTheBuildNotTheBytes) {
  PluginCopy copy;
  const auto other = copy.dir() / "libxdev_plugin_flipped.so";
  fs::copy_file(copy.file(), other);
  flip_a_harmless_byte(other);
  fs::permissions(other, fs::perms(0755));
  const auto lib = plugin::load(copy.file());
  const auto& build_id = lib->identity().build_id;
  ASSERT_FALSE(build_id.empty());
  const auto by_build = plugin::LoadOptions{.allowlist = plugin::Allowlist::parse("build-id:" + build_id, "b")};
  EXPECT_EQ(plugin::load(other, by_build)->identity().build_id, build_id);
}

TEST(Allowlist, APluginLoadedBeforeIsStillCheckedAgainstALaterList) {
  PluginCopy copy;
  const auto lib = plugin::load(copy.file());  // no list yet
  const auto strict = plugin::LoadOptions{.allowlist = plugin::Allowlist::parse(std::string(64, '0'), "zeros")};
  error_of([&] { (void)plugin::load(copy.file(), strict); }, xdev::errc::identity_mismatch);
}

TEST(Allowlist, TheEnvironmentNamesTheListDiscoveryEnforces) {
  CapturedDiagnostics diagnostics;
  PluginCopy copy;
  const auto other = copy.dir() / "libxdev_plugin_flipped.so";
  fs::copy_file(copy.file(), other);
  flip_a_harmless_byte(other);
  fs::permissions(other, fs::perms(0755));
  // Only the original is pinned: the flipped copy (first by file name) is refused, the original loads.
  const auto list = write_text(copy, "allow.txt", sha256_of_file(copy.file()) + "  good\n");
  ScopedEnv env("XDEV_PLUGIN_ALLOWLIST", list.string());

  const auto found = plugin::discover(plugin::SearchPath{{copy.dir()}});
  ASSERT_EQ(found.candidates.size(), 2u);
  EXPECT_EQ(found.candidates[0].path, other);
  EXPECT_EQ(found.candidates[0].status, plugin::CandidateStatus::failed);
  EXPECT_EQ(found.candidates[0].error, xdev::errc::identity_mismatch);
  EXPECT_THAT(found.candidates[0].reason, HasSubstr("not on the plugin allowlist \"" + list.string() + "\""));
  EXPECT_EQ(found.candidates[1].path, copy.file());
  EXPECT_EQ(found.candidates[1].status, plugin::CandidateStatus::loaded);
  EXPECT_THAT(diagnostics.matching(plugin::Severity::warning, "not on the plugin allowlist"), ::testing::SizeIs(1));
  EXPECT_FALSE(is_mapped(other));
}

TEST(Allowlist, AnAllowlistVariableThatCannotBeUsedIsAnErrorNamingIt) {
  PluginCopy copy;
  {
    ScopedEnv env("XDEV_PLUGIN_ALLOWLIST", "relative/list");
    EXPECT_THAT(
        error_of([&] { (void)plugin::discover(plugin::SearchPath{{copy.dir()}}); }, xdev::errc::invalid_argument),
        HasSubstr("XDEV_PLUGIN_ALLOWLIST: plugin allowlist \"relative/list\" is not an absolute path"));
  }
  {
    ScopedEnv env("XDEV_PLUGIN_ALLOWLIST", (copy.dir() / "missing.txt").string());
    EXPECT_THAT(error_of([&] { (void)plugin::load(copy.file()); }, xdev::errc::not_found),
                HasSubstr("XDEV_PLUGIN_ALLOWLIST: plugin allowlist \"" + (copy.dir() / "missing.txt").string()));
  }
  {
    const auto list = write_text(copy, "bad.txt", "not-a-digest\n");
    ScopedEnv env("XDEV_PLUGIN_ALLOWLIST", list.string());
    EXPECT_THAT(error_of([&] { (void)plugin::load(copy.file()); }, xdev::errc::invalid_argument),
                HasSubstr("line 1: not a hex digit: 'n'"));
  }
  {
    // A list others can write pins nothing: refused as an untrusted plugin would be.
    ScopedEnv no_override("XDEV_ALLOW_INSECURE_PLUGINS", nullptr);
    const auto list = write_text(copy, "open.txt", sha256_of_file(copy.file()) + "\n");
    fs::permissions(list, fs::perms(0666));
    ScopedEnv env("XDEV_PLUGIN_ALLOWLIST", list.string());
    EXPECT_THAT(error_of([&] { (void)plugin::load(copy.file()); }, xdev::errc::permission_denied),
                HasSubstr("is writable by every user (mode 0666)"));
  }
  {
    // A FIFO in the list's place is refused at once (a blocking open would wait for a writer).
    const auto fifo = copy.dir() / "fifo";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
    ScopedEnv env("XDEV_PLUGIN_ALLOWLIST", fifo.string());
    EXPECT_THAT(error_of([&] { (void)plugin::load(copy.file()); }, xdev::errc::invalid_argument),
                HasSubstr("\"" + fifo.string() + "\" is not a regular file"));
  }
  // Set but empty: no list.
  ScopedEnv env("XDEV_PLUGIN_ALLOWLIST", "");
  EXPECT_EQ(plugin::load(copy.file())->name(), "GOOD");
}

}  // namespace
