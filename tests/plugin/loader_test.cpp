// The plugin loader against real shared libraries: the working fixtures, every failure case of
// tests/plugin/fixtures, and hostile files made at run time.
#include <xdev/core/tools.hpp>
#include <xdev/device/runtime.hpp>
#include <xdev/plugin/loader.hpp>
#include <xdev/plugin/plugin_backend.hpp>

#include "plugin_test_support.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <elf.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace fs = std::filesystem;
namespace plugin = xdev::plugin;
using ::testing::AnyOf;
using ::testing::ElementsAre;
using ::testing::Eq;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;
using xdev_test::CapturedDiagnostics;
using xdev_test::error_of;
using xdev_test::fixture_dir;
using xdev_test::fixture_plugin;
using xdev_test::is_mapped;
using xdev_test::Markers;
using xdev_test::read_bytes;
using xdev_test::ScratchDir;
using xdev_test::write_bytes;

const plugin::Candidate* candidate_of(const plugin::Discovery& found, const fs::path& file) {
  for (const auto& c : found.candidates)
    if (c.path == file) return &c;
  return nullptr;
}

// The working plugins of mixed/ still load next to every failure case.
void expect_mixed_neighbours_load() {
  CapturedDiagnostics quiet;
  const auto found = plugin::discover(plugin::SearchPath{{fixture_dir("mixed")}});
  std::vector<std::string> names;
  for (const auto& lib : found.plugins()) names.push_back(lib->name());
  EXPECT_THAT(names, ElementsAre("ALPHA", "NEWER_MINOR"));
}

// ---- the success path ------------------------------------------------------------------------

struct Completion {
  int calls = 0;
  xdev_status status = -1;
  static void complete(void* context, xdev_status status, const char*) {
    auto* self = static_cast<Completion*>(context);
    ++self->calls;
    self->status = status;
  }
  xdev_completion c_struct() { return {sizeof(xdev_completion), this, &Completion::complete, nullptr}; }
};

TEST(Load, ValidatesInitializesAndHandsOutAWorkingTable) {
  Markers markers;
  CapturedDiagnostics diagnostics;
  const auto path = fixture_plugin("good", "good");
  const auto lib = plugin::load(path);
  ASSERT_NE(lib, nullptr);
  EXPECT_EQ(lib->name(), "GOOD");
  EXPECT_EQ(lib->version(), "0.0.1-good");
  EXPECT_EQ(lib->platform(), "malloc'ed host memory, 2 devices");
  EXPECT_EQ(lib->path(), path);
  EXPECT_EQ(lib->abi_minor(), unsigned{XDEV_ABI_MINOR});
  EXPECT_FALSE(lib->never_unload());
  EXPECT_EQ(markers.count("good", "initialize"), 1);
  // The plugin's own log line reaches the sink, prefixed with its name.
  EXPECT_THAT(diagnostics.matching(plugin::Severity::info, "plugin GOOD: initialized"), SizeIs(1));

  const xdev_plugin_api& api = lib->api();
  void* backend = nullptr;
  const xdev_client_options options{sizeof(xdev_client_options), 0, 0, 1, 0, 1};
  ASSERT_EQ(api.create(&options, &backend, nullptr), XDEV_OK);
  std::uint64_t devices = 0;
  ASSERT_EQ(api.device_count(backend, &devices, nullptr), XDEV_OK);
  EXPECT_EQ(devices, 2u);
  const xdev_capabilities* caps = nullptr;
  ASSERT_EQ(api.capabilities(backend, &caps, nullptr), XDEV_OK);
  EXPECT_EQ(caps->max_inflight, 4u);

  xdev_memory memory = 0;
  ASSERT_EQ(api.allocate(backend, 1, 16, &memory, nullptr), XDEV_OK);
  const char in[16] = "fifteen chars..";
  char out[16] = {};
  Completion up;
  Completion down;
  const auto up_c = up.c_struct();
  const auto down_c = down.c_struct();
  ASSERT_EQ(api.copy_to_device(backend, 1, in, memory, 0, sizeof(in), &up_c, nullptr), XDEV_OK);
  ASSERT_EQ(api.copy_to_host(backend, 1, memory, 0, out, sizeof(out), &down_c, nullptr), XDEV_OK);
  EXPECT_EQ(up.calls, 1);
  EXPECT_EQ(down.calls, 1);
  EXPECT_EQ(down.status, XDEV_OK);
  EXPECT_EQ(std::memcmp(in, out, sizeof(in)), 0);

  bool ran = false;
  const xdev_host_task task{sizeof(xdev_host_task), &ran, [](void* context) { *static_cast<bool*>(context) = true; }};
  Completion done;
  const auto done_c = done.c_struct();
  ASSERT_EQ(api.execute(backend, 0, &task, &done_c, nullptr), XDEV_OK);
  EXPECT_TRUE(ran);
  EXPECT_EQ(done.calls, 1);
  api.deallocate(backend, 1, memory, 16);
  api.destroy(backend);
}

