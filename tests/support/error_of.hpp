// error_of(f): runs `f`, which must throw an xdev::error, and returns that error (a test failure,
// and an `internal` placeholder, when it throws none) so that its code and text can be checked.
// expect_error(code, f, parts): the same, checked in one line.
#pragma once

#include <xdev/core/error.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <string_view>

namespace xdev_test {

template <class F>
xdev::error error_of(F&& f) {
  try {
    f();
  } catch (const xdev::error& e) {
    return e;
  }
  ADD_FAILURE() << "no xdev::error was thrown";
  return xdev::error(xdev::errc::internal, "none");
}

/// Calls `f`, which must throw xdev::error `code` whose message contains every string in `parts`.
template <class F>
void expect_error(xdev::errc code, F&& f, std::initializer_list<std::string_view> parts) {
  try {
    f();
    ADD_FAILURE() << "no exception was thrown";
  } catch (const xdev::error& e) {
    EXPECT_EQ(e.condition(), code) << e.what();
    for (auto p : parts) EXPECT_THAT(e.what(), ::testing::HasSubstr(std::string(p)));
  }
}

}  // namespace xdev_test
