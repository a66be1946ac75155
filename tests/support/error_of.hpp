// error_of(f): runs `f`, which must throw an xdev::error, and returns that error (a test failure,
// and an `internal` placeholder, when it throws none) so that its code and text can be checked.
#pragma once

#include <xdev/core/error.hpp>

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

}  // namespace xdev_test
