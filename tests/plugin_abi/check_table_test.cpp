// xdev::plugin::check_table (<xdev/plugin/plugin_backend.hpp>): the ABI rules a plugin table must
// pass before anything but its entry runs, on altered copies of REF's table.
#include <xdev/plugin/abi.h>
#include <xdev/plugin/plugin_backend.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

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
  t.struct_size = 200;
  expect_rejected(
      &t, xdev::errc::incompatible_abi,
      {"xdev_plugin_api", "expected at least " + std::to_string(sizeof(xdev_plugin_api)) + " bytes, got 200"});
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
  static_assert(XDEV_ABI_MIN_MINOR == 1 && XDEV_ABI_MINOR == 2, "ABI 1.1 (before binary min/max) is still accepted");
  for (std::uint32_t minor = XDEV_ABI_MIN_MINOR; minor <= XDEV_ABI_MINOR + 1; ++minor) {
    t.abi_minor = minor;
    EXPECT_NO_THROW(xdev::plugin::check_table(&t, "x")) << "ABI 1." << minor;
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
    expect_rejected(&t, xdev::errc::invalid_argument,
                    {"\"" + std::string(bad) + "\" is not accepted", "[A-Z][A-Z0-9_]*"});
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

}  // namespace
