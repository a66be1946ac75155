// xdev::plugin::check_table (<xdev/plugin/plugin_backend.hpp>): the ABI rules a plugin table must
// pass before anything but its entry runs, on altered copies of REF's table; and how the host reads
// `describe_device` (ABI 1.3), `device_properties` (ABI 1.8) and XDEV_PLUGIN_HOST_MEMORY (ABI 1.9)
// from tables of each size and minor.
#include <xdev/plugin/abi.h>
#include <xdev/any/any_device.hpp>
#include <xdev/any/kernel.hpp>
#include <xdev/any/pinned.hpp>
#include <xdev/core/metrics.hpp>
#include <xdev/device/runtime.hpp>
#include <xdev/ops/elementwise.hpp>
#include <xdev/plugin/plugin_backend.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "plugin_abi_support.hpp"

namespace {

using ::testing::HasSubstr;

void expect_rejected(const xdev_plugin_api* t, xdev::errc code, std::initializer_list<std::string> parts) {
  try {
    xdev::plugin::check_table(t, "/plugins/libref.so");
    ADD_FAILURE() << "the table was accepted";
  } catch (const xdev::error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_THAT(e.what(), HasSubstr("/plugins/libref.so: "));
    for (const auto& p : parts) EXPECT_THAT(e.what(), HasSubstr(p));
  }
}

class CheckTable : public ::testing::Test {
 protected:
  plugin_abi_test::Loaded ref = plugin_abi_test::load(plugin_abi_test::ref_plugin, false);
  xdev_plugin_api t = *ref.api;
};

TEST_F(CheckTable, TheReferencePluginsTablePasses) {
  EXPECT_NO_THROW(xdev::plugin::check_table(ref.api, "REF"));
}

TEST_F(CheckTable, ANullTableIsRejected) {
  expect_rejected(nullptr, xdev::errc::incompatible_abi, {"no table"});
}

TEST_F(CheckTable, ATableSmallerThanV11IsRejectedALargerOneOfANewerMinorAccepted) {
  static_assert(xdev::plugin::detail::table_size_v1_1 == offsetof(xdev_plugin_api, describe_device) &&
                    xdev::plugin::detail::table_size_v1_1 < sizeof(xdev_plugin_api),
                "a 1.1 or 1.2 table ends before describe_device, which 1.3 appended");
  t.struct_size = 200;
  expect_rejected(&t, xdev::errc::incompatible_abi,
                  {"xdev_plugin_api of ABI 1." + std::to_string(XDEV_ABI_MINOR),
                   "expected at least " + std::to_string(xdev::plugin::detail::table_size_v1_1) + " bytes, got 200"});
  t.struct_size = xdev::plugin::detail::table_size_v1_1 - 1;
  expect_rejected(&t, xdev::errc::incompatible_abi, {"got " + std::to_string(t.struct_size)});
  t.struct_size = 8;  // not even the versions
  expect_rejected(&t, xdev::errc::incompatible_abi, {"got 8"});

  struct {
    xdev_plugin_api api;
    void* entry_of_a_newer_minor;
  } larger{*ref.api, nullptr};
  larger.api.struct_size = sizeof larger;
  larger.api.abi_minor = XDEV_ABI_MINOR + 1;
  EXPECT_NO_THROW(xdev::plugin::check_table(&larger.api, "newer"));
}

TEST_F(CheckTable, EveryMinorFromTheOldestSupportedOnIsAccepted) {
  static_assert(XDEV_ABI_MIN_MINOR == 1 && XDEV_ABI_MINOR == 13,
                "ABI 1.1 (before binary min/max), 1.2 (before describe_device), 1.3 (before exp), 1.4 (before "
                "the queues), 1.5 (before the markers), 1.6 (before device times; same table), 1.7 (before "
                "device properties), 1.8 (before the host-memory flag and the kernel entries), 1.9 (before "
                "kernel windows; same table), 1.10 (before strided transfers), 1.11 (before op windows) and "
                "1.12 (before the device type; same table) are still accepted");
  for (std::uint32_t minor = XDEV_ABI_MIN_MINOR; minor <= XDEV_ABI_MINOR + 1; ++minor) {
    t.abi_minor = minor;
    t.struct_size = sizeof(xdev_plugin_api);
    EXPECT_NO_THROW(xdev::plugin::check_table(&t, "x")) << "ABI 1." << minor;
    if (minor >= xdev::plugin::device_properties_minor) continue;
    // the size of that minor's table
    t.struct_size = minor >= xdev::plugin::markers_minor           ? xdev::plugin::detail::table_size_v1_6
                    : minor >= xdev::plugin::queues_minor          ? xdev::plugin::detail::table_size_v1_5
                    : minor >= xdev::plugin::exp_minor             ? xdev::plugin::detail::table_size_v1_4
                    : minor >= xdev::plugin::describe_device_minor ? xdev::plugin::detail::table_size_v1_3
                                                                   : xdev::plugin::detail::table_size_v1_1;
    EXPECT_NO_THROW(xdev::plugin::check_table(&t, "x")) << "ABI 1." << minor << " of its own size";
  }
}

TEST_F(CheckTable, AnotherMajorOrAnOlderMinorIsRejectedNamingBoth) {
  t.abi_major = XDEV_ABI_MAJOR + 1;
  expect_rejected(&t, xdev::errc::incompatible_abi,
                  {"ABI major " + std::to_string(XDEV_ABI_MAJOR + 1),
                   "accepts ABI " + std::to_string(XDEV_ABI_MAJOR) + "." + std::to_string(XDEV_ABI_MIN_MINOR)});
  t = *ref.api;
  t.abi_minor = XDEV_ABI_MIN_MINOR - 1;
  expect_rejected(&t, xdev::errc::incompatible_abi,
                  {"ABI " + std::to_string(XDEV_ABI_MAJOR) + "." + std::to_string(XDEV_ABI_MIN_MINOR - 1), "older"});
}

TEST_F(CheckTable, ANameMustBeUpperCase) {
  t.name = nullptr;
  expect_rejected(&t, xdev::errc::invalid_argument, {"no name"});
  for (const char* bad : {"", "ref", "1REF", "RE-F", "RE F"}) {
    t.name = bad;
    // append(), not operator+ on a literal: g++ 12 -O3 reports that as -Wrestrict (GCC bug 105329).
    expect_rejected(&t, xdev::errc::invalid_argument,
                    {std::string(1, '"').append(bad).append("\" is not accepted"), "[A-Z][A-Z0-9_]*"});
  }
  t.name = "REF_2";
  EXPECT_NO_THROW(xdev::plugin::check_table(&t, "x"));
}

TEST_F(CheckTable, ANullRequiredEntryIsRejectedNamingIt) {
  t.execute = nullptr;
  expect_rejected(&t, xdev::errc::incompatible_abi, {"plugin REF", "`execute`"});
  t = *ref.api;
  t.initialize = nullptr;
  expect_rejected(&t, xdev::errc::incompatible_abi, {"`initialize`"});
  t = *ref.api;  // optional entries may be null
  t.op_dtypes = nullptr;
  t.fill = nullptr;
  EXPECT_NO_THROW(xdev::plugin::check_table(&t, "x"));
}

// ---- describe_device: read only from a 1.3 (or newer) table whose struct_size covers it ----------

using xdev::plugin::PluginBackend;

std::atomic<int> trap_calls{0};

// Stands in for a field the host must not read: counts the calls it should never get.
xdev_status describe_trap(void*, std::uint64_t, const char** out, xdev_error*) {
  ++trap_calls;
  *out = "read past what the table's minor or struct_size allows";
  return XDEV_OK;
}

xdev_status describe_text(void*, std::uint64_t device, const char** out, xdev_error*) {
  static const char* const texts[] = {"test device 0, of a hand-filled 1.3 table", "test device 1, likewise"};
  *out = texts[device];
  return XDEV_OK;
}

xdev_status describe_null(void*, std::uint64_t, const char** out, xdev_error*) {
  *out = nullptr;
  return XDEV_OK;
}

xdev_status describe_fails(void*, std::uint64_t, const char**, xdev_error* err) {
  err->set(err->context, XDEV_ERR_UNAVAILABLE, "the board is asleep");
  return XDEV_ERR_UNAVAILABLE;
}

// A copy of the first `size` bytes of `table` that ends where an inaccessible page begins: reading
// any byte past `size` faults.
class GuardedTable {
 public:
  GuardedTable(const xdev_plugin_api& table, std::size_t size)
      : page_(static_cast<std::size_t>(::sysconf(_SC_PAGESIZE))) {
    mem_ = ::mmap(nullptr, 2 * page_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem_ == MAP_FAILED) throw std::runtime_error("mmap failed");
    if (::mprotect(static_cast<char*>(mem_) + page_, page_, PROT_NONE) != 0)
      throw std::runtime_error("mprotect failed");
    start_ = static_cast<char*>(mem_) + page_ - size;
    std::memcpy(start_, &table, size);
  }
  GuardedTable(const GuardedTable&) = delete;
  GuardedTable& operator=(const GuardedTable&) = delete;
  ~GuardedTable() { ::munmap(mem_, 2 * page_); }
  [[nodiscard]] const xdev_plugin_api* api() const noexcept { return reinterpret_cast<const xdev_plugin_api*>(start_); }

