// expect: needs #include <xdev/async/tokens.hpp>
// Mistake: a callback token with only the typed core included. The core delivers to
// xdev::use_future without Asio's executor machinery; any other token needs <xdev/async/tokens.hpp>,
// and the compiler must say so in one error instead of failing inside Asio.
#include <xdev/device/device.hpp>
#include <xdev/device/runtime.hpp>

#include <exception>

#include "complete_backend.hpp"

using Mine = CompleteBackend<xdev::Capabilities<xdev::MaxInflight<8>>>;

int main() {
  xdev::Runtime<Mine> runtime;
  runtime.device(0).execute([] {}, [](std::exception_ptr) {});
}
