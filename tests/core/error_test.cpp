#include <xdev/core/env.hpp>
#include <xdev/core/error.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <string>
#include <system_error>

namespace {

using ::testing::HasSubstr;

TEST(Error, IsASystemErrorInTheXdevCategory) {
  xdev::error e(xdev::errc::out_of_memory, "requested 10 bytes");
  const std::system_error& base = e;
  EXPECT_EQ(base.code().category().name(), std::string("xdev"));
  EXPECT_EQ(e.code(), xdev::errc::out_of_memory);
  EXPECT_EQ(e.condition(), xdev::errc::out_of_memory);
  EXPECT_THAT(e.what(), HasSubstr("requested 10 bytes"));
  EXPECT_THAT(e.what(), HasSubstr("out of memory"));
}

TEST(Error, EveryCodeHasADistinctMessage) {
  std::set<std::string> seen;
  for (int c = 1; c <= 11; ++c) seen.insert(xdev::error_category().message(c));
  EXPECT_EQ(seen.size(), 11u);
  EXPECT_EQ(xdev::error_category().message(11), "identity mismatch");
  EXPECT_THAT(xdev::error_category().message(99), HasSubstr("99"));
}

TEST(Error, MessageIsWhatItWasMadeWithWithoutTheCodeDescription) {
  const xdev::error e(xdev::errc::not_found, "no backend named \"X\"");
  EXPECT_EQ(std::string(e.what()), "no backend named \"X\": not found");
  EXPECT_EQ(e.message(), "no backend named \"X\"");
  // A message that itself ends like a code description loses only the one suffix.
  EXPECT_EQ(xdev::error(xdev::errc::internal, "a: internal error").message(), "a: internal error");
  EXPECT_EQ(xdev::error(xdev::errc::internal, "").message(), "");
}

TEST(Error, CodesConvertToErrorCode) {
  std::error_code ec = xdev::errc::deadline_exceeded;
  EXPECT_EQ(ec.category(), xdev::error_category());
  EXPECT_EQ(ec.message(), "deadline exceeded");
}

class Env : public ::testing::Test {
 protected:
  void TearDown() override { ::unsetenv("XDEV_TEST_COUNT"); }
};

TEST_F(Env, UnsetAndEmptyAreAbsent) {
  ::unsetenv("XDEV_TEST_COUNT");
  EXPECT_EQ(xdev::getenv_count("XDEV_TEST_COUNT", 1), std::nullopt);
  ::setenv("XDEV_TEST_COUNT", "", 1);
  EXPECT_EQ(xdev::getenv_count("XDEV_TEST_COUNT", 1), std::nullopt);
}

TEST_F(Env, ParsesAnIntegerInRange) {
  ::setenv("XDEV_TEST_COUNT", "12", 1);
  EXPECT_EQ(xdev::getenv_count("XDEV_TEST_COUNT", 1, 16), 12u);
}

TEST_F(Env, MalformedValuesNameVariableValueAndRange) {
  for (const char* bad : {"abc", "12x", "-1", "0", "17", " 3", "1e3", "99999999999999999999999"}) {
    ::setenv("XDEV_TEST_COUNT", bad, 1);
    try {
      (void)xdev::getenv_count("XDEV_TEST_COUNT", 1, 16);
      FAIL() << "accepted " << bad;
    } catch (const xdev::error& e) {
      EXPECT_EQ(e.code(), xdev::errc::invalid_argument);
      EXPECT_THAT(e.what(), HasSubstr("XDEV_TEST_COUNT"));
      EXPECT_THAT(e.what(), HasSubstr(std::string("\"") + bad + "\""));
      EXPECT_THAT(e.what(), HasSubstr("[1, 16]"));
    }
  }
}

}  // namespace
