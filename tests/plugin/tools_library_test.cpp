// Tools libraries (<xdev/plugin/tools_library.hpp>): a shared library speaking the C ABI of
// <xdev/core/tools_abi.h> sees a small program's activities exactly, with errors, and is finalized
// when let go; every broken or untrusted library is refused with the file and the reason.
#include <xdev/plugin/tools_library.hpp>

#include <xdev/backends/host.hpp>
#include <xdev/device/runtime.hpp>
#include <xdev/memory/array.hpp>
#include <xdev/ops/ops.hpp>

#include "support/scoped_env.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using Host = xdev::backends::Host;
using xdev_test::ScopedEnv;

const fs::path library = XDEV_TEST_TOOLS_LIBRARY;

std::vector<std::string> lines_of(const fs::path& file) {
  std::ifstream in(file);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

fs::path scratch(const std::string& name) {
  const auto dir = fs::temp_directory_path() / ("xdev_tools_library_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir / name;
}

TEST(ToolsLibrary, SeesASmallProgramExactlyAndIsFinalizedWhenLetGo) {
  const auto log = scratch("seen.txt");
  fs::remove(log);
  ScopedEnv env("XDEV_TEST_TOOL_LOG", log.c_str());
  xdev::Runtime<Host> rt({}, Host::Options{.devices = 1, .threads = 2});
  auto dev = rt.device(0);
  auto x = xdev::empty<float>(dev, {4});
  {
    auto subscription = xdev::tools::load_library(library);
    EXPECT_TRUE(xdev::tools::active());
    xdev::ops::fill(dev, x, 1.0f).get();
    EXPECT_THROW(dev.execute([] { throw std::runtime_error("boom"); }).get(), std::runtime_error);
    dev.synchronize();
  }
  EXPECT_FALSE(xdev::tools::active());
  dev.execute([] {}).get();  // not seen: the library is gone
  const std::string d = dev.name();
  EXPECT_EQ(lines_of(log), (std::vector<std::string>{
                               "begin op fill " + d + " f32", "end op fill " + d + " f32",
                               "begin host_task execute " + d, "end host_task execute " + d + " error=boom",
                               "begin synchronize synchronize " + d, "end synchronize synchronize " + d, "finalize"}));
}

// The error `load_library(path)` throws (its code and message), with `mode` for the library's entry.
xdev::error refusal(const fs::path& path, const char* mode = nullptr) {
  ScopedEnv env("XDEV_TEST_TOOL_MODE", mode);
  try {
    auto s = xdev::tools::load_library(path);
  } catch (const xdev::error& e) {
    return e;
  }
  ADD_FAILURE() << path << " with mode " << (mode ? mode : "(none)") << " was loaded";
  return xdev::error(xdev::errc::internal, "loaded");
}

TEST(ToolsLibrary, EveryBrokenLibraryIsRefusedWithTheFileAndTheReason) {
  using ::testing::HasSubstr;
  auto e = refusal("libxdev_test_tool.so");
  EXPECT_EQ(e.condition(), xdev::errc::invalid_argument);
  EXPECT_THAT(e.what(), HasSubstr("the path is not absolute"));
  e = refusal(library.parent_path() / "missing.so");
  EXPECT_EQ(e.condition(), xdev::errc::not_found);
  EXPECT_THAT(e.what(), HasSubstr("missing.so"));
  e = refusal(fs::path(XDEV_TEST_FIXTURE_ROOT) / "good/libxdev_plugin_good.so");
  EXPECT_EQ(e.condition(), xdev::errc::incompatible_abi);
  EXPECT_THAT(e.what(), HasSubstr("does not export xdev_tools_entry_v1 (not an xdev tools library)"));
  const std::pair<const char*, const char*> cases[] = {
      {"null", "declined to be loaded"},
      {"version2", "it speaks tools ABI version 2, this xdev speaks 1"},
      {"no_callback", "its table has no callback"},
      {"small", "its table is 8 bytes"},
      {"throw", "its entry threw a C++ exception across the C boundary"},
  };
  for (const auto& [mode, why] : cases) {
    e = refusal(library, mode);
    EXPECT_EQ(e.condition(), xdev::errc::incompatible_abi) << mode;
    EXPECT_THAT(e.what(), HasSubstr(why)) << mode;
    EXPECT_THAT(e.what(), HasSubstr("libxdev_test_tool.so")) << mode;
  }
  EXPECT_FALSE(xdev::tools::active()) << "a refused library stayed installed";
}

TEST(ToolsLibrary, AnUntrustedFileIsRefusedUnlessInsecurePluginsAreAllowed) {
  const auto dir = scratch("open");
  fs::create_directories(dir);
  ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);  // writable by everyone, no sticky bit
  const auto copy = dir / "libxdev_test_tool.so";
  fs::copy_file(library, copy, fs::copy_options::overwrite_existing);
  const auto e = refusal(copy);
  EXPECT_EQ(e.condition(), xdev::errc::permission_denied);
  EXPECT_THAT(e.what(), ::testing::HasSubstr("not trusted"));
  {
    auto s = xdev::tools::load_library(copy, {.allow_insecure_plugins = true});
    EXPECT_TRUE(xdev::tools::active());
  }
  fs::remove_all(dir);
}

}  // namespace
