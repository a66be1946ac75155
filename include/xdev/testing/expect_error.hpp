/// \file
/// `expect_error(code, f, parts)`: a GoogleTest check that `f()` throws an `xdev::error` of `code`
/// whose message names every one of `parts`. For backend authors' tests and xdev's own.
#pragma once

#include <xdev/core/error.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <exception>
#include <initializer_list>
#include <string>
#include <string_view>

namespace xdev::testing {

/// Calls `f`, which must throw an `xdev::error` whose condition is `code` and whose message
/// contains every string in `parts`; anything else (no exception, another code, another type) is a
/// test failure that says what happened.
template <class F>
void expect_error(xdev::errc code, F&& f, std::initializer_list<std::string_view> parts) {
  try {
    f();
    ADD_FAILURE() << "no exception was thrown";
  } catch (const xdev::error& e) {
    EXPECT_EQ(e.condition(), code) << e.what();
    for (auto p : parts) EXPECT_THAT(e.what(), ::testing::HasSubstr(std::string(p)));
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected xdev::error, got: " << e.what();
  }
}

}  // namespace xdev::testing
