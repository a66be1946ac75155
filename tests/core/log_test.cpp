// xdev::log: the threshold (XDEV_LOG_LEVEL, set_level), the replaceable sink, and the places that
// speak through it (the plugin loader's diagnostics, default device selection).
#include <xdev/core/log.hpp>

#include <xdev/any/registry.hpp>
#include <xdev/backends/host.hpp>
#include <xdev/device/runtime.hpp>
#include <xdev/plugin/diagnostics.hpp>

#include "support/scoped_env.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace {

namespace log = xdev::log;
using ::testing::HasSubstr;
using xdev_test::ScopedEnv;

struct Seen {
  log::Level level;
  std::string component;
  std::string message;
};

// Installs a sink that keeps every record, and restores the default sink and threshold after.
class Log : public ::testing::Test {
 protected:
  void SetUp() override {
    log::set_level(std::nullopt);
    previous_ = log::set_sink([this](const log::Record& r) {
      std::lock_guard lk(m_);
      seen_.push_back({r.level, std::string(r.component), std::string(r.message)});
    });
  }
  void TearDown() override {
    log::set_sink(previous_);
    log::set_level(std::nullopt);
  }
  std::vector<Seen> seen() {
    std::lock_guard lk(m_);
    return seen_;
  }
  std::vector<std::string> messages_of(std::string_view component) {
    std::vector<std::string> out;
    for (const auto& s : seen())
      if (s.component == component) out.push_back(s.message);
    return out;
  }

 private:
  std::mutex m_;
  std::vector<Seen> seen_;
  log::Sink previous_;
};

TEST_F(Log, TheDefaultThresholdIsWarning) {
  const ScopedEnv unset("XDEV_LOG_LEVEL", nullptr);
  log::set_level(std::nullopt);
  EXPECT_EQ(log::level(), log::Level::warning);
  EXPECT_TRUE(log::enabled(log::Level::error));
  EXPECT_TRUE(log::enabled(log::Level::warning));
  EXPECT_FALSE(log::enabled(log::Level::info));
  log::write(log::Level::info, "test", "not shown");
  log::write(log::Level::warning, "test", "shown");
  const auto got = seen();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].level, log::Level::warning);
  EXPECT_EQ(got[0].component, "test");
  EXPECT_EQ(got[0].message, "shown");
}

TEST_F(Log, TheVariableSetsTheThresholdByNameOrDigit) {
  for (const auto& [text, want] : std::vector<std::pair<const char*, log::Level>>{{"error", log::Level::error},
                                                                                  {"warning", log::Level::warning},
                                                                                  {"info", log::Level::info},
                                                                                  {"debug", log::Level::debug},
                                                                                  {"0", log::Level::error},
                                                                                  {"3", log::Level::debug}}) {
    const ScopedEnv env("XDEV_LOG_LEVEL", text);
    log::set_level(std::nullopt);  // read the variable again
    EXPECT_EQ(log::level(), want) << text;
  }
}

TEST_F(Log, SetLevelOverridesTheVariable) {
  const ScopedEnv env("XDEV_LOG_LEVEL", "error");
  log::set_level(log::Level::debug);
  EXPECT_EQ(log::level(), log::Level::debug);
  log::write(log::Level::debug, "test", "detail");
  EXPECT_EQ(seen().size(), 1u);
}

TEST_F(Log, AMalformedVariableIsAnErrorQuotingItWhereARuntimeOrRegistryIsMade) {
  for (const char* bad : {"loud", "DEBUG", "4", "warn ", "-1"}) {
    const ScopedEnv env("XDEV_LOG_LEVEL", bad);
    log::set_level(std::nullopt);
    try {
      (void)log::level();
      ADD_FAILURE() << bad << " was accepted";
    } catch (const xdev::error& e) {
      EXPECT_EQ(e.code(), xdev::errc::invalid_argument);
      EXPECT_THAT(e.what(), HasSubstr("XDEV_LOG_LEVEL=\"" + std::string(bad) + "\""));
      EXPECT_THAT(e.what(), HasSubstr("error, warning, info or debug"));
    }
    EXPECT_THROW(xdev::Runtime<xdev::backends::Host> rt, xdev::error) << bad;
    EXPECT_THROW(xdev::Registry r(xdev::plugin::SearchPath{}), xdev::error) << bad;
    // Records are never the place where it fails: they go out at the default threshold.
    EXPECT_TRUE(log::enabled(log::Level::warning));
    EXPECT_FALSE(log::enabled(log::Level::info));
  }
}