TEST(Load, RejectsRelativeMissingAndNonFilePaths) {
  EXPECT_THAT(error_of([] { (void)plugin::load("libxdev_plugin_good.so"); }, xdev::errc::invalid_argument),
              HasSubstr("\"libxdev_plugin_good.so\": not an absolute path"));
  EXPECT_THAT(error_of([] { (void)plugin::load("good/libxdev_plugin_good.so"); }, xdev::errc::invalid_argument),
              HasSubstr("not an absolute path"));
  const auto missing = fixture_dir("good") / "libxdev_plugin_missing.so";
  EXPECT_THAT(error_of([&] { (void)plugin::load(missing); }, xdev::errc::not_found),
              HasSubstr("cannot load xdev plugin \"" + missing.string() + "\": no such file"));
  EXPECT_THAT(error_of([] { (void)plugin::load(fixture_dir("good")); }, xdev::errc::invalid_argument),
              HasSubstr("not a regular file"));
}

TEST(Load, ConcurrentLoadsShareOneLibraryAndInitializeOnce) {
  Markers markers;
  const auto path = fixture_plugin("good", "good");
  constexpr int threads = 8;
  std::vector<std::shared_ptr<plugin::Library>> loaded(threads);
  std::atomic<int> ready{0};
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i)
    pool.emplace_back([&, i] {
      ready.fetch_add(1);
      while (ready.load() < threads) std::this_thread::yield();
      loaded[static_cast<std::size_t>(i)] = plugin::load(path);
    });
  for (auto& t : pool) t.join();
  for (const auto& lib : loaded) EXPECT_EQ(lib, loaded.front());
  EXPECT_EQ(markers.count("good", "initialize"), 1);
  // The same file through a symbolic link is the same plugin too (and keeps its first path).
  ScratchDir dir;
  fs::create_symlink(path, dir / "libxdev_plugin_link.so");
  EXPECT_EQ(plugin::load(dir / "libxdev_plugin_link.so"), loaded.front());
  EXPECT_EQ(loaded.front()->path(), path);
}

TEST(Load, AFreshLoadIsAPluginLoadActivityAndAReuseIsNot) {
  struct Recorder final : xdev::tools::Listener {
    std::mutex m;
    std::vector<std::string> seen;
    void begin(const xdev::tools::Activity& a) override {
      std::lock_guard lk(m);
      if (a.category == xdev::tools::Category::plugin_load) seen.push_back("begin " + std::string(a.name));
    }
    void end(const xdev::tools::Activity& a, const std::exception_ptr& error) override {
      std::lock_guard lk(m);
      if (a.category == xdev::tools::Category::plugin_load)
        seen.push_back(std::string(error ? "failed " : "end ") + std::string(a.name));
    }
  };
  const auto path = fixture_plugin("good", "good");
  auto recorder = std::make_shared<Recorder>();
  const auto subscription = xdev::tools::add_listener(recorder);
  auto lib = plugin::load(path);
  auto again = plugin::load(path);  // already loaded: no second load
  EXPECT_EQ(lib, again);
  const std::string canonical = std::filesystem::canonical(path).string();
  std::lock_guard lk(recorder->m);
  EXPECT_EQ(recorder->seen, (std::vector<std::string>{"begin " + canonical, "end " + canonical}));
}

// ---- lifetime --------------------------------------------------------------------------------

TEST(Unload, AfterTheLastOwnerDiesTheLibraryIsUnmapped) {
  Markers markers;
  const auto path = fixture_plugin("good", "good");
  auto lib = plugin::load(path);
  EXPECT_TRUE(is_mapped(path));
  std::shared_ptr<void> keep_alive = lib;  // what PluginBackend holds
  lib.reset();
  EXPECT_TRUE(is_mapped(path)) << "an object created through the plugin still holds it";
  keep_alive.reset();
  EXPECT_FALSE(is_mapped(path));
  // A fresh image is a fresh plugin: loading it again initializes it again.
  lib = plugin::load(path);
  EXPECT_EQ(markers.count("good", "initialize"), 2);
  lib.reset();
  EXPECT_FALSE(is_mapped(path));
}