 private:
  std::size_t page_;
  void* mem_ = nullptr;
  char* start_ = nullptr;
};

template <class F>
void expect_error(xdev::errc code, F&& f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "no exception was thrown";
  } catch (const xdev::error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_THAT(e.what(), HasSubstr(part));
  }
}

class DescribeDevice : public ::testing::Test {
 protected:
  void SetUp() override { trap_calls = 0; }
  plugin_abi_test::Loaded ref = plugin_abi_test::load(plugin_abi_test::ref_plugin);
  xdev_plugin_api t = *ref.api;
};

TEST_F(DescribeDevice, ATableOfV12SizeIsAcceptedAndItsDevicesHaveNoDescription) {
  static_assert(xdev::plugin::detail::table_size_v1_1 % alignof(xdev_plugin_api) == 0);
  for (std::uint32_t minor : {2u, 3u}) {  // 3: a table claiming 1.3 that ends before the field
    xdev_plugin_api header = t;
    header.abi_minor = minor;
    header.struct_size = xdev::plugin::detail::table_size_v1_1;
    const GuardedTable table(header, xdev::plugin::detail::table_size_v1_1);
    EXPECT_NO_THROW(xdev::plugin::check_table(table.api(), "1.2-sized")) << "ABI 1." << minor;
    {
      const PluginBackend b(table.api(), ref.library);
      EXPECT_EQ(b.device_description(0), "") << "ABI 1." << minor;
    }
    xdev::Runtime<PluginBackend> rt({}, table.api(), ref.library);
    EXPECT_EQ(xdev::AnyDevice(rt.device(1)).description(), "") << "ABI 1." << minor;
    EXPECT_EQ(rt.device(0).description(), "") << "ABI 1." << minor;
  }
}

TEST_F(DescribeDevice, ATableOfAnOlderMinorIsNotReadForItEvenWhenLargeEnough) {
  t.abi_minor = 2;  // the full size, and an entry: still a 1.2 table
  t.describe_device = &describe_trap;
  const PluginBackend b(&t, ref.library);
  EXPECT_EQ(b.device_description(0), "");
  EXPECT_EQ(trap_calls, 0);
}

TEST_F(DescribeDevice, ATableOfV13GivesTheTextOfItsEntry) {
  ASSERT_GE(t.abi_minor, 3u);
  EXPECT_EQ(t.describe_device, nullptr) << "REF has no device_description";
  {
    const PluginBackend b(&t, ref.library);
    EXPECT_EQ(b.device_description(1), "") << "a null entry: no description";
  }
  t.describe_device = &describe_text;
  xdev::Runtime<PluginBackend> rt({}, &t, ref.library);
  EXPECT_EQ(rt.backend().device_description(0), "test device 0, of a hand-filled 1.3 table");
  EXPECT_EQ(rt.device(1).description(), "test device 1, likewise");
  EXPECT_EQ(xdev::AnyDevice(rt.device(1)).description(), "test device 1, likewise");
  expect_error(
      xdev::errc::invalid_argument, [&] { (void)rt.backend().device_description(2); },
      "REF: describe_device: device 2 is out of range [0, 2)");

  t.describe_device = &describe_null;
  const PluginBackend null_text(&t, ref.library);
  EXPECT_EQ(null_text.device_description(0), "") << "a null text: no description";
}

TEST_F(DescribeDevice, APluginErrorIsAnXdevError) {
  t.describe_device = &describe_fails;
  xdev::Runtime<PluginBackend> rt({}, &t, ref.library);
  expect_error(
      xdev::errc::unavailable, [&] { (void)rt.backend().device_description(0); },
      "REF: describe_device: the board is asleep");
  expect_error(
      xdev::errc::unavailable, [&] { (void)xdev::AnyDevice(rt.device(1)).description(); },
      "REF: describe_device: the board is asleep");
}

// ---- exp: read only from a 1.4 (or newer) table whose struct_size covers it -----------------------

std::atomic<int> exp_calls{0};

