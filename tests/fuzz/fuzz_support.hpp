// What every fuzz harness shares: a check that aborts (so libFuzzer and the corpus replay both
// report it as a crash, with the input), and a way to say which errors an input may cause.
#pragma once

#include <xdev/core/error.hpp>

#include <stdlib.h>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <string_view>

#define XDEV_FUZZ_CHECK(condition)                                                                  \
  do {                                                                                              \
    if (!(condition)) {                                                                             \
      std::fprintf(stderr, "xdev fuzz check failed: %s (%s:%d)\n", #condition, __FILE__, __LINE__); \
      std::abort();                                                                                 \
    }                                                                                               \
  } while (0)

namespace xdev_fuzz {

// The input as text.
inline std::string_view text_of(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Runs `f`: it may return or throw an `xdev::error` of one of `allowed` whose message is not empty;
// anything else (another exception, another code) is a finding.
template <class F>
void only_errors(std::initializer_list<xdev::errc> allowed, F&& f) {
  try {
    f();
  } catch (const xdev::error& e) {
    bool ok = false;
    for (const auto code : allowed) ok = ok || e.condition() == code;
    if (!ok) std::fprintf(stderr, "xdev fuzz: unexpected error code: %s\n", e.what());
    XDEV_FUZZ_CHECK(ok);
    XDEV_FUZZ_CHECK(!e.message().empty());
  }
}

// Sets the environment variable `name` to `value` for the scope (unset again after).
struct ScopedVariable {
  ScopedVariable(const char* name, const std::string& value) : name_(name) { ::setenv(name, value.c_str(), 1); }
  ScopedVariable(const ScopedVariable&) = delete;
  ScopedVariable& operator=(const ScopedVariable&) = delete;
  ~ScopedVariable() { ::unsetenv(name_); }
  const char* name_;
};

// Runs `f`, which reads the variable `variable`: it may return, or throw an `xdev::error` of one
// of `allowed` whose message names the variable; anything else is a finding.
template <class F>
void accepted_or_named(const char* variable, std::initializer_list<xdev::errc> allowed, F&& f) {
  try {
    f();
  } catch (const xdev::error& e) {
    bool ok = false;
    for (const auto code : allowed) ok = ok || e.condition() == code;
    XDEV_FUZZ_CHECK(ok);
    XDEV_FUZZ_CHECK(e.message().find(variable) != std::string::npos);
  }
}

}  // namespace xdev_fuzz