TEST(Unload, NeverUnloadPluginStaysLoadedForTheProcess) {
  Markers markers;
  const auto path = fixture_plugin("neverunload", "neverunload");
  auto lib = plugin::load(path);
  EXPECT_TRUE(lib->never_unload());
  const plugin::Library* first = lib.get();
  const int initialized = markers.count("neverunload", "initialize");
  EXPECT_LE(initialized, 1);  // 0 when an earlier test of this process loaded it
  lib.reset();
  EXPECT_TRUE(is_mapped(path));
  lib = plugin::load(path);
  EXPECT_EQ(lib.get(), first);
  EXPECT_EQ(markers.count("neverunload", "initialize"), initialized);
}

TEST(Unload, ARuntimeOverThePluginKeepsItLoaded) {
  const auto path = fixture_plugin("good", "good");
  auto lib = plugin::load(path);
  {
    xdev::Runtime<plugin::PluginBackend> runtime({}, &lib->api(), lib);
    lib.reset();
    EXPECT_EQ(runtime.device_count(), 2u);
    EXPECT_EQ(runtime.device(1).name(), "GOOD:1");
    EXPECT_TRUE(is_mapped(path));
  }
  EXPECT_FALSE(is_mapped(path));
}

// ---- failure cases: each with its error, its markers, and its working neighbours ---------------

TEST(FailureCase, TextFileNamedLikeAPlugin) {
  const auto path = fixture_plugin("mixed", "text");
  EXPECT_THAT(error_of([&] { (void)plugin::load(path); }, xdev::errc::incompatible_abi),
              HasSubstr("cannot load xdev plugin \"" + path.string() +
                        "\": not an xdev plugin (not a shared library (no ELF header))"));
  EXPECT_FALSE(is_mapped(path));
  expect_mixed_neighbours_load();
}

TEST(FailureCase, EmptyFile) {
  const auto path = fixture_plugin("mixed", "empty");
  EXPECT_THAT(error_of([&] { (void)plugin::load(path); }, xdev::errc::incompatible_abi),
              HasSubstr("\"" + path.string() + "\": not an xdev plugin (an empty file)"));
  expect_mixed_neighbours_load();
}

TEST(FailureCase, EntrySymbolOfAnotherMajorIsNeverLoaded) {
  Markers markers;
  const auto path = fixture_plugin("mixed", "entry_v2");
  EXPECT_THAT(error_of([&] { (void)plugin::load(path); }, xdev::errc::incompatible_abi),
              HasSubstr("\"" + path.string() + "\": built for plugin ABI 2, this xdev speaks 1"));
  EXPECT_FALSE(is_mapped(path));
  EXPECT_EQ(markers.count("entry_v2", "constructor"), 0) << "the library was loaded";
  expect_mixed_neighbours_load();
  EXPECT_EQ(markers.count("entry_v2", "constructor"), 0) << "discovery loaded the library";
}

TEST(FailureCase, TableOfAnotherMajorIsRejectedBeforeInitialize) {
  Markers markers;
  const auto path = fixture_plugin("mixed", "major2");
  EXPECT_THAT(error_of([&] { (void)plugin::load(path); }, xdev::errc::incompatible_abi),
              HasSubstr("\"" + path.string() + "\": the plugin was built for ABI major 2 (ABI 2.0)"));
  EXPECT_EQ(markers.count("major2", "initialize"), 0);
  EXPECT_FALSE(is_mapped(path));
  expect_mixed_neighbours_load();
  EXPECT_EQ(markers.count("major2", "initialize"), 0);
}

TEST(FailureCase, OlderMinorIsRejectedBeforeInitialize) {
  Markers markers;
  const auto path = fixture_plugin("mixed", "minor0");
  EXPECT_THAT(error_of([&] { (void)plugin::load(path); }, xdev::errc::incompatible_abi),
              HasSubstr("\"" + path.string() + "\": the plugin was built for ABI 1.0, older than 1.1"));
  EXPECT_EQ(markers.count("minor0", "initialize"), 0);
  expect_mixed_neighbours_load();
  EXPECT_EQ(markers.count("minor0", "initialize"), 0);
}

TEST(FailureCase, NewerMinorWithALargerTableIsAccepted) {
  Markers markers;
  const auto lib = plugin::load(fixture_plugin("mixed", "newer_minor"));
  EXPECT_EQ(lib->name(), "NEWER_MINOR");
  EXPECT_EQ(lib->abi_minor(), unsigned{XDEV_ABI_MINOR} + 1);
  EXPECT_GT(lib->abi_minor(), unsigned{XDEV_ABI_MINOR});
  EXPECT_GT(lib->api().struct_size, sizeof(xdev_plugin_api));
  EXPECT_EQ(markers.count("newer_minor", "initialize"), 1);
  // The fields of the minors this xdev knows are read, `describe_device` (1.3) included.
  const plugin::PluginBackend backend(&lib->api(), lib);
  EXPECT_EQ(backend.device_description(1), "fixture device 1 of 2 (malloc'ed host memory)");
}