// A plugin's `exp` entry that completes at once with success (it writes nothing).
xdev_status exp_entry(void*, std::uint64_t, const xdev_exp_args* args, const xdev_completion* done, xdev_error*) {
  ++exp_calls;
  if (args == nullptr || args->struct_size < sizeof(xdev_exp_args)) return XDEV_ERR_INVALID_ARGUMENT;
  done->complete(done->context, XDEV_OK, nullptr);
  return XDEV_OK;
}

class ExpEntry : public ::testing::Test {
 protected:
  void SetUp() override {
    exp_calls = 0;
    t.exp = &exp_entry;
    t.op_dtypes = nullptr;  // every dtype for every entry the table has
  }
  // Runs ops::exp on device 0 of a runtime over `api`; returns how often the fallback ran it.
  std::uint64_t run_exp(const xdev_plugin_api* api) {
    auto& fallback = xdev::metrics::counter("fallback.exp");
    const auto before = fallback.value();
    xdev::Runtime<PluginBackend> rt({}, api, ref.library);
    auto x = xdev::empty<float>(rt.device(0), {4});
    xdev::ops::exp(rt.device(0), x, x).get();
    return fallback.value() - before;
  }
  plugin_abi_test::Loaded ref = plugin_abi_test::load(plugin_abi_test::ref_plugin);
  xdev_plugin_api t = *ref.api;
};

TEST_F(ExpEntry, ATableOfV14RunsItsEntry) {
  ASSERT_GE(t.abi_minor, xdev::plugin::exp_minor);
  EXPECT_TRUE(PluginBackend(&t, ref.library).implements(xdev::ops::OpKind::exp, xdev::DType::f32, xdev::DType::f32));
  EXPECT_EQ(run_exp(&t), 0u);
  EXPECT_EQ(exp_calls, 1);
}

TEST_F(ExpEntry, ATableOfV13SizeRunsExpThroughTheFallbackAndIsNotReadPastItsEnd) {
  xdev_plugin_api header = t;
  header.abi_minor = 3;
  header.struct_size = xdev::plugin::detail::table_size_v1_3;
  const GuardedTable table(header, xdev::plugin::detail::table_size_v1_3);
  EXPECT_NO_THROW(xdev::plugin::check_table(table.api(), "1.3-sized"));
  EXPECT_FALSE(
      PluginBackend(table.api(), ref.library).implements(xdev::ops::OpKind::exp, xdev::DType::f32, xdev::DType::f32));
  EXPECT_EQ(run_exp(table.api()), 1u);
  EXPECT_EQ(exp_calls, 0);
}

TEST_F(ExpEntry, ATableOfAnOlderMinorIsNotReadForItEvenWhenLargeEnough) {
  t.abi_minor = 3;  // the full size, and an entry: still a 1.3 table
  EXPECT_EQ(run_exp(&t), 1u);
  EXPECT_EQ(exp_calls, 0);
}

TEST_F(ExpEntry, ANullEntryRunsTheFallback) {
  t.exp = nullptr;
  EXPECT_EQ(run_exp(&t), 1u);
}

// ---- ABI 1.5: native queues -------------------------------------------------------------------

std::atomic<int> queues_created{0};
std::atomic<int> queues_destroyed{0};
std::atomic<int> binds{0};
std::atomic<int> unbinds{0};

xdev_status create_queue_entry(void*, std::uint64_t, std::uint64_t* out, xdev_error*) {
  *out = static_cast<std::uint64_t>(++queues_created) + 100;
  return XDEV_OK;
}
void destroy_queue_entry(void*, std::uint64_t, std::uint64_t) {
  ++queues_destroyed;
}
void bind_queue_entry(void*, std::uint64_t, std::uint64_t q) {
  ++(q == 0 ? unbinds : binds);
}

class QueueEntries : public ::testing::Test {
 protected:
  void SetUp() override {
    queues_created = queues_destroyed = binds = unbinds = 0;
    t.create_queue = &create_queue_entry;
    t.destroy_queue = &destroy_queue_entry;
    t.bind_queue = &bind_queue_entry;
  }
  // Runs a few host tasks on a new stream of device 0 over `api`; they must come back in order.
  void run_stream(const xdev_plugin_api* api) {
    xdev::Runtime<PluginBackend> rt({}, api, ref.library);
    auto s = rt.device(0).make_stream();
    std::vector<xdev::Future<int>> fs;
    for (int i = 0; i < 8; ++i) fs.push_back(s.execute([i] { return i; }));
    for (int i = 0; i < 8; ++i) EXPECT_EQ(fs[static_cast<std::size_t>(i)].get(), i);
  }
  plugin_abi_test::Loaded ref = plugin_abi_test::load(plugin_abi_test::ref_plugin);
  xdev_plugin_api t = *ref.api;
};

TEST_F(QueueEntries, ATableOfV15WithTheThreeEntriesGetsAQueuePerStreamBoundAroundEachStart) {
  ASSERT_GE(t.abi_minor, xdev::plugin::queues_minor);
  EXPECT_TRUE(PluginBackend(&t, ref.library).native_queues());
  run_stream(&t);
  EXPECT_GE(queues_created.load(), 2);  // the default stream's of each device, and the new stream's
  EXPECT_EQ(queues_destroyed.load(), queues_created.load()) << "a queue outlived its runtime";
  EXPECT_EQ(binds.load(), 8);
  EXPECT_EQ(unbinds.load(), 8);
}

TEST_F(QueueEntries, ATableOfV14SizeKeepsHostOrderingAndIsNotReadPastItsEnd) {
  xdev_plugin_api header = t;
  header.abi_minor = 4;
  header.struct_size = xdev::plugin::detail::table_size_v1_4;
  const GuardedTable table(header, xdev::plugin::detail::table_size_v1_4);
  EXPECT_NO_THROW(xdev::plugin::check_table(table.api(), "1.4-sized"));
  EXPECT_FALSE(PluginBackend(table.api(), ref.library).native_queues());
  run_stream(table.api());
  EXPECT_EQ(queues_created.load(), 0);
  EXPECT_EQ(binds.load(), 0);
}

TEST_F(QueueEntries, AnyNullEntryMeansNoQueues) {
  t.bind_queue = nullptr;
  EXPECT_FALSE(PluginBackend(&t, ref.library).native_queues());
  run_stream(&t);
  EXPECT_EQ(queues_created.load(), 0);
}

// ---- ABI 1.6: native markers ------------------------------------------------------------------

std::atomic<int> markers_recorded{0};
std::atomic<int> markers_released{0};
std::atomic<int> marker_waits{0};
std::atomic<std::uint64_t> last_waited{0};

