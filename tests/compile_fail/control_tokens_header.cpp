// expect-success
// Positive control of callback_without_tokens_header: the same callback compiles once
// <xdev/async/tokens.hpp> is included. Also checks what the typed core costs: it takes
// xdev::use_future without Asio's executor machinery (about a third of a second of every
// translation unit that includes it), which only tokens.hpp brings.
#include <xdev/device/device.hpp>
#include <xdev/device/runtime.hpp>

#if defined(BOOST_ASIO_ASSOCIATED_EXECUTOR_HPP) || defined(BOOST_ASIO_DISPATCH_HPP)
#error "<xdev/device/runtime.hpp> includes Asio's executor machinery: it belongs in <xdev/async/tokens.hpp>"
#endif

#include <xdev/async/tokens.hpp>

#include <exception>

#include "complete_backend.hpp"

using Mine = CompleteBackend<xdev::Capabilities<xdev::MaxInflight<8>>>;

int main() {
  xdev::Runtime<Mine> runtime;
  xdev::Future<int> f = runtime.device(0).execute([] { return 1; });
  runtime.device(0).execute([] {}, [](std::exception_ptr) {});
  return f.get() == 1 ? 0 : 1;
}