TEST(FailureCase, OldestAcceptedMinorIsAccepted) {
  Markers markers;
  const auto lib = plugin::load(fixture_plugin("binary", "binary11"));
  EXPECT_EQ(lib->name(), "BINARY11");
  EXPECT_EQ(lib->abi_minor(), unsigned{XDEV_ABI_MIN_MINOR});
  EXPECT_EQ(markers.count("binary11", "initialize"), 1);
}

TEST(FailureCase, LibraryWithoutEntrySymbolIsNeverLoaded) {
  Markers markers;
  const auto path = fixture_plugin("mixed", "unrelated");
  EXPECT_THAT(error_of([&] { (void)plugin::load(path); }, xdev::errc::incompatible_abi),
              HasSubstr("\"" + path.string() + "\": not an xdev plugin (exports no xdev_plugin_entry_v1)"));
  EXPECT_FALSE(is_mapped(path));
  expect_mixed_neighbours_load();
  EXPECT_EQ(markers.count("unrelated", "constructor"), 0) << "the library was loaded";
}

TEST(FailureCase, UnresolvedSymbolFailsAtLoadWithTheLoadersText) {
  Markers markers;
  const auto path = fixture_plugin("mixed", "unresolved");
  const auto what = error_of([&] { (void)plugin::load(path); }, xdev::errc::unavailable);
  EXPECT_THAT(what, HasSubstr("cannot load xdev plugin \"" + path.string() + "\": the dynamic loader refused it: "));
  EXPECT_THAT(what, HasSubstr("undefined symbol: xdev_test_missing_function"));
  EXPECT_FALSE(is_mapped(path));
  EXPECT_EQ(markers.count("unresolved", "constructor"), 0);
  EXPECT_EQ(markers.count("unresolved", "initialize"), 0);
  expect_mixed_neighbours_load();
}

TEST(FailureCase, InitializeFailureMakesThePluginUnusableWithItsMessage) {
  Markers markers;
  const auto path = fixture_plugin("mixed", "initialize_fails");
  const auto what = error_of([&] { (void)plugin::load(path); }, xdev::errc::unavailable);
  EXPECT_THAT(what, HasSubstr("cannot initialize xdev plugin INITFAIL (\"" + path.string() +
                              "\"): no INITFAIL "
                              "accelerator found (driver libinitfail.so.3 is missing)"));
  EXPECT_EQ(markers.count("initialize_fails", "initialize"), 1);
  EXPECT_FALSE(is_mapped(path));
  // Nothing was kept: asking again runs `initialize` again (on a fresh image) and fails again.
  (void)error_of([&] { (void)plugin::load(path); }, xdev::errc::unavailable);
  EXPECT_EQ(markers.count("initialize_fails", "initialize"), 2);
  expect_mixed_neighbours_load();
}

TEST(FailureCase, EntryReturningNoTable) {
  const auto path = fixture_plugin("mixed", "null_table");
  EXPECT_THAT(error_of([&] { (void)plugin::load(path); }, xdev::errc::incompatible_abi),
              HasSubstr("\"" + path.string() + "\": the plugin's entry returned no table (null)"));
  EXPECT_FALSE(is_mapped(path));
  expect_mixed_neighbours_load();
}

TEST(FailureCase, EntryThatThrows) {
  Markers markers;
  const auto path = fixture_plugin("mixed", "entry_throws");
  EXPECT_THAT(
      error_of([&] { (void)plugin::load(path); }, xdev::errc::incompatible_abi),
      HasSubstr("\"" + path.string() + "\": its entry threw a C++ exception across the C boundary (entry exploded)"));
  EXPECT_EQ(markers.count("entry_throws", "initialize"), 0);
  EXPECT_FALSE(is_mapped(path));
  expect_mixed_neighbours_load();
}