// The REF plugin runs a device's work in order on its own threads, whatever queue is bound; this
// marker reports at once, which is enough to check what the host reads and calls.
xdev_status record_marker_entry(void*, std::uint64_t, const xdev_completion* done, std::uint64_t* out, xdev_error*) {
  *out = static_cast<std::uint64_t>(++markers_recorded) + 1000;
  done->complete(done->context, XDEV_OK, nullptr);
  return XDEV_OK;
}
xdev_status wait_marker_entry(void*, std::uint64_t, std::uint64_t m, xdev_error*) {
  ++marker_waits;
  last_waited = m;
  return XDEV_OK;
}
void release_marker_entry(void*, std::uint64_t, std::uint64_t) {
  ++markers_released;
}

class MarkerEntries : public QueueEntries {
 protected:
  void SetUp() override {
    QueueEntries::SetUp();
    markers_recorded = markers_released = marker_waits = 0;
    last_waited = 0;
    t.record_marker = &record_marker_entry;
    t.wait_marker = &wait_marker_entry;
    t.release_marker = &release_marker_entry;
  }
  // One stream waits for an event of another on device 0; the waiting stream's task must run.
  void run_wait(const xdev_plugin_api* api) {
    xdev::Runtime<PluginBackend> rt({}, api, ref.library);
    auto producer = rt.device(0).make_stream();
    auto consumer = rt.device(0).make_stream();
    auto work = producer.execute([] { return 1; });
    const xdev::Event e = producer.record();
    consumer.wait(e);
    EXPECT_EQ(consumer.execute([] { return 2; }).get(), 2);
    EXPECT_EQ(work.get(), 1);
    e.wait();
  }
};

TEST_F(MarkerEntries, ATableOfV16WithTheThreeEntriesRecordsMarkersAndReleasesEachOnce) {
  ASSERT_GE(t.abi_minor, xdev::plugin::markers_minor);
  EXPECT_TRUE(PluginBackend(&t, ref.library).native_markers());
  run_wait(&t);
  EXPECT_EQ(markers_recorded.load(), 1);
  EXPECT_LE(marker_waits.load(), 1) << "one wait at most (none when the event was ready by then)";
  if (marker_waits.load() == 1) {
    EXPECT_EQ(last_waited.load(), 1001u) << "the wait named another marker";
  }
  EXPECT_EQ(markers_released.load(), 1) << "a marker was not released, or released twice";
}

TEST_F(MarkerEntries, ATableOfV15SizeHasNoMarkersAndIsNotReadPastItsEnd) {
  xdev_plugin_api header = t;
  header.abi_minor = 5;
  header.struct_size = xdev::plugin::detail::table_size_v1_5;
  const GuardedTable table(header, xdev::plugin::detail::table_size_v1_5);
  EXPECT_NO_THROW(xdev::plugin::check_table(table.api(), "1.5-sized"));
  EXPECT_TRUE(PluginBackend(table.api(), ref.library).native_queues());
  EXPECT_FALSE(PluginBackend(table.api(), ref.library).native_markers());
  run_wait(table.api());
  EXPECT_EQ(markers_recorded.load(), 0);
  EXPECT_EQ(marker_waits.load(), 0);
}

TEST_F(MarkerEntries, AnyNullEntryOrNoQueuesMeansNoMarkers) {
  t.wait_marker = nullptr;
  EXPECT_FALSE(PluginBackend(&t, ref.library).native_markers());
  run_wait(&t);
  EXPECT_EQ(markers_recorded.load(), 0);
  t.wait_marker = &wait_marker_entry;
  t.create_queue = nullptr;
  EXPECT_FALSE(PluginBackend(&t, ref.library).native_markers()) << "markers without queues";
}

// ---- device_properties: read only from a 1.8 (or newer) table whose struct_size covers it --------

xdev_status properties_trap(void*, std::uint64_t, xdev_device_properties* out, xdev_error*) {
  ++trap_calls;
  out->name = "read past what the table's minor or struct_size allows";
  return XDEV_OK;
}

xdev_status properties_of_a_board(void*, std::uint64_t device, xdev_device_properties* out, xdev_error*) {
  // What the host passes: its own size, every field zero, the free memory unknown.
  if (out->struct_size != sizeof(xdev_device_properties) || out->name != nullptr || out->compute_units != 0 ||
      out->memory_free != UINT64_MAX)
    return XDEV_ERR_INVALID_ARGUMENT;
  out->name = device == 0 ? "board 0" : "board 1";
  out->vendor = "Example Corp";
  out->driver_version = "2.5";
  out->compute_units = 108;
  out->max_work_group_size = 1024;
  out->memory_total = std::uint64_t{1} << 34;
  out->memory_free = std::uint64_t{1} << 33;
  return XDEV_OK;  // architecture left null: unknown
}

xdev_status properties_fail(void*, std::uint64_t, xdev_device_properties*, xdev_error* err) {
  err->set(err->context, XDEV_ERR_UNAVAILABLE, "the board is asleep");
  return XDEV_ERR_UNAVAILABLE;
}

class DevicePropertiesEntry : public ::testing::Test {
 protected:
  void SetUp() override { trap_calls = 0; }
  plugin_abi_test::Loaded ref = plugin_abi_test::load(plugin_abi_test::ref_plugin);
  xdev_plugin_api t = *ref.api;
};

TEST_F(DevicePropertiesEntry, ATableOfV17SizeIsAcceptedAndItsPropertiesAreWhatXdevKnowsItself) {
  static_assert(xdev::plugin::detail::table_size_v1_6 % alignof(xdev_plugin_api) == 0);
  for (std::uint32_t minor : {6u, 7u, 8u}) {  // 8: a table claiming 1.8 that ends before the field
    xdev_plugin_api header = t;
    header.abi_minor = minor;
    header.struct_size = xdev::plugin::detail::table_size_v1_6;
    const GuardedTable table(header, xdev::plugin::detail::table_size_v1_6);
    EXPECT_NO_THROW(xdev::plugin::check_table(table.api(), "1.7-sized")) << "ABI 1." << minor;
    {
      const PluginBackend b(table.api(), ref.library);
      EXPECT_EQ(b.device_properties(0), xdev::DeviceProperties{}) << "ABI 1." << minor;
    }
    xdev::Runtime<PluginBackend> rt({}, table.api(), ref.library);
    const xdev::DeviceProperties p = xdev::AnyDevice(rt.device(1)).properties();
    EXPECT_EQ(p.name, "") << "ABI 1." << minor;
    EXPECT_FALSE(p.memory_free.has_value());
    EXPECT_FALSE(p.host_accessible) << "plugin memory is opaque to the host";
    EXPECT_EQ(p.supported_dtypes, xdev::AnyDevice(rt.device(1)).capability_set().supported_dtypes)
        << "xdev knows the dtypes";
  }
}

