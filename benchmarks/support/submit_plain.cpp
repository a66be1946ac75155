// The `plain` side of bench_submit's callback_batch: the same submissions as its `xdev_unbounded`
// side, from a copy of xdev compiled with XDEV_NO_PROFILER_HOOKS (the profiler hooks compiled
// out). Built as a shared library with hidden visibility, so that its inline functions and
// templates stay its own and do not merge with the benchmark's (which has the hooks, off); only
// the three C functions below are exported.
#include "support/countdown.hpp"

#include <xdev/backends/host.hpp>
#include <xdev/device/runtime.hpp>

#include <cstddef>
#include <cstdint>
#include <exception>

#ifndef XDEV_NO_PROFILER_HOOKS
#error "submit_plain.cpp must be compiled with XDEV_NO_PROFILER_HOOKS"
#endif

#define XDEV_BENCH_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using Host = xdev::backends::Host;

struct Plain {
  xdev::Runtime<Host> runtime{xdev::RuntimeOptions{.max_inflight = std::size_t{1} << 20}};
  xdev::Device<Host> dev = runtime.device(0);
  xdev_bench::Countdown done;
};

}  // namespace

XDEV_BENCH_EXPORT void* xdev_bench_plain_create() {
  return new Plain;
}

XDEV_BENCH_EXPORT void xdev_bench_plain_destroy(void* p) {
  delete static_cast<Plain*>(p);
}

// `batches` batches of `batch_size` empty host functions with a callback each, each batch waited
// for as a whole: what callback_batch's xdev sides do.
XDEV_BENCH_EXPORT void xdev_bench_plain_callback_batches(void* p, std::int64_t batches, int batch_size) {
  auto& plain = *static_cast<Plain*>(p);
  auto on_done = [&plain](std::exception_ptr) { plain.done.count_down(); };
  for (std::int64_t b = 0; b < batches; ++b) {
    plain.done.reset(batch_size);
    for (int i = 0; i < batch_size; ++i) plain.dev.execute([] {}, on_done);
    plain.done.wait();
  }
}
