// The device-generic harness itself: the availability decision (run, skip or fail, and
// XDEV_TEST_DEVICES parsing) as a pure function, the fixture and its require_* helpers in process,
// and what a run prints and returns end to end (a child process of this binary running hidden
// suites).
#include <xdev/testing/device_test.hpp>

#include "support/test_targets.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using xdev::testing::Action;
using xdev::testing::availability_decision;
using xdev::testing::parse_test_devices;

const std::vector<std::string> known{"FALLBACK", "HOST", "NEVER"};

// ---- the decision -----------------------------------------------------------------------------

TEST(AvailabilityDecision, AnAvailableTargetRunsWhateverTheVariableLists) {
  for (std::optional<std::string_view> env :
       {std::optional<std::string_view>(), std::optional<std::string_view>("HOST"),
        std::optional<std::string_view>("FALLBACK,NEVER")}) {
    const auto d = availability_decision("HOST", true, "", env, known);
    EXPECT_EQ(d.action, Action::run) << env.value_or("(unset)");
    EXPECT_EQ(d.message, "");
  }
}

TEST(AvailabilityDecision, AnUnavailableTargetThatIsNotListedSkipsWithItsReason) {
  for (std::optional<std::string_view> env :
       {std::optional<std::string_view>(), std::optional<std::string_view>("HOST,FALLBACK")}) {
    const auto d = availability_decision("NEVER", false, "no NEVER board found", env, known);
    EXPECT_EQ(d.action, Action::skip);
    EXPECT_THAT(d.message, HasSubstr("device test target NEVER is unavailable: no NEVER board found"));
    EXPECT_THAT(d.message, HasSubstr("XDEV_TEST_DEVICES does not list it"));
  }
}

TEST(AvailabilityDecision, AnUnavailableTargetThatIsListedFailsWithItsReason) {
  const auto d = availability_decision("NEVER", false, "no NEVER board found", "HOST,NEVER", known);
  EXPECT_EQ(d.action, Action::fail);
  EXPECT_THAT(d.message, HasSubstr("device test target NEVER is unavailable: no NEVER board found"));
  EXPECT_THAT(d.message, HasSubstr("XDEV_TEST_DEVICES=\"HOST,NEVER\" requires it"));
}

TEST(AvailabilityDecision, AnEmptyValueCountsAsUnset) {
  EXPECT_EQ(availability_decision("NEVER", false, "gone", "", known).action, Action::skip);
}

TEST(AvailabilityDecision, AMissingReasonIsSaidSo) {
  EXPECT_THAT(availability_decision("NEVER", false, "", std::nullopt, known).message,
              HasSubstr("its target gave no reason"));
}

void expect_malformed(std::string_view value, std::string_view problem) {
  SCOPED_TRACE("XDEV_TEST_DEVICES=\"" + std::string(value) + "\"");
  for (bool available : {true, false}) {
    const auto d = availability_decision("HOST", available, "why", value, known);
    EXPECT_EQ(d.action, Action::fail) << "a malformed variable fails every target, available or not";
    EXPECT_THAT(d.message, HasSubstr("XDEV_TEST_DEVICES=\"" + std::string(value) + "\""));
    EXPECT_THAT(d.message, HasSubstr(std::string(problem)));
    EXPECT_THAT(d.message, HasSubstr("accepted: a comma-separated list of device test target names, without spaces, "
                                     "each one of: FALLBACK, HOST, NEVER"));
  }
  try {
    (void)parse_test_devices(value, known);
    ADD_FAILURE() << "parse_test_devices accepted it";
  } catch (const xdev::error& e) {
    EXPECT_EQ(e.code(), xdev::errc::invalid_argument);
    EXPECT_THAT(e.what(), HasSubstr(std::string(problem)));
  }
}

TEST(AvailabilityDecision, EmptyItemsAreMalformed) {
  expect_malformed("HOST,", "item 2 is empty");
  expect_malformed(",HOST", "item 1 is empty");
  expect_malformed("HOST,,NEVER", "item 2 is empty");
  expect_malformed(",", "item 1 is empty");
}

TEST(AvailabilityDecision, WhitespaceIsMalformed) {
  expect_malformed("HOST, NEVER", "item 2 \" NEVER\" contains whitespace");
  expect_malformed(" HOST", "item 1 \" HOST\" contains whitespace");
  expect_malformed("HOST\t", "contains whitespace");
  expect_malformed("HOST;NEVER", "contains the character ';'");
}

TEST(AvailabilityDecision, UnknownNamesAreMalformed) {
  expect_malformed("HSOT", "names \"HSOT\", which is no device test target of this program");
  expect_malformed("HOST,host", "names \"host\"");  // names are case-sensitive, as printed in test names
}

TEST(AvailabilityDecision, ParseReturnsTheListedNames) {
  EXPECT_EQ(parse_test_devices("HOST", known), std::vector<std::string>{"HOST"});
  EXPECT_EQ(parse_test_devices("NEVER,HOST,NEVER", known), (std::vector<std::string>{"NEVER", "HOST", "NEVER"}));
}