TEST_F(DevicePropertiesEntry, ATableOfAnOlderMinorIsNotReadForItEvenWhenLargeEnough) {
  t.abi_minor = 7;  // the full size, and an entry: still a 1.7 table
  t.device_properties = &properties_trap;
  const PluginBackend b(&t, ref.library);
  EXPECT_EQ(b.device_properties(0), xdev::DeviceProperties{});
  EXPECT_EQ(trap_calls, 0);
}

TEST_F(DevicePropertiesEntry, ATableOfV18GivesWhatItsEntryFills) {
  t.device_properties = &properties_of_a_board;
  xdev::Runtime<PluginBackend> rt({}, &t, ref.library);
  const xdev::DeviceProperties p = xdev::AnyDevice(rt.device(1)).properties();
  EXPECT_EQ(p.name, "board 1");
  EXPECT_EQ(p.vendor, "Example Corp");
  EXPECT_EQ(p.driver_version, "2.5");
  EXPECT_EQ(p.architecture, "") << "null: unknown";
  EXPECT_EQ(p.compute_units, 108u);
  EXPECT_EQ(p.max_work_group_size, 1024u);
  EXPECT_EQ(p.memory_total, std::size_t{1} << 34);
  EXPECT_EQ(p.memory_free, std::size_t{1} << 33);
  EXPECT_EQ(rt.device(0).properties().name, "board 0");
  expect_error(
      xdev::errc::invalid_argument, [&] { (void)rt.backend().device_properties(2); },
      "REF: device_properties: device 2 is out of range [0, 2)");
}

TEST_F(DevicePropertiesEntry, APluginErrorIsAnXdevError) {
  t.device_properties = &properties_fail;
  xdev::Runtime<PluginBackend> rt({}, &t, ref.library);
  expect_error(
      xdev::errc::unavailable, [&] { (void)xdev::AnyDevice(rt.device(1)).properties(); },
      "REF: device_properties: the board is asleep");
}

TEST_F(DevicePropertiesEntry, TheReferencePluginFillsItAndWritesOnlyWhatTheHostsStructCovers) {
  ASSERT_NE(ref.api->device_properties, nullptr) << "REF has device_properties";
  xdev::Runtime<PluginBackend> rt({}, ref.api, ref.library);
  const xdev::DeviceProperties p = rt.device(1).properties();
  EXPECT_EQ(p.name, "xdev reference device 1");
  EXPECT_EQ(p.vendor, "xdev");
  EXPECT_EQ(p.driver_version, "1.0.0");
  EXPECT_EQ(p.type, xdev::DeviceType::cpu) << "ABI 1.13's device_type";
  EXPECT_EQ(p.compute_units, 1u);
  EXPECT_GT(p.memory_total, 0u);
  ASSERT_TRUE(p.memory_free.has_value());
  EXPECT_GT(*p.memory_free, 0u);

  // A host whose struct ends before `architecture` (as a later field would be to an older host),
  // or before 1.13's `device_type` (a 1.12 host): the plugin writes nothing past it.
  for (const std::size_t covered :
       {offsetof(xdev_device_properties, architecture), offsetof(xdev_device_properties, device_type)}) {
    struct {
      xdev_device_properties props;
      unsigned char canary[8];
    } older{};
    std::memset(&older, 0xAB, sizeof older);
    older.props.struct_size = covered;
    xdev::plugin::detail::ErrorSink sink;
    ASSERT_EQ(ref.api->device_properties(rt.backend().native_handle(), 0, &older.props, &sink.c), XDEV_OK);
    EXPECT_EQ(older.props.struct_size, covered);
    EXPECT_STREQ(older.props.name, "xdev reference device 0");
    const auto* bytes = reinterpret_cast<const unsigned char*>(&older);
    for (std::size_t i = covered; i < sizeof older; ++i)
      EXPECT_EQ(bytes[i], 0xAB) << "byte " << i << " was written (host struct of " << covered << " bytes)";
  }
}

xdev_status properties_of_a_type(void*, std::uint64_t device, xdev_device_properties* out, xdev_error*) {
  out->device_type = device == 0 ? 2 : 42;  // 2: gpu; 42: a code of a newer minor
  return XDEV_OK;
}

TEST_F(DevicePropertiesEntry, TheDeviceTypeIsReadAndACodeThisXdevDoesNotKnowIsUnknown) {
  t.device_properties = &properties_of_a_type;
  xdev::Runtime<PluginBackend> rt({}, &t, ref.library);
  EXPECT_EQ(rt.device(0).properties().type, xdev::DeviceType::gpu);
  EXPECT_EQ(xdev::AnyDevice(rt.device(1)).properties().type, xdev::DeviceType::unknown);
  t.device_properties = &properties_of_a_board;  // a plugin that leaves it as the host passed it
  EXPECT_EQ(PluginBackend(&t, ref.library).device_properties(0).type, xdev::DeviceType::unknown);
}

// XDEV_PLUGIN_HOST_MEMORY (ABI 1.9): REF sets it; xdev believes it only from a 1.9 or newer table.
TEST(HostMemoryFlag, ReadOnlyFromATableOfV19AndThenKernelsRunOnThePluginsDevices) {
  const plugin_abi_test::Loaded ref = plugin_abi_test::load(plugin_abi_test::ref_plugin);
  ASSERT_NE(ref.api->flags & XDEV_PLUGIN_HOST_MEMORY, 0u);
  xdev_plugin_api t = *ref.api;
  for (std::uint32_t minor : {1u, 8u}) {
    t.abi_minor = minor;
    xdev::Runtime<PluginBackend> rt({}, &t, ref.library);
    const xdev::AnyDevice d(rt.device(0));
    EXPECT_FALSE(rt.backend().runtime_host_accessible()) << "ABI 1." << minor << " predates the flag";
    EXPECT_FALSE(d.host_accessible()) << "ABI 1." << minor;
    EXPECT_FALSE(d.runs_kernels()) << "ABI 1." << minor;
    EXPECT_FALSE(d.properties().host_accessible) << "ABI 1." << minor;
    auto b = d.allocate<float>(4);
    EXPECT_EQ(d.model().host_address(b.native_handle()), nullptr) << "ABI 1." << minor;
  }
  t.abi_minor = xdev::plugin::host_memory_minor;
  {
    xdev::Runtime<PluginBackend> rt({}, &t, ref.library);
    const xdev::AnyDevice d(rt.device(1));
    EXPECT_TRUE(d.host_accessible());
    EXPECT_TRUE(d.runs_kernels());
    EXPECT_TRUE(d.properties().host_accessible);
    auto b = d.allocate<std::int32_t>(3);
    auto* p = static_cast<std::int32_t*>(d.model().host_address(b.native_handle()));
    ASSERT_NE(p, nullptr);
    const auto handle = xdev::detail::unerase_handle<std::uint64_t>(b.native_handle());
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p), handle) << "the handle is the address";
    EXPECT_EQ(rt.backend().runtime_host_address(handle), static_cast<void*>(p));
    const std::vector<std::int32_t> in{7, 8, 9};
    d.default_stream().copy_to_device(std::span<const std::int32_t>(in), b).get();
    EXPECT_EQ(p[0] + p[1] + p[2], 24) << "the host reads what the plugin's copy wrote";
  }
  t.flags = 0;
  xdev::Runtime<PluginBackend> rt({}, &t, ref.library);
  EXPECT_FALSE(xdev::AnyDevice(rt.device(0)).host_accessible()) << "a 1.9 table without the flag";
}