TEST(FailureCase, DuplicateNameFirstDirectoryWins) {
  Markers markers;
  CapturedDiagnostics diagnostics;
  const auto first = fixture_plugin("dup1", "dup");
  const auto second = fixture_plugin("dup2", "dup");
  auto found = plugin::discover(plugin::SearchPath{{fixture_dir("dup1"), fixture_dir("dup2")}});
  ASSERT_THAT(found.plugins(), SizeIs(1));
  EXPECT_EQ(found.find("DUP")->version(), "0.0.1-dup_first");
  const auto* skipped = candidate_of(found, second);
  ASSERT_NE(skipped, nullptr);
  EXPECT_EQ(skipped->status, plugin::CandidateStatus::duplicate);
  EXPECT_EQ(skipped->name, "DUP");
  const auto warnings = diagnostics.matching(plugin::Severity::warning, "DUP");
  ASSERT_THAT(warnings, SizeIs(1));
  EXPECT_EQ(warnings[0], "skipped \"" + second.string() + "\": plugin name DUP is already taken by \"" +
                             first.string() +
                             "\" (the first in the search path wins; not opened: its name note says DUP)");
  EXPECT_EQ(markers.count("dup_second", "initialize"), 0) << "the duplicate was initialized";
  EXPECT_EQ(markers.count("dup_second", "constructor"), 0) << "the duplicate was mapped: its name note says DUP";
  found = {};

  // The rule is the search order, not the file: reversed, the other one wins.
  found = plugin::discover(plugin::SearchPath{{fixture_dir("dup2"), fixture_dir("dup1")}});
  EXPECT_EQ(found.find("DUP")->version(), "0.0.1-dup_second");
  EXPECT_EQ(candidate_of(found, first)->status, plugin::CandidateStatus::duplicate);
}

// ---- discovery -------------------------------------------------------------------------------

TEST(Discover, MixedDirectoryGivesEveryCandidateAStatusAndOneDiagnostic) {
  Markers markers;
  CapturedDiagnostics diagnostics;
  const auto found = plugin::discover(plugin::SearchPath{{fixture_dir("mixed")}});
  std::vector<std::string> files;
  for (const auto& c : found.candidates) files.push_back(c.path.filename().string());
  EXPECT_THAT(
      files, ElementsAre("libxdev_plugin_alpha.so", "libxdev_plugin_empty.so", "libxdev_plugin_entry_throws.so",
                         "libxdev_plugin_entry_v2.so", "libxdev_plugin_initialize_fails.so", "libxdev_plugin_major2.so",
                         "libxdev_plugin_minor0.so", "libxdev_plugin_newer_minor.so", "libxdev_plugin_null_table.so",
                         "libxdev_plugin_text.so", "libxdev_plugin_unrelated.so", "libxdev_plugin_unresolved.so"));
  using S = plugin::CandidateStatus;
  const auto status_of = [&](std::string_view file) {
    return candidate_of(found, fixture_plugin("mixed", file))->status;
  };
  EXPECT_EQ(status_of("alpha"), S::loaded);
  EXPECT_EQ(status_of("newer_minor"), S::loaded);
  EXPECT_EQ(status_of("empty"), S::not_a_plugin);
  EXPECT_EQ(status_of("text"), S::not_a_plugin);
  EXPECT_EQ(status_of("unrelated"), S::not_a_plugin);
  EXPECT_EQ(status_of("entry_v2"), S::other_abi);
  for (const char* failed : {"entry_throws", "initialize_fails", "major2", "minor0", "null_table", "unresolved"}) {
    const auto* c = candidate_of(found, fixture_plugin("mixed", failed));
    EXPECT_EQ(c->status, S::failed) << failed;
    EXPECT_TRUE(c->error) << failed;
    // Exactly one warning per failed candidate, and it names the file.
    EXPECT_THAT(diagnostics.matching(plugin::Severity::warning, c->path.string()), SizeIs(1)) << failed;
  }
  EXPECT_EQ(candidate_of(found, fixture_plugin("mixed", "initialize_fails"))->name, "INITFAIL");
  EXPECT_EQ(candidate_of(found, fixture_plugin("mixed", "entry_v2"))->error, xdev::errc::incompatible_abi);
  EXPECT_THAT(diagnostics.matching(plugin::Severity::warning, fixture_plugin("mixed", "entry_v2").string()), SizeIs(1));
  // Files that are not plugins: verbose only.
  for (const char* quiet : {"empty", "text", "unrelated"}) {
    EXPECT_THAT(diagnostics.matching(plugin::Severity::warning, fixture_plugin("mixed", quiet).string()), IsEmpty());
    EXPECT_THAT(diagnostics.matching(plugin::Severity::verbose, fixture_plugin("mixed", quiet).string()), SizeIs(1));
  }
  EXPECT_EQ(markers.count("major2", "initialize"), 0);
  EXPECT_EQ(markers.count("minor0", "initialize"), 0);
  EXPECT_EQ(markers.count("unresolved", "constructor"), 0);
  EXPECT_EQ(markers.count("unrelated", "constructor"), 0);
  EXPECT_EQ(markers.count("entry_v2", "constructor"), 0);
  EXPECT_EQ(markers.count("alpha", "initialize"), 1);

  const std::string report = found.report();
  EXPECT_THAT(report, HasSubstr("plugin search path:\n  " + fixture_dir("mixed").string() + " (program)\n"));
  EXPECT_THAT(report, HasSubstr("  loaded        " + fixture_plugin("mixed", "alpha").string() +
                                ": ALPHA 0.0.1-alpha (ABI " + std::to_string(XDEV_ABI_MAJOR) + "." +
                                std::to_string(XDEV_ABI_MINOR) + ") on \"malloc'ed host memory, 2 devices\"\n"));
  EXPECT_THAT(report, HasSubstr("  not a plugin  " + fixture_plugin("mixed", "text").string() +
                                ": not a shared library (no ELF header)\n"));
  EXPECT_THAT(report, HasSubstr("  other ABI     " + fixture_plugin("mixed", "entry_v2").string() +
                                ": built for plugin ABI 2, this xdev speaks 1\n"));
  EXPECT_THAT(report, HasSubstr("  failed        " + fixture_plugin("mixed", "unresolved").string() +
                                ": the dynamic loader refused it: "));
}

