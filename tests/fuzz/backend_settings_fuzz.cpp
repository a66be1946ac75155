// The backends' own variables, each read by the function its backend reads it with: the first byte
// picks the variable, the rest (up to a NUL, as in a real environment) is its value. Each value is
// accepted with the meaning the documentation gives it, or refused with an invalid_argument naming
// the variable; never anything else. An empty value is an unset variable (xdev::getenv_string).
#include <xdev/any/accelerator.hpp>

#include "../../plugins/cuda/settings.hpp"
#include "../../plugins/opencl/settings.hpp"
#include "fuzz_support.hpp"

#include <cctype>
#include <string>
#include <string_view>
#include <utility>

namespace {

using xdev_fuzz::ScopedVariable;

template <class F>
void accepted_or_named(const char* variable, F&& f) {
  xdev_fuzz::accepted_or_named(variable, {xdev::errc::invalid_argument}, std::forward<F>(f));
}

// What XDEV_OPENCL_DEVICE_TYPE documents, written out independently of the parser: every
// comma-separated item, blanks around it dropped and any case, is one of the four names.
bool documented_device_type_list(std::string_view text, xdev_opencl::detail::DeviceTypes& expect) {
  expect = {};
  for (;;) {
    const auto comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    while (!item.empty() && std::isspace(static_cast<unsigned char>(item.front()))) item.remove_prefix(1);
    while (!item.empty() && std::isspace(static_cast<unsigned char>(item.back()))) item.remove_suffix(1);
    std::string name;
    for (const char c : item) name += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (name == "cpu")
      expect.cpu = true;
    else if (name == "gpu")
      expect.gpu = true;
    else if (name == "accelerator")
      expect.accelerator = true;
    else if (name == "all")
      expect.all = true;
    else
      return false;
    if (comma == std::string_view::npos) return true;
    text.remove_prefix(comma + 1);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const auto text = xdev_fuzz::text_of(data + 1, size - 1);
  const std::string value(text.substr(0, text.find('\0')));
  switch (data[0] % 3) {
    case 0: {
      ScopedVariable v("XDEV_OPENCL_DEVICE_TYPE", value);
      xdev_opencl::detail::DeviceTypes expect;
      bool documented = documented_device_type_list(value, expect);
      if (value.empty()) {
        documented = true;
        expect = {.all = true};
      }
      bool accepted = false;
      accepted_or_named("XDEV_OPENCL_DEVICE_TYPE", [&] {
        const auto got = xdev_opencl::detail::device_types_from_environment();
        accepted = true;
        XDEV_FUZZ_CHECK(got.cpu == expect.cpu && got.gpu == expect.gpu && got.accelerator == expect.accelerator &&
                        got.all == expect.all);
      });
      XDEV_FUZZ_CHECK(accepted == documented);
      break;
    }
    case 1: {
      ScopedVariable v("XDEV_CUDA_COMPLETION", value);
      bool accepted = false;
      accepted_or_named("XDEV_CUDA_COMPLETION", [&] {
        const auto mode = xdev_cuda::detail::completion_mode_from_environment();
        accepted = true;
        XDEV_FUZZ_CHECK(
            mode == (value == "host_func" ? xdev_cuda::CompletionMode::host_func : xdev_cuda::CompletionMode::poll));
      });
      XDEV_FUZZ_CHECK(accepted == (value.empty() || value == "poll" || value == "host_func"));
      break;
    }
    case 2: {
      ScopedVariable v("XDEV_USE_SPMD", value);
      bool accepted = false;
      accepted_or_named("XDEV_USE_SPMD", [&] {
        const bool on = xdev::accelerator::detail::spmd_requested_by_environment();
        accepted = true;
        XDEV_FUZZ_CHECK(on == (value == "1"));
      });
      XDEV_FUZZ_CHECK(accepted == (value.empty() || value == "0" || value == "1"));
      break;
    }
  }
  return 0;
}
