// ScopedEnv: sets (or unsets) an environment variable for one scope and restores its previous value.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>

namespace xdev_test {

class ScopedEnv {
 public:
  /// Sets `name` to `value`; a null `value` unsets it.
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  /// Sets `name` to `*value`; an empty optional unsets it.
  ScopedEnv(const char* name, const std::optional<std::string>& value)
      : ScopedEnv(name, value ? value->c_str() : nullptr) {}
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace xdev_test