TEST(Discover, HostileFilesAreNeverLoadedAndNeverCrashTheProcess) {
  ScratchDir dir;
  CapturedDiagnostics diagnostics;
  const auto good = dir / "libxdev_plugin_good.so";
  fs::copy_file(fixture_plugin("good", "good"), good);
  const auto bytes = read_bytes(good);
  ASSERT_GT(bytes.size(), 4096u);

  write_bytes(dir / "libxdev_plugin_truncated.so", bytes.data(), bytes.size() / 2);
  write_bytes(dir / "libxdev_plugin_header_only.so", bytes.data(), 20);
  write_bytes(dir / "libxdev_plugin_magic_only.so",
              "\x7f"
              "ELF",
              4);
  {
    // String tables that claim a terabyte: library_info alone would allocate (and zero) that much.
    auto patched = bytes;
    Elf64_Ehdr header;
    std::memcpy(&header, patched.data(), sizeof(header));
    int changed = 0;
    for (std::size_t i = 0; i < header.e_shnum; ++i) {
      Elf64_Shdr section;
      const std::size_t at = header.e_shoff + i * sizeof(Elf64_Shdr);
      std::memcpy(&section, patched.data() + at, sizeof(section));
      if (section.sh_type == SHT_STRTAB) {
        section.sh_size = std::uint64_t{1} << 40;
        std::memcpy(patched.data() + at, &section, sizeof(section));
        ++changed;
      }
    }
    ASSERT_GT(changed, 0);
    write_bytes(dir / "libxdev_plugin_huge_section.so", patched.data(), patched.size());
  }
  {
    // The section-name table made a NOBITS section (no bytes in the file) of 4 GiB: library_info
    // reads it whatever its type (found by the elf fuzz harness).
    auto patched = bytes;
    Elf64_Ehdr header;
    std::memcpy(&header, patched.data(), sizeof(header));
    Elf64_Shdr names;
    const std::size_t at = header.e_shoff + header.e_shstrndx * sizeof(Elf64_Shdr);
    std::memcpy(&names, patched.data() + at, sizeof(names));
    names.sh_type = SHT_NOBITS;
    names.sh_size = std::uint64_t{1} << 32;
    std::memcpy(patched.data() + at, &names, sizeof(names));
    write_bytes(dir / "libxdev_plugin_nobits_names.so", patched.data(), patched.size());
  }
  fs::create_directory(dir / "libxdev_plugin_directory.so");
  fs::create_symlink(dir / "does-not-exist.so", dir / "libxdev_plugin_dangling.so");
  fs::create_symlink(good, dir / "libxdev_plugin_symlink.so");
  fs::copy_file("/proc/self/exe", dir / "libxdev_plugin_executable.so");
  write_bytes(dir / "libxdev_plugin_empty.so", "", 0);
  write_bytes(dir / "not_a_candidate.txt", "x", 1);

  const auto found = plugin::discover(plugin::SearchPath{{dir.path()}});
  ASSERT_THAT(found.plugins(), SizeIs(1));
  EXPECT_EQ(found.plugins().front()->name(), "GOOD");
  EXPECT_EQ(candidate_of(found, dir / "not_a_candidate.txt"), nullptr);
  const auto reason_of = [&](std::string_view file) {
    const auto* c = candidate_of(found, dir / file);
    EXPECT_NE(c, nullptr) << file;
    if (c == nullptr) return std::string();
    EXPECT_EQ(c->status, plugin::CandidateStatus::not_a_plugin) << file;
    return c->reason;
  };
  EXPECT_THAT(reason_of("libxdev_plugin_truncated.so"), HasSubstr("truncated or corrupt ELF file"));
  EXPECT_THAT(reason_of("libxdev_plugin_header_only.so"), HasSubstr("truncated ELF file (20 bytes)"));
  EXPECT_THAT(reason_of("libxdev_plugin_magic_only.so"), HasSubstr("truncated ELF file (4 bytes)"));
  EXPECT_THAT(reason_of("libxdev_plugin_huge_section.so"), HasSubstr("ends beyond the file's"));
  EXPECT_THAT(reason_of("libxdev_plugin_nobits_names.so"),
              HasSubstr("corrupt ELF file: its section-name table (section "));
  EXPECT_EQ(reason_of("libxdev_plugin_directory.so"), "a directory");
  EXPECT_EQ(reason_of("libxdev_plugin_dangling.so"), "a dangling symbolic link");
  // A position-independent executable is an ELF shared object: it gets as far as its symbols.
  EXPECT_THAT(reason_of("libxdev_plugin_executable.so"),
              AnyOf(Eq("exports no xdev_plugin_entry_v1"), Eq("an executable, not a shared library")));
  EXPECT_EQ(reason_of("libxdev_plugin_empty.so"), "an empty file");
  // A symbolic link to a plugin is that plugin: here a duplicate of the file it points to.
  const auto* link = candidate_of(found, dir / "libxdev_plugin_symlink.so");
  ASSERT_NE(link, nullptr);
  EXPECT_EQ(link->status, plugin::CandidateStatus::duplicate);
  EXPECT_THAT(link->reason, HasSubstr(good.string()));

  // Asked for explicitly, each is an error, and still nothing is loaded.
  for (const char* file : {"libxdev_plugin_truncated.so", "libxdev_plugin_huge_section.so",
                           "libxdev_plugin_executable.so", "libxdev_plugin_empty.so"}) {
    EXPECT_THAT(error_of([&] { (void)plugin::load(dir / file); }, xdev::errc::incompatible_abi),
                HasSubstr("not an xdev plugin"))
        << file;
    EXPECT_FALSE(is_mapped(dir / file)) << file;
  }
  (void)error_of([&] { (void)plugin::load(dir / "libxdev_plugin_directory.so"); }, xdev::errc::invalid_argument);
  (void)error_of([&] { (void)plugin::load(dir / "libxdev_plugin_dangling.so"); }, xdev::errc::not_found);
}