TEST_F(Log, SetSinkReturnsThePreviousOneAndAnEmptySinkRestoresTheDefault) {
  int second = 0;
  const log::Sink mine = log::set_sink([&](const log::Record&) { ++second; });
  ASSERT_TRUE(mine);  // the fixture's
  log::write(log::Level::error, "test", "to the second sink");
  EXPECT_EQ(second, 1);
  EXPECT_TRUE(seen().empty());
  const log::Sink back = log::set_sink(mine);
  ASSERT_TRUE(back);
  log::write(log::Level::error, "test", "to the fixture's");
  EXPECT_EQ(second, 1);
  EXPECT_EQ(seen().size(), 1u);

  (void)log::set_sink({});  // the default: stderr
  testing::internal::CaptureStderr();
  log::write(log::Level::warning, "test", "a warning");
  log::set_level(log::Level::debug);
  log::write(log::Level::debug, "test", "a step");
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_THAT(err, HasSubstr("xdev: a warning\n"));
  EXPECT_THAT(err, HasSubstr("xdev: debug: test: a step\n"));
  (void)log::set_sink(mine);
}

TEST_F(Log, ASinkThatThrowsDoesNotEscape) {
  const log::Sink mine = log::set_sink([](const log::Record&) { throw std::runtime_error("sink broke"); });
  EXPECT_NO_THROW(log::write(log::Level::error, "test", "x"));
  (void)log::set_sink(mine);
}

TEST_F(Log, PluginLoaderDiagnosticsGoThroughTheLogAtTheirLevel) {
  log::set_level(log::Level::debug);
  using xdev::plugin::Severity;
  xdev::plugin::default_diagnostic_sink({Severity::verbose, "looked at a file"});
  xdev::plugin::default_diagnostic_sink({Severity::warning, "skipped a plugin"});
  const auto got = seen();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].level, log::Level::debug);
  EXPECT_EQ(got[0].component, "plugin");
  EXPECT_EQ(got[1].level, log::Level::warning);
  EXPECT_EQ(got[1].message, "skipped a plugin");

  log::set_level(log::Level::warning);  // verbose steps are debug records: not shown now
  xdev::plugin::default_diagnostic_sink({Severity::verbose, "looked at another file"});
  EXPECT_EQ(seen().size(), 2u);
}

TEST_F(Log, DefaultDeviceSelectionSaysWhatItChoseAtDebug) {
  const ScopedEnv unset("XDEV_DEVICE", nullptr);
  log::set_level(log::Level::debug);
  xdev::Registry registry{xdev::plugin::SearchPath{}};
  EXPECT_EQ(registry.default_backend(), "HOST");
  EXPECT_THAT(messages_of("registry"), testing::Contains(HasSubstr("default backend: HOST (priority -100")));

  const ScopedEnv host("XDEV_DEVICE", "HOST");
  EXPECT_EQ(registry.default_backend(), "HOST");
  EXPECT_THAT(messages_of("registry"),
              testing::Contains(HasSubstr("default backend: HOST (named by XDEV_DEVICE=HOST)")));
}

TEST_F(Log, NothingIsSaidAtTheDefaultThresholdWhenAllGoesWell) {
  const ScopedEnv unset("XDEV_LOG_LEVEL", nullptr);
  const ScopedEnv device("XDEV_DEVICE", nullptr);
  log::set_level(std::nullopt);
  xdev::Registry registry{xdev::plugin::SearchPath{}};
  (void)registry.default_backend();
  (void)registry.devices("HOST");
  EXPECT_TRUE(seen().empty());
}

}  // namespace