// User kernels (ABI 1.9): read only from a 1.9 table that covers them and has all three entries.
std::atomic<int> kernels_created{0};
std::atomic<int> kernels_destroyed{0};
std::string last_kernel_source;
xdev_status create_kernel_entry(void*, const xdev_kernel_source* s, std::uint64_t* out, xdev_error*) {
  ++kernels_created;
  last_kernel_source.assign(s->source, s->source_size);
  EXPECT_STREQ(s->language, "OpenCL C");
  EXPECT_STREQ(s->entry, "k");
  EXPECT_EQ(s->param_count, 2u);
  EXPECT_EQ(s->params[1].kind, unsigned{XDEV_KERNEL_ARG_SCALAR});
  EXPECT_EQ(s->params[1].dtype, unsigned{XDEV_DTYPE_I64});
  *out = 77;
  return XDEV_OK;
}
xdev_status launch_kernel_entry(void*, std::uint64_t device, std::uint64_t kernel, const xdev_kernel_launch* l,
                                const xdev_completion* done, xdev_error*) {
  EXPECT_EQ(device, 1u);
  EXPECT_EQ(kernel, 77u);
  EXPECT_EQ(l->dims, 2u);
  EXPECT_EQ(l->global[0], 4u);
  EXPECT_EQ(l->global[1], 6u);
  EXPECT_EQ(l->local[0], 0u) << "no work-group: the plugin's choice";
  EXPECT_EQ(l->arg_count, 2u);
  EXPECT_EQ(l->args[1].scalar_bits, 5u);
  done->complete(done->context, XDEV_OK, nullptr);
  return XDEV_OK;
}
void destroy_kernel_entry(void*, std::uint64_t kernel) {
  EXPECT_EQ(kernel, 77u);
  ++kernels_destroyed;
}

class KernelEntries : public ::testing::Test {
 protected:
  void SetUp() override {
    kernels_created = 0;
    kernels_destroyed = 0;
    t.create_kernel = &create_kernel_entry;
    t.launch_kernel = &launch_kernel_entry;
    t.destroy_kernel = &destroy_kernel_entry;
  }
  static xdev::Kernel kernel() {
    return xdev::Kernel({.source = "__kernel void k(__global float* y, long n) {}",
                         .entry = "k",
                         .params = {xdev::KernelParam::buffer<float>(), xdev::KernelParam::scalar<std::int64_t>()}});
  }
  plugin_abi_test::Loaded ref = plugin_abi_test::load(plugin_abi_test::ref_plugin);
  xdev_plugin_api t = *ref.api;
};

TEST_F(KernelEntries, ATableOfV19CreatesLaunchesAndDestroysEachKernelOnce) {
  ASSERT_EQ(ref.api->create_kernel, nullptr) << "REF runs no source kernels";
  {
    xdev::Runtime<PluginBackend> rt({}, &t, ref.library);
    EXPECT_TRUE(rt.backend().runs_source_kernels());
    const xdev::AnyDevice d(rt.device(1));
    auto y = d.allocate<float>(24);
    {
      const xdev::Kernel k = kernel();
      const xdev::Kernel copy = k;
      k.launch(d.default_stream(), {4, 6}, {y, std::int64_t{5}}).get();
      copy.launch(d, {4, 6}, {y, std::int64_t{5}}).get();
      EXPECT_EQ(kernels_created.load(), 1) << "one kernel object per backend, shared by copies";
      EXPECT_EQ(last_kernel_source, "__kernel void k(__global float* y, long n) {}");
    }
    EXPECT_EQ(kernels_destroyed.load(), 1) << "destroyed with the last copy";
  }
}

TEST_F(KernelEntries, AnOlderTableOrAMissingEntryRunsNoSourceKernels) {
  t.abi_minor = 8;  // full size, entries set: still a 1.8 table
  EXPECT_FALSE(PluginBackend(&t, ref.library).runs_source_kernels());
  xdev_plugin_api header = t;
  header.abi_minor = 9;
  header.struct_size = xdev::plugin::detail::table_size_v1_8;
  const GuardedTable table(header, xdev::plugin::detail::table_size_v1_8);
  EXPECT_NO_THROW(xdev::plugin::check_table(table.api(), "1.8-sized"));
  EXPECT_FALSE(PluginBackend(table.api(), ref.library).runs_source_kernels()) << "a table that ends before them";
  t.abi_minor = 9;
  t.destroy_kernel = nullptr;
  xdev::Runtime<PluginBackend> rt({}, &t, ref.library);
  EXPECT_FALSE(rt.backend().runs_source_kernels()) << "all three or none";
  auto y = xdev::AnyDevice(rt.device(0)).allocate<float>(1);
  expect_error(
      xdev::errc::unimplemented,
      [&] {
        (void)kernel().launch(xdev::AnyDevice(rt.device(0)), {1}, {y, std::int64_t{1}});
      },
      "REF: the plugin does not run kernels given as source (asked for OpenCL C kernel \"k\")");
  EXPECT_EQ(kernels_created.load(), 0);
}

// Pinned host memory (ABI 1.9): read only from a 1.9 table with both entries; xdev gives ordinary
// memory otherwise, and gives the plugin's back after the work submitted before the drop.
std::atomic<int> host_allocs{0};
std::atomic<int> host_frees{0};
alignas(64) unsigned char host_block[256];
xdev_status allocate_host_entry(void*, std::uint64_t device, std::uint64_t bytes, void** out, xdev_error*) {
  EXPECT_EQ(device, 1u);
  EXPECT_LE(bytes, sizeof host_block);
  ++host_allocs;
  *out = host_block;
  return XDEV_OK;
}
void deallocate_host_entry(void*, std::uint64_t device, void* memory, std::uint64_t bytes) {
  EXPECT_EQ(device, 1u);
  EXPECT_EQ(memory, static_cast<void*>(host_block));
  EXPECT_EQ(bytes, 40u);
  ++host_frees;
}