TEST(Discover, MissingDirectoriesAreReportedAndSkipped) {
  CapturedDiagnostics diagnostics;
  const fs::path missing = "/nonexistent/xdev-plugins";
  const auto found = plugin::discover(plugin::SearchPath{{missing, fixture_dir("good")}});
  EXPECT_THAT(found.notes,
              ElementsAre("plugin directory \"" + missing.string() + "\" (program) does not exist: skipped"));
  EXPECT_THAT(diagnostics.matching(plugin::Severity::warning, missing.string()), SizeIs(1));
  EXPECT_NE(found.find("GOOD"), nullptr);

  // A missing installed directory is normal for a package without plugins: verbose only.
  CapturedDiagnostics installed;
  (void)plugin::discover(plugin::SearchPath::parse("", fs::path("/nonexistent/installed")));
  EXPECT_THAT(installed.matching(plugin::Severity::warning, "/nonexistent/installed"), IsEmpty());
  EXPECT_THAT(installed.matching(plugin::Severity::verbose, "/nonexistent/installed"), SizeIs(1));
}

TEST(Discover, UsesXdevPluginPathAndNeverTheCurrentDirectory) {
  CapturedDiagnostics diagnostics;
  const auto previous = fs::current_path();
  fs::current_path(fixture_dir("good"));
  {
    xdev_test::ScopedEnv env("XDEV_PLUGIN_PATH", std::string(":.:libxdev_plugin_good.so:"));
    const auto found = plugin::discover();
    EXPECT_THAT(found.candidates, IsEmpty());
    EXPECT_THAT(found.notes, SizeIs(4));
    EXPECT_THAT(diagnostics.matching(plugin::Severity::warning, "XDEV_PLUGIN_PATH entry"), SizeIs(4));
  }
  fs::current_path(previous);

  xdev_test::ScopedEnv env("XDEV_PLUGIN_PATH", fixture_dir("dup2").string() + ":" + fixture_dir("good").string());
  const auto found = plugin::discover();
  ASSERT_THAT(found.plugins(), SizeIs(2));
  EXPECT_EQ(found.plugins()[0]->name(), "DUP");
  EXPECT_EQ(found.plugins()[1]->name(), "GOOD");
  EXPECT_EQ(found.search_path.directories()[0].origin, plugin::SearchOrigin::environment);
}

