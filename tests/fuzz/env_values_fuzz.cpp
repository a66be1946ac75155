// The single-value variables (XDEV_LOG_LEVEL among them), each read by the function xdev reads it with: the first byte
// picks the variable, the rest (up to a NUL, as in a real environment) is its value. Each value is accepted or an
// invalid_argument naming the variable; never anything else.
#include <xdev/any/registry.hpp>
#include <xdev/core/dtype.hpp>
#include <xdev/core/env.hpp>
#include <xdev/core/log.hpp>
#include <xdev/plugin/detail/loader_trust.hpp>
#include <xdev/plugin/search_path.hpp>

#include "fuzz_support.hpp"

#include <optional>
#include <string>
#include <utility>

namespace {

using xdev_fuzz::ScopedVariable;

template <class F>
void expect_accepted_or_named(const char* variable, F&& f) {
  xdev_fuzz::accepted_or_named(variable, {xdev::errc::invalid_argument, xdev::errc::not_found}, std::forward<F>(f));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const auto text = xdev_fuzz::text_of(data + 1, size - 1);
  const std::string value(text.substr(0, text.find('\0')));
  switch (data[0] % 8) {
    case 0: {
      ScopedVariable v("XDEV_MAX_INFLIGHT", value);
      expect_accepted_or_named("XDEV_MAX_INFLIGHT", [] {
        const auto n = xdev::getenv_count("XDEV_MAX_INFLIGHT", 1, std::size_t{1} << 20);
        XDEV_FUZZ_CHECK(!n || (*n >= 1 && *n <= (std::size_t{1} << 20)));
      });
      break;
    }
    case 1: {
      ScopedVariable v("XDEV_HOST_DEVICES", value);
      expect_accepted_or_named("XDEV_HOST_DEVICES", [] {
        const auto n = xdev::getenv_count("XDEV_HOST_DEVICES", 1, 1024);
        XDEV_FUZZ_CHECK(!n || (*n >= 1 && *n <= 1024));
      });
      break;
    }
    case 2: {
      ScopedVariable v("XDEV_ALLOW_INSECURE_PLUGINS", value);
      expect_accepted_or_named("XDEV_ALLOW_INSECURE_PLUGINS", [&] {
        const bool on = xdev::plugin::detail::insecure_plugins_allowed_by_environment();
        XDEV_FUZZ_CHECK(on == (value == "1"));
      });
      break;
    }
    case 3: {
      ScopedVariable v("XDEV_DISABLE_PLUGIN_UNLOADING", value);
      expect_accepted_or_named("XDEV_DISABLE_PLUGIN_UNLOADING", [&] {
        XDEV_FUZZ_CHECK(xdev::plugin::detail::plugin_unloading_disabled() == (value == "1"));
      });
      break;
    }
    case 4: {
      ScopedVariable v("XDEV_PLUGIN_PATH", value);
      const auto path = xdev::plugin::search_path();
      for (const auto& dir : path.directories()) XDEV_FUZZ_CHECK(dir.path.is_absolute());
      break;
    }
    case 5: {
      const auto parsed = xdev::try_parse_dtype(value);
      if (parsed) XDEV_FUZZ_CHECK(xdev::parse_dtype(xdev::name_of(*parsed)) == *parsed);
      xdev_fuzz::only_errors({xdev::errc::invalid_argument}, [&] { (void)xdev::parse_dtype(value); });
      break;
    }
    case 6: {
      // XDEV_DEVICE over a registry without plugins: HOST and only HOST devices, or an error naming
      // the variable (a malformed value, a name or device that does not exist, nothing left).
      static auto* registry = new xdev::Registry(xdev::plugin::SearchPath{});
      ScopedVariable v("XDEV_DEVICE", value);
      xdev_fuzz::accepted_or_named("XDEV_DEVICE",
                                   {xdev::errc::invalid_argument, xdev::errc::not_found, xdev::errc::unavailable}, [] {
                                     XDEV_FUZZ_CHECK(registry->default_backend() == "HOST");
                                     const auto visible = registry->visible_devices();
                                     XDEV_FUZZ_CHECK(!visible.empty());
                                     for (const auto& d : visible) XDEV_FUZZ_CHECK(d.type_name() == "HOST");
                                   });
      break;
    }
    case 7: {
      // XDEV_LOG_LEVEL: a level whose name (or digit) is the value, or an error quoting it; asking
      // whether a record passes never throws, whatever the value.
      ScopedVariable v("XDEV_LOG_LEVEL", value);
      xdev::log::set_level(std::nullopt);
      (void)xdev::log::enabled(xdev::log::Level::debug);
      expect_accepted_or_named("XDEV_LOG_LEVEL", [&] {
        const xdev::log::Level l = xdev::log::level();
        XDEV_FUZZ_CHECK(value.empty() || value == xdev::log::name(l) ||
                        (value.size() == 1 && value[0] == static_cast<char>('0' + static_cast<int>(l))));
      });
      xdev::log::set_level(std::nullopt);
      break;
    }
  }
  return 0;
}