TEST(PinnedEntries, ATableOfV19GivesItsMemoryAndTakesItBackOnceAnOlderOneGivesOrdinaryMemory) {
  host_allocs = 0;
  host_frees = 0;
  const plugin_abi_test::Loaded ref = plugin_abi_test::load(plugin_abi_test::ref_plugin);
  ASSERT_EQ(ref.api->allocate_host, nullptr) << "REF has no pinned memory";
  xdev_plugin_api t = *ref.api;
  t.allocate_host = &allocate_host_entry;
  t.deallocate_host = &deallocate_host_entry;
  {
    xdev::Runtime<PluginBackend> rt({}, &t, ref.library);
    EXPECT_TRUE(rt.backend().allocates_pinned());
    const xdev::AnyDevice d(rt.device(1));
    {
      auto p = xdev::pinned<float>(d, 10);
      EXPECT_TRUE(p.backend_allocated());
      EXPECT_EQ(static_cast<void*>(p.data()), static_cast<void*>(host_block));
    }
    d.synchronize();
    EXPECT_EQ(host_allocs.load(), 1);
    EXPECT_EQ(host_frees.load(), 1) << "given back once, after the device's work";
  }
  t.abi_minor = 8;  // full size, entries set: still a 1.8 table
  {
    xdev::Runtime<PluginBackend> rt({}, &t, ref.library);
    EXPECT_FALSE(rt.backend().allocates_pinned());
    auto p = xdev::pinned<float>(xdev::AnyDevice(rt.device(1)), 10);
    EXPECT_FALSE(p.backend_allocated());
  }
  t.abi_minor = 9;
  t.deallocate_host = nullptr;  // both or neither
  xdev::Runtime<PluginBackend> rt({}, &t, ref.library);
  EXPECT_FALSE(rt.backend().allocates_pinned());
  EXPECT_EQ(host_allocs.load(), 1);
}

// Strided transfers (ABI 1.11): read only from a 1.11 table that covers both entries and has both;
// a window's copy is then one call per region, else one plain copy per row, with the same result.
std::atomic<int> strided_reads{0};
std::atomic<int> strided_writes{0};
const std::byte* row_of(xdev_memory m, const xdev_strided_region& r, std::uint64_t i) {
  return reinterpret_cast<const std::byte*>(static_cast<std::uintptr_t>(m)) + r.offset + i / r.rows * r.slice_pitch +
         i % r.rows * r.row_pitch;
}
xdev_status strided_to_host_entry(void*, std::uint64_t, xdev_memory src, const xdev_strided_region* r, void* dst,
                                  const xdev_completion* done, xdev_error*) {
  ++strided_reads;
  EXPECT_EQ(r->struct_size, sizeof(xdev_strided_region));
  for (std::uint64_t i = 0; i < r->rows * r->slices; ++i)
    std::memcpy(static_cast<std::byte*>(dst) + i * r->row_bytes, row_of(src, *r, i), r->row_bytes);
  done->complete(done->context, XDEV_OK, nullptr);
  return XDEV_OK;
}
xdev_status strided_to_device_entry(void*, std::uint64_t, const void* src, xdev_memory dst,
                                    const xdev_strided_region* r, const xdev_completion* done, xdev_error*) {
  ++strided_writes;
  for (std::uint64_t i = 0; i < r->rows * r->slices; ++i)
    std::memcpy(const_cast<std::byte*>(row_of(dst, *r, i)), static_cast<const std::byte*>(src) + i * r->row_bytes,
                r->row_bytes);
  done->complete(done->context, XDEV_OK, nullptr);
  return XDEV_OK;
}

std::atomic<int> strided_copies{0};
xdev_status strided_between_entry(void*, std::uint64_t, xdev_memory src, const xdev_strided_region* sr, std::uint64_t,
                                  xdev_memory dst, const xdev_strided_region* dr, const xdev_completion* done,
                                  xdev_error*) {
  ++strided_copies;
  for (std::uint64_t i = 0; i < sr->rows * sr->slices; ++i)
    std::memmove(const_cast<std::byte*>(row_of(dst, *dr, i)), row_of(src, *sr, i), sr->row_bytes);
  done->complete(done->context, XDEV_OK, nullptr);
  return XDEV_OK;
}

// Reads columns [1, 3) of a [6, 5] iota matrix on `api`'s device 0, writes columns [3, 5), then
// copies column 0 into column 2; returns the strided calls made (to the host and back, between).
std::pair<int, int> strided_round_trip(const xdev_plugin_api* api, const std::shared_ptr<void>& library) {
  strided_reads = 0;
  strided_writes = 0;
  strided_copies = 0;
  {
    xdev::Runtime<PluginBackend> rt({}, api, library);
    const xdev::AnyDevice d(rt.device(0));
    auto a = xdev::empty<float>(d, {6, 5});
    std::vector<float> v(30);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
    d.copy_to_device(std::span<const float>(v), a).get();
    std::vector<float> cols(12);
    d.copy_to_host(xdev::slice(a, xdev::all, {1, 3}), std::span<float>(cols)).get();
    for (std::size_t i = 0; i < cols.size(); ++i) EXPECT_EQ(cols[i], static_cast<float>(i / 2 * 5 + 1 + i % 2)) << i;
    std::vector<float> patch(12);
    for (std::size_t i = 0; i < patch.size(); ++i) patch[i] = -static_cast<float>(i);
    d.copy_to_device(std::span<const float>(patch), xdev::slice(a, xdev::all, {3, 5})).get();
    std::vector<float> after(30);
    d.copy_to_host(a, std::span<float>(after)).get();
    for (std::size_t i = 0; i < after.size(); ++i)
      EXPECT_EQ(after[i], i % 5 >= 3 ? patch[i / 5 * 2 + i % 5 - 3] : v[i]) << i;
    d.copy(xdev::slice(a, xdev::all, {0, 1}), xdev::slice(a, xdev::all, {2, 3})).get();
    d.copy_to_host(a, std::span<float>(after)).get();
    for (std::size_t r = 0; r < 6; ++r) EXPECT_EQ(after[r * 5 + 2], v[r * 5]) << r;
  }
  return {strided_reads.load() + 10 * strided_copies.load(), strided_writes.load()};
}

