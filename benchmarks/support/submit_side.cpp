// One side of bench_submit's hooks comparison, built twice as shared libraries of their own:
// `hooks` (xdev as every program gets it: the profiler hooks compiled in, no listener installed)
// and `plain` (the same source with XDEV_NO_PROFILER_HOOKS: the hooks compiled out). Each runs the
// submissions of callback_batch's `xdev_unbounded` side on a host runtime of its own. Hidden
// visibility keeps each library's inline functions and templates its own, so the two copies of
// xdev do not merge; both are built and loaded alike, so the only difference is the hooks. Only
// the three C functions below are exported, named after XDEV_BENCH_SIDE.
#include "support/countdown.hpp"

#include <xdev/async/tokens.hpp>
#include <xdev/backends/host.hpp>
#include <xdev/device/runtime.hpp>

#include <cstddef>
#include <cstdint>
#include <exception>

#ifndef XDEV_BENCH_SIDE
#error "submit_side.cpp needs XDEV_BENCH_SIDE (hooks or plain)"
#endif
#define XDEV_BENCH_CAT2(a, b, c) a##b##c
#define XDEV_BENCH_CAT(a, b, c) XDEV_BENCH_CAT2(a, b, c)
#define XDEV_BENCH_FN(name) XDEV_BENCH_CAT(xdev_bench_, XDEV_BENCH_SIDE, name)
#define XDEV_BENCH_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using Host = xdev::backends::Host;

struct Side {
  xdev::Runtime<Host> runtime{xdev::RuntimeOptions{.max_inflight = std::size_t{1} << 20}};
  xdev::Device<Host> dev = runtime.device(0);
  xdev_bench::Countdown done;
};

}  // namespace

XDEV_BENCH_EXPORT void* XDEV_BENCH_FN(_create)() {
  return new Side;
}

XDEV_BENCH_EXPORT void XDEV_BENCH_FN(_destroy)(void* p) {
  delete static_cast<Side*>(p);
}

// `batches` batches of `batch_size` empty host functions with a callback each, each batch waited
// for as a whole: what callback_batch's xdev sides do.
XDEV_BENCH_EXPORT void XDEV_BENCH_FN(_callback_batches)(void* p, std::int64_t batches, int batch_size) {
  auto& side = *static_cast<Side*>(p);
  auto on_done = [&side](std::exception_ptr) { side.done.count_down(); };
  for (std::int64_t b = 0; b < batches; ++b) {
    side.done.reset(batch_size);
    for (int i = 0; i < batch_size; ++i) side.dev.execute([] {}, on_done);
    side.done.wait();
  }
}
