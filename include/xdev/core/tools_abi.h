/* The C ABI of an xdev tools library: a shared library named in XDEV_TOOLS_LIBS (or given to
 * xdev::tools::load_library) that xdev loads, through the same hardened loader as its backend
 * plugins, and calls for every activity the profiler hooks report (<xdev/core/tools.hpp>), as
 * Kokkos calls the libraries of KOKKOS_TOOLS_LIBS. A profiler plugs in without recompiling the
 * program. docs/observability.md has a complete example.
 *
 * The library exports one C function, XDEV_TOOLS_ENTRY_NAME:
 *
 *     const xdev_tools_library* xdev_tools_entry_v1(uint32_t host_abi_version);
 *
 * It returns its table (static storage; NULL refuses to be loaded). xdev checks the table before
 * it calls anything else, calls `callback` from any thread, concurrently (it must be thread-safe
 * and must not call back into xdev), and `finalize`, if set, once at process exit after the last
 * callback. Nothing may be thrown across these functions. Every string of an activity is a pointer
 * and a length (not NUL-terminated), valid during the call only.
 *
 * Versioning: `struct_size` of both structures guards their growth. A newer xdev adds fields at
 * the end of `xdev_tools_activity` and sets its `struct_size`; a library reads a field only when
 * `struct_size` covers it. */
#ifndef XDEV_TOOLS_ABI_H
#define XDEV_TOOLS_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this ABI; a table of another version is refused. */
#define XDEV_TOOLS_ABI_VERSION 1u
/* The symbol a tools library exports. */
#define XDEV_TOOLS_ENTRY_NAME "xdev_tools_entry_v1"

/* What a callback reports (xdev::tools::Listener's begin, end and instant). */
typedef enum xdev_tools_phase { XDEV_TOOLS_BEGIN = 0, XDEV_TOOLS_END = 1, XDEV_TOOLS_INSTANT = 2 } xdev_tools_phase;

/* One activity (xdev::tools::Activity). `category` is the value of xdev::tools::Category and
 * `category_name` its name ("op", "transfer", ...; new categories may appear: skip what you do
 * not know). `time_ns`: the steady clock (CLOCK_MONOTONIC on Linux) in nanoseconds. `error`: at
 * the end of a failed activity, its message (length 0 and a NULL pointer otherwise). */
typedef struct xdev_tools_activity {
  uint32_t struct_size;
  uint32_t category;
  const char* category_name;
  uint64_t id;
  const char* name;
  uint64_t name_length;
  const char* device;
  uint64_t device_length;
  uint64_t stream;
  uint64_t bytes;
  const char* dtype;
  uint64_t dtype_length;
  int64_t time_ns;
  uint64_t in_use;
  uint64_t event;
  const char* error;
  uint64_t error_length;
} xdev_tools_activity;

/* The table a tools library returns. `callback` is required; `context` is passed back to it and
 * to `finalize` as is. */
typedef struct xdev_tools_library {
  uint32_t struct_size; /* sizeof(xdev_tools_library) as the library was built */
  uint32_t abi_version; /* XDEV_TOOLS_ABI_VERSION */
  const char* name;     /* for messages: "my-profiler" (NUL-terminated, non-empty) */
  void (*callback)(void* context, uint32_t phase, const xdev_tools_activity* activity);
  void (*finalize)(void* context);
  void* context;
} xdev_tools_library;

typedef const xdev_tools_library* (*xdev_tools_entry_fn)(uint32_t host_abi_version);

#ifdef __cplusplus
}
#endif

#endif /* XDEV_TOOLS_ABI_H */