TEST(StridedEntries, ATableOfV111CopiesAWindowInOneCallAnOlderOneRowByRow) {
  const plugin_abi_test::Loaded ref = plugin_abi_test::load(plugin_abi_test::ref_plugin);
  ASSERT_EQ(ref.api->copy_to_host_strided, nullptr) << "REF copies row by row";
  EXPECT_EQ(strided_round_trip(ref.api, ref.library), std::make_pair(0, 0));
  xdev_plugin_api t = *ref.api;
  t.copy_to_host_strided = &strided_to_host_entry;
  t.copy_to_device_strided = &strided_to_device_entry;
  EXPECT_EQ(strided_round_trip(&t, ref.library), std::make_pair(1, 1));
  t.copy_between_strided = &strided_between_entry;  // on its own: (reads + 10 x copies, writes)
  EXPECT_EQ(strided_round_trip(&t, ref.library), std::make_pair(11, 1));

  t.abi_minor = 10;  // full size, entries set: still a 1.10 table
  EXPECT_EQ(strided_round_trip(&t, ref.library), std::make_pair(0, 0));
  t.abi_minor = 11;
  xdev_plugin_api header = t;
  header.struct_size = xdev::plugin::detail::table_size_v1_9;
  const GuardedTable ends_before(header, xdev::plugin::detail::table_size_v1_9);
  EXPECT_EQ(strided_round_trip(ends_before.api(), ref.library), std::make_pair(0, 0))
      << "a table that ends before them";
  t.copy_to_device_strided = nullptr;
  EXPECT_EQ(strided_round_trip(&t, ref.library), std::make_pair(10, 0)) << "both or neither; the copy on its own";
}

// Op windows (ABI 1.12): read only from a 1.12 table that covers both entries and has both; an
// op on a window of an array then runs in the plugin on the window it opened (closed again once
// the op's entry returned), else through the CPU fallback; the same result either way.
std::atomic<int> windows_opened{0};
std::atomic<int> windows_closed{0};
xdev_status counting_open(void*, std::uint64_t, xdev_memory m, std::uint64_t offset, xdev_memory* out, xdev_error*) {
  ++windows_opened;
  *out = m + offset;  // REF's handles are addresses
  return XDEV_OK;
}
xdev_status refusing_open(void*, std::uint64_t, xdev_memory, std::uint64_t, xdev_memory* out, xdev_error*) {
  *out = 0;
  return XDEV_OK;
}
// Opens one window, then fails.
xdev_status failing_second_open(void* b, std::uint64_t d, xdev_memory m, std::uint64_t offset, xdev_memory* out,
                                xdev_error* err) {
  if (windows_opened.load() == 0) return counting_open(b, d, m, offset, out, err);
  err->set(err->context, XDEV_ERR_OUT_OF_MEMORY, "no sub-buffer left");
  return XDEV_ERR_OUT_OF_MEMORY;
}
void counting_close(void*, std::uint64_t, xdev_memory) {
  ++windows_closed;
}

// Scales rows 1 and 2 of a [4, 3] float matrix of ones by 2 and adds row 1 to row 3 on `api`'s
// device 0; returns how many of the two ops went through the CPU fallback.
std::uint64_t ops_on_windows(const xdev_plugin_api* api, const std::shared_ptr<void>& library) {
  const auto before = xdev::metrics::value("fallback.scale") + xdev::metrics::value("fallback.add");
  {
    xdev::Runtime<PluginBackend> rt({}, api, library);
    const xdev::AnyDevice d(rt.device(0));
    auto a = xdev::empty<float>(d, {4, 3});
    xdev::ops::fill(d, a, 1.0f).get();
    xdev::ops::scale(d, xdev::slice(a, {1, 3}), 2.0f).get();
    xdev::ops::add(d, xdev::slice(a, {1, 2}), xdev::slice(a, {3, 4}), xdev::slice(a, {3, 4})).get();
    std::vector<float> got(12);
    d.copy_to_host(a, std::span<float>(got)).get();
    EXPECT_EQ(got, (std::vector<float>{1, 1, 1, 2, 2, 2, 2, 2, 2, 3, 3, 3}));
  }
  return xdev::metrics::value("fallback.scale") + xdev::metrics::value("fallback.add") - before;
}

TEST(OpWindows, ATableOfV112RunsOpsOnWindowsInThePluginAnOlderOneThroughTheFallback) {
  const plugin_abi_test::Loaded ref = plugin_abi_test::load(plugin_abi_test::ref_plugin);
  ASSERT_NE(ref.api->open_window, nullptr) << "REF moves its addresses on (offset_handle)";
  EXPECT_EQ(ops_on_windows(ref.api, ref.library), 0u);
  xdev_plugin_api t = *ref.api;
  t.open_window = &counting_open;
  t.close_window = &counting_close;
  windows_opened = 0;
  windows_closed = 0;
  EXPECT_EQ(ops_on_windows(&t, ref.library), 0u);
  EXPECT_EQ(windows_opened.load(), 3) << "1 for scale, 2 for add: its input and output row 3 share one";
  EXPECT_EQ(windows_closed.load(), 3);

  t.open_window = &refusing_open;  // no window at that offset
  EXPECT_EQ(ops_on_windows(&t, ref.library), 2u);
  t.open_window = &counting_open;
  t.abi_minor = 11;  // full size, entries set: still a 1.11 table
  EXPECT_EQ(ops_on_windows(&t, ref.library), 2u);
  t.abi_minor = 12;
  xdev_plugin_api header = t;
  header.struct_size = xdev::plugin::detail::table_size_v1_11;
  const GuardedTable ends_before(header, xdev::plugin::detail::table_size_v1_11);
  EXPECT_EQ(ops_on_windows(ends_before.api(), ref.library), 2u) << "a table that ends before them";
  t.close_window = nullptr;
  EXPECT_EQ(ops_on_windows(&t, ref.library), 2u) << "both or neither";
  EXPECT_EQ(windows_closed.load(), 3);
}

TEST(OpWindows, AWindowThePluginFailsToOpenFailsTheOpWithItsErrorAndClosesTheOneItOpened) {
  const plugin_abi_test::Loaded ref = plugin_abi_test::load(plugin_abi_test::ref_plugin);
  xdev_plugin_api t = *ref.api;
  t.open_window = &failing_second_open;
  t.close_window = &counting_close;
  windows_opened = 0;
  windows_closed = 0;
  xdev::Runtime<PluginBackend> rt({}, &t, ref.library);
  const xdev::AnyDevice d(rt.device(0));
  auto a = xdev::empty<float>(d, {4, 3});
  xdev::ops::fill(d, a, 1.0f).get();
  expect_error(
      xdev::errc::out_of_memory,
      [&] {
        xdev::ops::add(d, xdev::slice(a, {1, 2}), xdev::slice(a, {3, 4}), xdev::slice(a, {3, 4})).get();
      },
      "open_window: no sub-buffer left");
  EXPECT_EQ(windows_opened.load(), 1);
  EXPECT_EQ(windows_closed.load(), 1) << "the window opened before the failure";
  std::vector<float> got(12);
  d.copy_to_host(a, std::span<float>(got)).get();
  EXPECT_EQ(got, std::vector<float>(12, 1.0f)) << "nothing changed";
}

}  // namespace
