// error_of(f): runs `f`, which must throw an xdev::error, and returns that error (a test failure,
// and an `internal` placeholder, when it throws none) so that its code and text can be checked.
// expect_error(code, f, parts): the same, checked in one line (the public one).
#pragma once

#include <xdev/core/error.hpp>
#include <xdev/testing/expect_error.hpp>

#include <gtest/gtest.h>

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

/// The public check (<xdev/testing/expect_error.hpp>).
using xdev::testing::expect_error;

}  // namespace xdev_test
