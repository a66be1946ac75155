// Helpers of the plugin tests: where the fixture plugins are, scratch directories, marker files
// and a diagnostics capture.
#pragma once

#include <xdev/plugin/loader.hpp>
#include "support/scoped_env.hpp"

#include <gtest/gtest.h>

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace xdev_test {

namespace fs = std::filesystem;

// A fixture directory: "good", "mixed", "dup1", "dup2", "neverunload" (see CMakeLists.txt).
inline fs::path fixture_dir(std::string_view name) {
  return fs::path(XDEV_TEST_FIXTURE_ROOT) / name;
}

// The fixture plugin file libxdev_plugin_<file>.so of directory `dir`.
inline fs::path fixture_plugin(std::string_view dir, std::string_view file) {
  return fixture_dir(dir) / ("libxdev_plugin_" + std::string(file) + ".so");
}

// Runs `f`, expecting an xdev::error with `code`; returns its what().
template <class F>
std::string error_of(F&& f, xdev::errc code) {
  try {
    f();
  } catch (const xdev::error& e) {
    EXPECT_EQ(e.condition(), code) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "expected an xdev::error";
  return {};
}

// True while the dynamic loader has `file` mapped (probe only: RTLD_NOLOAD never loads).
inline bool is_mapped(const fs::path& file) {
  void* handle = ::dlopen(file.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (handle == nullptr) return false;
  ::dlclose(handle);
  return true;
}

// A fresh directory for this test (unique per process and test), removed at the end.
class ScratchDir {
 public:
  ScratchDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::path(XDEV_TEST_SCRATCH_ROOT) /
            (std::string(info->test_suite_name()) + "." + info->name() + "." + std::to_string(::getpid()));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const fs::path& path() const { return path_; }
  fs::path operator/(std::string_view name) const { return path_ / name; }

 private:
  fs::path path_;
};

using xdev_test::ScopedEnv;

// Points the fixtures' markers (XDEV_TEST_MARKER_DIR) at a scratch directory of this test.
class Markers {
 public:
  Markers() : env_("XDEV_TEST_MARKER_DIR", dir_.path().string()) {}

  // How many times fixture `tag` marked `what` ("initialize", "constructor"); 0 when never.
  int count(std::string_view tag, std::string_view what) const {
    std::ifstream in(dir_.path() / (std::string(tag) + "." + std::string(what)));
    int lines = 0;
    for (std::string line; std::getline(in, line);) ++lines;
    return lines;
  }

 private:
  ScratchDir dir_;
  ScopedEnv env_;
};

// Collects the loader's diagnostics for the scope (thread-safe), restoring the previous sink.
class CapturedDiagnostics {
 public:
  CapturedDiagnostics()
      : previous_(xdev::plugin::set_diagnostic_sink([this](const xdev::plugin::Diagnostic& d) {
          std::lock_guard lock(mutex_);
          all_.push_back(d);
        })) {}
  ~CapturedDiagnostics() { xdev::plugin::set_diagnostic_sink(previous_); }
  CapturedDiagnostics(const CapturedDiagnostics&) = delete;
  CapturedDiagnostics& operator=(const CapturedDiagnostics&) = delete;

  std::vector<xdev::plugin::Diagnostic> all() const {
    std::lock_guard lock(mutex_);
    return all_;
  }

  // The diagnostics of `severity` whose message contains `text`.
  std::vector<std::string> matching(xdev::plugin::Severity severity, std::string_view text) const {
    std::vector<std::string> out;
    for (const auto& d : all())
      if (d.severity == severity && d.message.find(text) != std::string::npos) out.push_back(d.message);
    return out;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<xdev::plugin::Diagnostic> all_;
  xdev::plugin::DiagnosticSink previous_;
};

// The bytes of `file`.
inline std::vector<char> read_bytes(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Writes `size` bytes to `file` (replacing it).
inline void write_bytes(const fs::path& file, const char* data, std::size_t size) {
  std::ofstream out(file, std::ios::binary);
  out.write(data, static_cast<std::streamsize>(size));
}

// A directory of this test holding a copy of fixture plugin good/GOOD (or another), removed at the end.
class PluginCopy {
 public:
  explicit PluginCopy(std::string_view dir = "good", std::string_view file = "good") {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::path(XDEV_TEST_SCRATCH_ROOT) /
           (std::string(info->test_suite_name()) + "." + info->name() + "." + std::to_string(::getpid()) + ".plugins");
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    fs::permissions(dir_, fs::perms(0755));
    file_ = dir_ / ("libxdev_plugin_" + std::string(file) + ".so");
    fs::copy_file(fixture_plugin(dir, file), file_);
    fs::permissions(file_, fs::perms(0755));
  }
  ~PluginCopy() {
    std::error_code ec;
    fs::permissions(dir_, fs::perms(0755), ec);
    fs::remove_all(dir_, ec);
  }
  PluginCopy(const PluginCopy&) = delete;
  PluginCopy& operator=(const PluginCopy&) = delete;

  const fs::path& dir() const { return dir_; }
  const fs::path& file() const { return file_; }

 private:
  fs::path dir_;
  fs::path file_;
};

}  // namespace xdev_test