TEST(AvailabilityDecision, TheDefaultKnownNamesAreTheTargetsOfThisProgramsSuites) {
  const auto names = xdev::testing::registered_target_names();
  for (const char* n : {"F32ONLY", "FALLBACK", "HOST", "NEVER"})
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  EXPECT_EQ(availability_decision("HOST", true, "", "HOST,F32ONLY").action, Action::run);
  EXPECT_EQ(availability_decision("HOST", true, "", "GPU").action, Action::fail);
}

// ---- the fixture, in process ------------------------------------------------------------------

using HarnessTargets = xdev::testing::Targets<xdev::testing::HostTarget, xdev_test::FallbackTarget,
                                              xdev_test::F32OnlyTarget, xdev_test::NeverAvailableTarget>;
XDEV_DEVICE_TEST_SUITE(Harness, HarnessTargets);

XDEV_DEVICE_TEST(Harness, TestNamesReadSuiteSlashTarget) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  EXPECT_EQ(std::string(info->test_suite_name()), "Harness/" + TypeParam::name());
  EXPECT_EQ(std::string(info->name()), "TestNamesReadSuiteSlashTarget");
}

XDEV_DEVICE_TEST(Harness, TheBodyRunsOnlyForAvailableTargets) {
  EXPECT_NE(TypeParam::name(), "NEVER");
}

XDEV_DEVICE_TEST(Harness, DevicesComeFromTheTargetsRuntime) {
  std::string why;
  EXPECT_EQ(&this->runtime(), TypeParam::runtime(why));
  EXPECT_EQ(this->device_count(), this->runtime().device_count());
  EXPECT_GE(this->device_count(), 1u);
  EXPECT_EQ(this->device().ordinal(), 0u);
  EXPECT_EQ(this->device(), this->runtime().device(0));
  if constexpr (std::is_same_v<TypeParam, xdev::testing::HostTarget>) {
    EXPECT_EQ(this->device_count(), 2u) << "HostTarget has 2 devices whatever XDEV_HOST_DEVICES says";
  }
}

XDEV_DEVICE_TEST(Harness, RequireHelpersThatHoldDoNotSkip) {
  EXPECT_TRUE(this->require(true, "never printed"));
  EXPECT_TRUE(this->require_devices(1));
  EXPECT_TRUE(this->require_dtype(xdev::DType::f32));
  EXPECT_FALSE(::testing::Test::IsSkipped());
}

// The helpers that do not hold mark the test skipped: on the targets below, these tests are
// reported as skipped (with the reason printed) — that is their passing result. An assertion
// failure after a skip still fails the test, so the checks below are in force.
XDEV_DEVICE_TEST(Harness, RequireDtypeFollowsTheCapabilitySet) {
  using B = typename TestFixture::backend;
  const bool ok = this->require_dtype(xdev::DType::f64);
  EXPECT_EQ(ok, xdev::Device<B>::capability_set.supports(xdev::DType::f64));
  EXPECT_EQ(::testing::Test::IsSkipped(), !ok);  // skipped on F32ONLY
}

XDEV_DEVICE_TEST(Harness, RequireLaunchableFollowsTheConcept) {
  using B = typename TestFixture::backend;
  const bool ok = this->require_launchable();
  EXPECT_EQ(ok, xdev::concepts::LaunchableBackend<B>);
  EXPECT_EQ(::testing::Test::IsSkipped(), !ok);  // skipped on FALLBACK and F32ONLY
}

// ---- end to end, in a child process -----------------------------------------------------------

// Hidden suites (DISABLED_: they run only when the child asks for them). Their results depend on
// the environment the child is given, which the tests below check.
using ChildTargets =
    xdev::testing::Targets<xdev::testing::HostTarget, xdev_test::F32OnlyTarget, xdev_test::NeverAvailableTarget>;
XDEV_DEVICE_TEST_SUITE(DISABLED_HarnessChild, ChildTargets);

XDEV_DEVICE_TEST(DISABLED_HarnessChild, Body) {
  SUCCEED();
}

XDEV_DEVICE_TEST(DISABLED_HarnessChild, NeedsF64) {
  if (!this->require_dtype(xdev::DType::f64)) return;
  SUCCEED();
}

XDEV_DEVICE_TEST(DISABLED_HarnessChild, NeedsThreeDevices) {
  if (!this->require_devices(3)) return;
  ADD_FAILURE() << "no target of this suite has 3 devices";
}

XDEV_DEVICE_TEST(DISABLED_HarnessChild, DropsAFailedFuture) {
  (void)this->device().execute([] { throw std::runtime_error("dropped on purpose"); });
}

struct ChildRun {
  int exit_code;
  std::string output;
};