// ---- find ------------------------------------------------------------------------------------

TEST(Find, LoadsTheNamedPluginAndInitializesNoOther) {
  Markers markers;
  CapturedDiagnostics quiet;
  const auto lib = plugin::find("NEWER_MINOR", plugin::SearchPath{{fixture_dir("mixed")}});
  EXPECT_EQ(lib->name(), "NEWER_MINOR");
  EXPECT_EQ(markers.count("newer_minor", "initialize"), 1);
  // Never initialized; ALPHA has a name note, so it was not even mapped (its constructor never ran).
  EXPECT_EQ(markers.count("alpha", "initialize"), 0);
  EXPECT_EQ(markers.count("alpha", "constructor"), 0);
  EXPECT_EQ(markers.count("initialize_fails", "initialize"), 0);
  const auto found = plugin::discover(plugin::SearchPath{{fixture_dir("mixed")}});
  EXPECT_EQ(markers.count("alpha", "constructor"), 1) << "discovery loads every plugin";
}

TEST(Find, APluginWhoseNameNoteSaysOtherwiseIsNeverMapped) {
  Markers markers;
  CapturedDiagnostics quiet;
  // dup1/ and dup2/ hold DUP, good/ GOOD: looking for GOOD reads DUP's name from its note.
  const auto lib = plugin::find("GOOD", plugin::SearchPath{{fixture_dir("dup1"), fixture_dir("good")}});
  EXPECT_EQ(lib->name(), "GOOD");
  EXPECT_EQ(markers.count("dup_first", "constructor"), 0) << "DUP's code ran to find GOOD";
}

TEST(Find, ThePluginsOwnInitializeErrorIsTheError) {
  CapturedDiagnostics quiet;
  const auto what = error_of([] { (void)plugin::find("INITFAIL", plugin::SearchPath{{fixture_dir("mixed")}}); },
                             xdev::errc::unavailable);
  EXPECT_THAT(what, HasSubstr("cannot initialize xdev plugin INITFAIL"));
  EXPECT_THAT(what, HasSubstr("no INITFAIL accelerator found"));
}

TEST(Find, UnknownNameListsWhatWasFoundAndWhatFailed) {
  CapturedDiagnostics quiet;
  const auto what =
      error_of([] { (void)plugin::find("NOPE", plugin::SearchPath{{fixture_dir("mixed")}}); }, xdev::errc::not_found);
  EXPECT_THAT(what, HasSubstr("no xdev plugin named \"NOPE\" in the plugin search path \"" +
                              fixture_dir("mixed").string() + "\""));
  EXPECT_THAT(what, HasSubstr("found: ALPHA, INITFAIL, NEWER_MINOR"));
  EXPECT_THAT(what, HasSubstr("undefined symbol: xdev_test_missing_function"));
  EXPECT_THAT(what, HasSubstr("built for plugin ABI 2, this xdev speaks 1"));
}

// ---- diagnostics -----------------------------------------------------------------------------

TEST(Diagnostics, DefaultSinkPrintsWarningsAndErrorsAsPrefixedLines) {
  ::testing::internal::CaptureStderr();
  plugin::default_diagnostic_sink({plugin::Severity::verbose, "not shown"});
  plugin::default_diagnostic_sink({plugin::Severity::info, "not shown either"});
  plugin::default_diagnostic_sink({plugin::Severity::warning, "skipped \"/p/libx.so\": why"});
  plugin::default_diagnostic_sink({plugin::Severity::error, "plugin X: broken"});
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "xdev: skipped \"/p/libx.so\": why\nxdev: plugin X: broken\n");
}

TEST(Diagnostics, SetSinkReturnsThePreviousOne) {
  int calls = 0;
  auto previous = plugin::set_diagnostic_sink([&](const plugin::Diagnostic&) { ++calls; });
  EXPECT_FALSE(previous) << "the default sink is reported as an empty function";
  (void)plugin::discover(plugin::SearchPath{{"/nonexistent/xdev-plugins"}});
  EXPECT_EQ(calls, 1);
  auto mine = plugin::set_diagnostic_sink(previous);
  EXPECT_TRUE(mine);
}

}  // namespace