// Runs this test binary on `filter` with XDEV_TEST_DEVICES set to `devices` (unset: nullopt).
std::optional<ChildRun> run_child(const std::string& filter, std::optional<std::string> devices) {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return std::nullopt;
  // The child must not write the parent's report nor take its sharding or filter.
  std::string cmd =
      "env -u XDEV_TEST_DEVICES -u GTEST_OUTPUT -u GTEST_FILTER -u GTEST_TOTAL_SHARDS "
      "-u GTEST_SHARD_INDEX -u GTEST_SHARD_STATUS_FILE ";
  if (devices) cmd += "XDEV_TEST_DEVICES='" + *devices + "' ";
  cmd +=
      "'" + self.string() + "' --gtest_also_run_disabled_tests --gtest_color=no '--gtest_filter=" + filter + "' 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return std::nullopt;
  ChildRun run{};
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), static_cast<int>(buf.size()), p) != nullptr) run.output += buf.data();
  const int status = ::pclose(p);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

const char* const no_child = "cannot start a child process of this binary (/proc/self/exe)";

TEST(HarnessEndToEnd, AnUnavailableTargetSkipsWithItsReasonWhenNotListed) {
  const auto run = run_child("DISABLED_HarnessChild/NEVER.Body", std::nullopt);
  if (!run) GTEST_SKIP() << no_child;
  SCOPED_TRACE(run->output);
  EXPECT_EQ(run->exit_code, 0);
  EXPECT_THAT(run->output, HasSubstr("[  SKIPPED ] DISABLED_HarnessChild/NEVER.Body"));
  EXPECT_THAT(run->output, HasSubstr("device test target NEVER is unavailable: NEVER devices exist on no machine"));
  EXPECT_THAT(run->output, Not(HasSubstr("[  FAILED  ]")));
}

TEST(HarnessEndToEnd, AnUnavailableTargetFailsWhenListed) {
  const auto run = run_child("DISABLED_HarnessChild/*.Body", std::optional<std::string>("HOST,NEVER"));
  if (!run) GTEST_SKIP() << no_child;
  SCOPED_TRACE(run->output);
  EXPECT_NE(run->exit_code, 0);
  EXPECT_THAT(run->output, HasSubstr("[  FAILED  ] DISABLED_HarnessChild/NEVER.Body"));
  EXPECT_THAT(run->output, HasSubstr("XDEV_TEST_DEVICES=\"HOST,NEVER\" requires it"));
  EXPECT_THAT(run->output, HasSubstr("[       OK ] DISABLED_HarnessChild/HOST.Body"));
}

TEST(HarnessEndToEnd, AMalformedVariableFailsEveryDeviceTest) {
  const auto run = run_child("DISABLED_HarnessChild/*.Body", std::optional<std::string>("HOST,"));
  if (!run) GTEST_SKIP() << no_child;
  SCOPED_TRACE(run->output);
  EXPECT_NE(run->exit_code, 0);
  for (const char* t : {"HOST", "F32ONLY", "NEVER"})
    EXPECT_THAT(run->output, HasSubstr(std::string("[  FAILED  ] DISABLED_HarnessChild/") + t + ".Body"));
  EXPECT_THAT(run->output, HasSubstr("XDEV_TEST_DEVICES=\"HOST,\" is malformed: item 2 is empty"));
}

TEST(HarnessEndToEnd, RequireHelpersPrintTheirReason) {
  const auto run = run_child("DISABLED_HarnessChild/*.Needs*", std::nullopt);
  if (!run) GTEST_SKIP() << no_child;
  SCOPED_TRACE(run->output);
  EXPECT_EQ(run->exit_code, 0);
  EXPECT_THAT(run->output, HasSubstr("[       OK ] DISABLED_HarnessChild/HOST.NeedsF64"));
  EXPECT_THAT(run->output, HasSubstr("[  SKIPPED ] DISABLED_HarnessChild/F32ONLY.NeedsF64"));
  EXPECT_THAT(run->output, HasSubstr("F32ONLY does not support dtype f64"));
  EXPECT_THAT(run->output, HasSubstr("[  SKIPPED ] DISABLED_HarnessChild/HOST.NeedsThreeDevices"));
  EXPECT_THAT(run->output, HasSubstr("the test needs 3 HOST devices, but there are 2"));
  EXPECT_THAT(run->output, HasSubstr("the test needs 3 F32ONLY devices, but there is 1"));
}

TEST(HarnessEndToEnd, AnErrorNobodyReceivedFailsTheTestThatLeftIt) {
  const auto run = run_child("DISABLED_HarnessChild/HOST.DropsAFailedFuture", std::nullopt);
  if (!run) GTEST_SKIP() << no_child;
  SCOPED_TRACE(run->output);
  EXPECT_NE(run->exit_code, 0);
  EXPECT_THAT(run->output, HasSubstr("[  FAILED  ] DISABLED_HarnessChild/HOST.DropsAFailedFuture"));
  EXPECT_THAT(run->output, HasSubstr("HOST:0 kept an error that no future or handler received: dropped on purpose"));
}

}  // namespace
