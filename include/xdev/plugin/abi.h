/* xdev plugin ABI: the C boundary between xdev (the host) and a backend shipped as a shared library.
 *
 * This header is C (C99 and C++); it is the whole contract. No C++ exception, template, virtual or
 * standard-library type crosses it. A plugin written with xdev's C++ headers gets all of it from
 * XDEV_DEFINE_PLUGIN(MyBackend) (<xdev/plugin/define.hpp>); a plugin in another language fills
 * the table by hand.
 *
 * Versioning (see docs/plugins.md):
 * - The plugin exports one symbol, XDEV_PLUGIN_ENTRY_NAME (through Boost.DLL's alias mechanism:
 *   an extern "C" data symbol holding the address of an `xdev_plugin_entry_fn`). The major version
 *   is part of the symbol's name, so xdev recognises a plugin of another major without loading it.
 * - The entry returns the plugin's table. xdev reads `struct_size`, `abi_major` and `abi_minor`
 *   before calling anything else: a different major, or a minor below XDEV_ABI_MIN_MINOR, is
 *   rejected (errc::incompatible_abi) before any other plugin function runs; a newer minor is
 *   accepted and only the fields this header knows are read.
 * - Every struct passed across carries `struct_size` (its sizeof as the sender compiled it). A
 *   receiver rejects one smaller than its oldest supported version ("expected X, got Y") and reads
 *   only the fields it knows of a larger one. Fields are only ever appended within a major.
 *
 * Calling rules:
 * - Functions returning xdev_status return XDEV_OK (0) or an xdev::errc value; on failure they
 *   first call `err->set(err->context, code, message)` once. The message is copied by the host
 *   during that call: the plugin keeps ownership of its string.
 * - A function taking an `xdev_completion` either returns XDEV_OK and later calls
 *   `done->complete` exactly once (from any thread, possibly before returning), or returns an
 *   error and never calls it. The completion struct is only valid during the call: copy it.
 * - Optional entries (marked so) may be null: xdev then reports errc::unimplemented naming the
 *   entry, or, for an operation, runs xdev's CPU fallback; a null `describe_device` means no
 *   description.
 * - Memory handles (`xdev_memory`) are opaque 64-bit values chosen by the plugin; 0 means none.
 */
#ifndef XDEV_PLUGIN_ABI_H
#define XDEV_PLUGIN_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- versions ------------------------------------------------------------------------------ */

#define XDEV_ABI_MAJOR 1
/* Version history of major 1 (docs/plugins.md, "Versions", says more). Every minor after 1.1 only
 * adds: entries appended to the table, fields appended to a struct, codes or flags. xdev reads an
 * appended entry only from a table of that minor or newer whose `struct_size` covers it, uses a
 * group of entries only when all of them are non-null, and otherwise takes the documented way
 * around (its CPU fallback, the host's ordering, "unknown"); a plugin reads an appended field of
 * the host's structs only when their `struct_size` covers it. So older plugins keep working with a
 * newer xdev, and newer plugins with an older one.
 * - 1.0 (xdev 0.0's development table) is no longer accepted; 1.1 is the first stable table.
 * - 1.2 adds binary min/max (XDEV_BINARY_MIN, XDEV_BINARY_MAX); a 1.1 plugin never receives them.
 * - 1.3 appends `describe_device`.
 * - 1.4 adds XDEV_OP_EXP (`xdev_exp_args`) and appends its entry `exp`.
 * - 1.5 appends native in-order queues: `create_queue`, `destroy_queue`, `bind_queue`.
 * - 1.6 appends native markers: `record_marker`, `wait_marker`, `release_marker` (with queues only).
 * - 1.7 appends `device_times` to `xdev_completion` (the host's struct; the table is unchanged).
 * - 1.8 appends `device_properties` (`xdev_device_properties`).
 * - 1.9 adds the flag XDEV_PLUGIN_HOST_MEMORY (read only from a 1.9 or newer table), and appends
 *   user kernels given as source (`create_kernel`, `launch_kernel`, `destroy_kernel`) and pinned
 *   host memory (`allocate_host`, `deallocate_host`).
 * - 1.10 appends `offsets` to `xdev_kernel_launch` (kernels on windows; the table is unchanged):
 *   xdev passes a window only to a 1.10 or newer plugin and refuses the launch for an older one.
 * - 1.11 appends strided transfers: `copy_to_host_strided`, `copy_to_device_strided`
 *   (`xdev_strided_region`; without both, xdev copies a strided window one row at a time), and
 *   `copy_between_strided` (without it, one `copy_between` per row).
 * - 1.12 appends windows for operations: `open_window`, `close_window` (without both, an op on a
 *   window of an array at an offset runs through xdev's CPU fallback, which stages the window).
 * - 1.13 appends `device_type` to `xdev_device_properties` (the table is unchanged). */
#define XDEV_ABI_MINOR 13
/* The oldest minor of XDEV_ABI_MAJOR this xdev accepts. */
#define XDEV_ABI_MIN_MINOR 1

#define XDEV_PLUGIN_ENTRY_PREFIX "xdev_plugin_entry_v"
/* The entry symbol of this major: "xdev_plugin_entry_v1". */
#define XDEV_PLUGIN_ENTRY_NAME "xdev_plugin_entry_v1"

/* ---- status codes (the values of xdev::errc) ---------------------------------------------- */

typedef int32_t xdev_status;
#define XDEV_OK 0
#define XDEV_ERR_INVALID_ARGUMENT 1
#define XDEV_ERR_OUT_OF_MEMORY 2
#define XDEV_ERR_NOT_FOUND 3
#define XDEV_ERR_UNAVAILABLE 4
#define XDEV_ERR_UNIMPLEMENTED 5
#define XDEV_ERR_INCOMPATIBLE_ABI 6
#define XDEV_ERR_CANCELLED 7
#define XDEV_ERR_DEADLINE_EXCEEDED 8
#define XDEV_ERR_INTERNAL 9

/* ---- enumerations (the values of the xdev C++ enumerations) -------------------------------- */

/* xdev::DType */
#define XDEV_DTYPE_BOOL 0
#define XDEV_DTYPE_U8 1
#define XDEV_DTYPE_I32 2
#define XDEV_DTYPE_I64 3
#define XDEV_DTYPE_F16 4
#define XDEV_DTYPE_BF16 5
#define XDEV_DTYPE_F32 6
#define XDEV_DTYPE_F64 7
#define XDEV_DTYPE_COUNT 8

/* xdev::RngAlgorithm */
#define XDEV_RNG_PHILOX 0
#define XDEV_RNG_THREE_FRY 1

/* xdev::ops::OpKind: the optional operation entries, in table order. */
#define XDEV_OP_FILL 0
#define XDEV_OP_SCALE 1
#define XDEV_OP_AXPY 2
#define XDEV_OP_BINARY 3
#define XDEV_OP_SUM 4
#define XDEV_OP_SUM_AXIS 5
#define XDEV_OP_DOT 6
#define XDEV_OP_GEMM 7
#define XDEV_OP_GATHER 8
#define XDEV_OP_RNG 9
#define XDEV_OP_CONVERT 10
#define XDEV_OP_EXP 11 /* since 1.4 */
#define XDEV_OP_COUNT 12

/* xdev::ops::BinaryOp. MIN: `(b < a) ? b : a`; MAX: `(a < b) ? b : a` (a NaN in `a` propagates;
 * the result is one of the inputs, bit for bit). MIN and MAX since 1.2: a 1.1 plugin never receives
 * them; a newer one handles all four (or fails with XDEV_ERR_INVALID_ARGUMENT for an unknown code). */
#define XDEV_BINARY_ADD 0
#define XDEV_BINARY_MUL 1
#define XDEV_BINARY_MIN 2
#define XDEV_BINARY_MAX 3

/* xdev_plugin_api::flags. NEVER_UNLOAD: the library must never be unloaded (atexit handlers, threads). */
#define XDEV_PLUGIN_NEVER_UNLOAD 0x1u
/* Since 1.9: handles are host addresses, both ways: `allocate` returns the block's address, which
 * the process may read and write (from any thread, once the work submitted on it has completed),
 * and any live, suitably aligned host memory is accepted as a handle (a DLPack tensor's). xdev then
 * runs user C++ kernels as host tasks in device order (`execute`) and shares arrays through DLPack. */
#define XDEV_PLUGIN_HOST_MEMORY 0x2u

/* ---- value types ------------------------------------------------------------------------- */

/* Device memory, as the plugin names it (a pointer, a cl_mem, an offset...); 0 means none. */
typedef uint64_t xdev_memory;

/* Where a failing call reports its message. Supplied by the host; `set` copies `message`. */
typedef struct xdev_error {
  size_t struct_size;
  void* context;
  void (*set)(void* context, xdev_status code, const char* message);
} xdev_error;

/* Reports the end of asynchronous work: `complete(context, XDEV_OK, NULL)` on success, or an error
 * code and message (copied during the call). Called exactly once.
 * Since 1.7 (present when `struct_size` covers it; may be null): `device_times(context, begin_ns,
 * end_ns)`, called at most once, on the thread that calls `complete`, just before it: when the
 * device began and ended the work, in ns of the host's CLOCK_MONOTONIC (the plugin converts its
 * clock). xdev shows them in traces and profiler hooks and uses them for `Event::elapsed_time`. */
typedef struct xdev_completion {
  size_t struct_size;
  void* context;
  void (*complete)(void* context, xdev_status code, const char* message);
  /* ---- since 1.7 ---- */
  void (*device_times)(void* context, int64_t begin_ns, int64_t end_ns);
} xdev_completion;

/* Host code to run in device order (what xdev's `execute` submits). `run` never throws or longjmps;
 * the host records its failure itself. Called exactly once, before the matching completion. */
typedef struct xdev_host_task {
  size_t struct_size;
  void* context;
  void (*run)(void* context);
} xdev_host_task;

/* What the host tells the plugin at initialisation. */
typedef struct xdev_host_info {
  size_t struct_size;
  uint32_t abi_major;
  uint32_t abi_minor;
  const char* xdev_version; /* "0.1.0" */
  /* Optional diagnostics sink (may be null): level 0 = info, 1 = warning, 2 = error. */
  void* log_context;
  void (*log)(void* log_context, int32_t level, const char* message);
} xdev_host_info;

/* Options of one client (one backend object), PJRT's client-create options. */
typedef struct xdev_client_options {
  size_t struct_size;
  uint64_t max_inflight; /* the bound xdev will enforce; 0 = the plugin's capability */
  /* Multi-process configuration: this process's place among the processes on its host, so that
   * each local process takes its share of the devices. Single process: 0 of 1. */
  uint32_t local_rank;
  uint32_t local_world_size;
  uint32_t global_rank;
  uint32_t global_world_size;
} xdev_client_options;

/* The plugin's xdev::CapabilitySet, as plain data. */
typedef struct xdev_capabilities {
  size_t struct_size;
  uint64_t dense_gather_factor;
  uint32_t rng_default;      /* XDEV_RNG_* */
  uint32_t autocast_key;     /* xdev::AutocastKey: 0 none, 1 cpu, 2 cuda, 3 xla, 4 npu, 5 private_use */
  uint32_t autocast_dtype;   /* XDEV_DTYPE_* */
  uint32_t supported_dtypes; /* bit i = dtype i */
  uint64_t max_inflight;
  uint64_t memory_per_device;  /* bytes; 0 = unknown */
  uint32_t collective_backend; /* xdev::CollectiveKind: 0 direct, 1 ring, 2 mpi */
  int32_t priority;
} xdev_capabilities;

/* ---- operation arguments (xdev::ops::*Args; xdev has validated shapes, dtypes and devices) ---- */
/* Scalars travel as the bits of the element type (`*_bits`, low bytes, as memcpy would write). */

typedef struct xdev_fill_args {
  size_t struct_size;
  uint32_t dtype;
  xdev_memory x;
  uint64_t n;
  uint64_t value_bits;
} xdev_fill_args;

typedef struct xdev_scale_args {
  size_t struct_size;
  uint32_t dtype;
  xdev_memory x;
  uint64_t n;
  uint64_t alpha_bits;
} xdev_scale_args;

typedef struct xdev_axpy_args {
  size_t struct_size;
  uint32_t dtype;
  uint64_t alpha_bits;
  xdev_memory x;
  xdev_memory y;
  uint64_t n;
} xdev_axpy_args;

typedef struct xdev_binary_args {
  size_t struct_size;
  uint32_t dtype;
  uint32_t op; /* XDEV_BINARY_* */
  xdev_memory a;
  xdev_memory b;
  xdev_memory out;
  uint64_t n;
} xdev_binary_args;

/* `*result` is host memory holding one element of `dtype`, written before the completion. */
typedef struct xdev_sum_args {
  size_t struct_size;
  uint32_t dtype;
  xdev_memory x;
  uint64_t n;
  void* result;
} xdev_sum_args;

typedef struct xdev_sum_axis_args {
  size_t struct_size;
  uint32_t dtype;
  xdev_memory x;
  xdev_memory out;
  uint64_t outer;
  uint64_t axis;
  uint64_t inner;
} xdev_sum_axis_args;

typedef struct xdev_dot_args {
  size_t struct_size;
  uint32_t dtype;
  uint32_t compute_dtype;
  xdev_memory x;
  xdev_memory y;
  uint64_t n;
  void* result;
} xdev_dot_args;

typedef struct xdev_gemm_args {
  size_t struct_size;
  uint32_t dtype;
  uint32_t compute_dtype;
  uint32_t trans_a;
  uint32_t trans_b;
  uint64_t m;
  uint64_t n;
  uint64_t k;
  uint64_t alpha_bits;
  xdev_memory a;
  uint64_t lda;
  xdev_memory b;
  uint64_t ldb;
  uint64_t beta_bits;
  xdev_memory c;
  uint64_t ldc;
} xdev_gemm_args;

typedef struct xdev_gather_args {
  size_t struct_size;
  uint32_t dtype;
  uint32_t index_dtype; /* XDEV_DTYPE_I32 or XDEV_DTYPE_I64 */
  xdev_memory table;
  uint64_t rows;
  uint64_t cols;
  xdev_memory index;
  uint64_t n;
  xdev_memory out;
  uint32_t dense;
} xdev_gather_args;

typedef struct xdev_rng_args {
  size_t struct_size;
  uint32_t dtype;
  uint32_t algorithm; /* XDEV_RNG_* */
  xdev_memory out;
  uint64_t n;
  uint64_t seed;
  uint64_t offset;
  uint32_t normal;
  uint64_t mean_bits;
  uint64_t stddev_bits;
} xdev_rng_args;

typedef struct xdev_convert_args {
  size_t struct_size;
  uint32_t src_dtype;
  uint32_t dst_dtype;
  xdev_memory src;
  xdev_memory dst;
  uint64_t n;
} xdev_convert_args;

/* out[i] = e^x[i] (since 1.4): F32, F64, F16, BF16; out may be x. */
typedef struct xdev_exp_args {
  size_t struct_size;
  uint32_t dtype;
  xdev_memory x;
  xdev_memory out;
  uint64_t n;
} xdev_exp_args;

/* ---- the table ---------------------------------------------------------------------------- */

/* What a device is (since 1.8: `device_properties`). xdev sets `struct_size`, zeroes the rest and
 * sets `memory_free` to UINT64_MAX; the plugin writes the fields it knows that `struct_size` covers.
 * Strings are NUL-terminated, owned by the plugin, valid while the backend lives; null: unknown. */
typedef struct xdev_device_properties {
  size_t struct_size;
  const char* name;             /* the device's model: "NVIDIA H100 80GB HBM3", "pthread-skylake" */
  const char* vendor;           /* "NVIDIA Corporation" */
  const char* driver_version;   /* the driver's own version text */
  const char* architecture;     /* CUDA compute capability "9.0", OpenCL's CL_DEVICE_VERSION, "x86_64" */
  uint64_t compute_units;       /* SMs, compute units; 0: unknown */
  uint64_t max_work_group_size; /* the largest work-group (block) of a kernel; 0: none or unknown */
  uint64_t memory_total;        /* bytes of device memory; 0: unknown */
  uint64_t memory_free;         /* bytes the driver says are free now; UINT64_MAX: unknown */
  /* ---- since 1.13 ---- */
  uint32_t device_type; /* xdev::DeviceType: 0 unknown, 1 cpu, 2 gpu, 3 accelerator */
} xdev_device_properties;

/* ---- user kernels (since 1.9) ---------------------------------------------------------- */

/* xdev::KernelArgKind: what a kernel parameter is. */
#define XDEV_KERNEL_ARG_BUFFER 0 /* device memory of elements of `dtype` (`__global T*` in OpenCL C) */
#define XDEV_KERNEL_ARG_SCALAR 1 /* one value of `dtype`, by value */

typedef struct xdev_kernel_param {
  uint32_t kind;  /* XDEV_KERNEL_ARG_* */
  uint32_t dtype; /* XDEV_DTYPE_* */
} xdev_kernel_param;

/* A user kernel given as source (xdev::KernelSource). Everything is valid only during the call. */
typedef struct xdev_kernel_source {
  size_t struct_size;
  const char* language; /* NUL-terminated: "OpenCL C" */
  const char* source;   /* `source_size` bytes, not necessarily NUL-terminated */
  uint64_t source_size;
  const char* entry;   /* NUL-terminated: the kernel function's name */
  const char* options; /* NUL-terminated build options ("" for none) */
  uint32_t param_count;
  const xdev_kernel_param* params; /* `param_count` of them, in the signature's order */
} xdev_kernel_source;

/* One argument of a launch, for the parameter of the same index. */
typedef struct xdev_kernel_arg {
  xdev_memory memory;   /* XDEV_KERNEL_ARG_BUFFER: the whole allocation */
  uint64_t scalar_bits; /* XDEV_KERNEL_ARG_SCALAR: the value's bits (low bytes, as memcpy writes) */
} xdev_kernel_arg;

/* A launch, validated by xdev: `dims` is 1 to 3, every `global` extent at least 1; `local` is all
 * zero (the plugin's choice of work-group) or of the same dims, dividing `global`; one argument
 * per parameter, of the kind and dtype the parameter declares, buffers on the launch's device. */
typedef struct xdev_kernel_launch {
  size_t struct_size;
  uint32_t dims;
  uint64_t global[3];
  uint64_t local[3];
  uint32_t arg_count;
  const xdev_kernel_arg* args;
  /* Since 1.10: `arg_count` byte offsets, one per argument: where a buffer argument's window starts
   * in its allocation (the kernel's pointer starts there); 0 for whole ones and scalars; null: all 0. */
  const uint64_t* offsets;
} xdev_kernel_launch;

/* Since 1.11: a strided window of an allocation: `slices` slices of `rows` rows of `row_bytes`
 * bytes; row r of slice s starts `offset + s * slice_pitch + r * row_pitch` bytes into it, and on the
 * dense host side at byte `(s * rows + r) * row_bytes`. xdev passes `row_pitch >= row_bytes`,
 * `slice_pitch >= rows * row_pitch` and more than one row. */
typedef struct xdev_strided_region {
  size_t struct_size;
  uint64_t offset;
  uint64_t row_bytes;
  uint64_t rows;
  uint64_t row_pitch;
  uint64_t slices;
  uint64_t slice_pitch;
} xdev_strided_region;

typedef struct xdev_plugin_api {
  size_t struct_size;
  uint32_t abi_major;
  uint32_t abi_minor;
  const char* name;     /* the device type, upper case: "REF", "OPENCL" (what XDEV_DEVICE names) */
  const char* version;  /* the plugin's own version, free form: "1.2.0" */
  const char* platform; /* what it runs on, free form: "PoCL 3.1, 2 CPU devices" */
  uint32_t flags;       /* XDEV_PLUGIN_* */

  /* Called once per process, before anything below; thread-safety is the host's job. */
  xdev_status (*initialize)(const xdev_host_info* host, xdev_error* err);
  /* Creates a backend object (a client); the host creates one per process. */
  xdev_status (*create)(const xdev_client_options* options, void** backend, xdev_error* err);
  /* Destroys it after all its work completed and all its memory was released. Never fails. */
  void (*destroy)(void* backend);

  /* `*out` stays valid while the backend lives. */
  xdev_status (*capabilities)(void* backend, const xdev_capabilities** out, xdev_error* err);
  xdev_status (*device_count)(void* backend, uint64_t* out, xdev_error* err);

  xdev_status (*allocate)(void* backend, uint64_t device, uint64_t bytes, xdev_memory* out, xdev_error* err);
  void (*deallocate)(void* backend, uint64_t device, xdev_memory memory, uint64_t bytes);

  xdev_status (*copy_to_device)(void* backend, uint64_t device, const void* src, xdev_memory dst, uint64_t dst_offset,
                                uint64_t bytes, const xdev_completion* done, xdev_error* err);
  xdev_status (*copy_to_host)(void* backend, uint64_t device, xdev_memory src, uint64_t src_offset, void* dst,
                              uint64_t bytes, const xdev_completion* done, xdev_error* err);
  xdev_status (*copy_between)(void* backend, uint64_t src_device, xdev_memory src, uint64_t src_offset,
                              uint64_t dst_device, xdev_memory dst, uint64_t dst_offset, uint64_t bytes,
                              const xdev_completion* done, xdev_error* err);
  xdev_status (*execute)(void* backend, uint64_t device, const xdev_host_task* task, const xdev_completion* done,
                         xdev_error* err);

  /* Optional: which dtypes an operation entry accepts natively, as a bit mask: bit `dtype` for
   * single-dtype ops; bit `dtype * 8 + index_dtype` for GATHER; bit `src * 8 + dst` for CONVERT.
   * Null: every dtype xdev passes. A combination the mask leaves out runs xdev's CPU fallback. */
  uint64_t (*op_dtypes)(void* backend, uint32_t op);

  /* Optional operations (null: xdev's CPU fallback). */
  xdev_status (*fill)(void* backend, uint64_t device, const xdev_fill_args* args, const xdev_completion* done,
                      xdev_error* err);
  xdev_status (*scale)(void* backend, uint64_t device, const xdev_scale_args* args, const xdev_completion* done,
                       xdev_error* err);
  xdev_status (*axpy)(void* backend, uint64_t device, const xdev_axpy_args* args, const xdev_completion* done,
                      xdev_error* err);
  xdev_status (*binary)(void* backend, uint64_t device, const xdev_binary_args* args, const xdev_completion* done,
                        xdev_error* err);
  xdev_status (*sum)(void* backend, uint64_t device, const xdev_sum_args* args, const xdev_completion* done,
                     xdev_error* err);
  xdev_status (*sum_axis)(void* backend, uint64_t device, const xdev_sum_axis_args* args, const xdev_completion* done,
                          xdev_error* err);
  xdev_status (*dot)(void* backend, uint64_t device, const xdev_dot_args* args, const xdev_completion* done,
                     xdev_error* err);
  xdev_status (*gemm)(void* backend, uint64_t device, const xdev_gemm_args* args, const xdev_completion* done,
                      xdev_error* err);
  xdev_status (*gather)(void* backend, uint64_t device, const xdev_gather_args* args, const xdev_completion* done,
                        xdev_error* err);
  xdev_status (*rng)(void* backend, uint64_t device, const xdev_rng_args* args, const xdev_completion* done,
                     xdev_error* err);
  xdev_status (*convert)(void* backend, uint64_t device, const xdev_convert_args* args, const xdev_completion* done,
                         xdev_error* err);

  /* ---- since 1.3 (read only when `abi_minor` >= 3 and `struct_size` covers the field) ---- */

  /* Optional: what device `device` is, for people (xdev-info, logs): `*out` is a NUL-terminated
   * human-readable description ("PoCL 3.1 / pthread-skylake (CPU), 2 compute units, 11.5 GiB"),
   * owned by the plugin and valid while the backend lives. Null entry, or a null or empty `*out`:
   * the device has no description. */
  xdev_status (*describe_device)(void* backend, uint64_t device, const char** out, xdev_error* err);

  /* ---- since 1.4 (read only when `abi_minor` >= 4 and `struct_size` covers the field) ---- */

  /* Optional operation XDEV_OP_EXP (null: xdev's CPU fallback). */
  xdev_status (*exp)(void* backend, uint64_t device, const xdev_exp_args* args, const xdev_completion* done,
                     xdev_error* err);

  /* ---- since 1.5 (read only when `abi_minor` >= 5 and `struct_size` covers the field) ---- */

  /* Optional native in-order queues (all three, or none: then xdev orders each stream on the host).
   * xdev creates one queue per stream, and binds it to the thread that starts an operation of that
   * stream for the duration of the call:
   * - create_queue: a new in-order queue on `device`; `*out` is an opaque nonzero handle.
   * - destroy_queue: called once per queue, after every operation submitted to it has completed.
   * - bind_queue: until the next bind_queue for `device` on the calling thread, the calls this
   *   thread makes for `device` enqueue their work on `queue` (0: the plugin's own default).
   * xdev then starts a stream's operations without waiting for the ones before it: the work of a
   * call made while a queue is bound must run after the work of earlier calls bound to the same
   * queue has finished, host tasks (`execute`) included, and complete in that order. */
  xdev_status (*create_queue)(void* backend, uint64_t device, uint64_t* out, xdev_error* err);
  void (*destroy_queue)(void* backend, uint64_t device, uint64_t queue);
  void (*bind_queue)(void* backend, uint64_t device, uint64_t queue);

  /* ---- since 1.6 (read only when `abi_minor` >= 6 and `struct_size` covers the field) ---- */

  /* Optional native markers (all three, or none; used only with the 1.5 queues). They let a stream
   * wait for an event recorded on another stream of the same device without the host:
   * - record_marker: on the queue bound to the calling thread, a marker; `done` is called once
   *   everything enqueued on that queue before it has completed. `*out` is an opaque nonzero handle.
   * - wait_marker: the work enqueued later on the queue bound to the calling thread runs after
   *   `marker` (recorded on any queue of the same device) has been reached. xdev only waits on a
   *   marker it has not yet released.
   * - release_marker: called once per marker, after its `done` has been called; xdev never uses
   *   the handle afterwards. */
  xdev_status (*record_marker)(void* backend, uint64_t device, const xdev_completion* done, uint64_t* out,
                               xdev_error* err);
  xdev_status (*wait_marker)(void* backend, uint64_t device, uint64_t marker, xdev_error* err);
  void (*release_marker)(void* backend, uint64_t device, uint64_t marker);

  /* ---- since 1.8 (read only when `abi_minor` >= 8 and `struct_size` covers the field) ---- */

  /* Optional: what device `device` is, as typed fields (see `xdev_device_properties`). Asked each
   * time `properties()` is called, so `memory_free` may be the driver's figure of the moment.
   * Null entry: every field unknown. */
  xdev_status (*device_properties)(void* backend, uint64_t device, xdev_device_properties* out, xdev_error* err);

  /* ---- since 1.9 (read only when `abi_minor` >= 9 and `struct_size` covers the field) ---- */

  /* Optional user kernels given as source (all three, or none: then xdev::Kernel refuses the
   * plugin's devices with XDEV_ERR_UNIMPLEMENTED):
   * - create_kernel: takes a kernel's source (copy what you keep); `*out` is an opaque nonzero
   *   handle shared by every device. A language the plugin does not compile is
   *   XDEV_ERR_UNIMPLEMENTED naming it; it may compile now or on the first launch per device.
   * - launch_kernel: runs `kernel` on `device` like an operation (on the bound queue, completing
   *   `done`). The first launch on a device compiles the kernel there, and later launches reuse
   *   it; a build failure is XDEV_ERR_INVALID_ARGUMENT whose message carries the build log, and a
   *   parameter list that disagrees with the source is XDEV_ERR_INVALID_ARGUMENT naming it.
   * - destroy_kernel: called once per kernel when xdev launches it no more; the launches already
   *   made still run to completion. */
  xdev_status (*create_kernel)(void* backend, const xdev_kernel_source* source, uint64_t* out, xdev_error* err);
  xdev_status (*launch_kernel)(void* backend, uint64_t device, uint64_t kernel, const xdev_kernel_launch* launch,
                               const xdev_completion* done, xdev_error* err);
  void (*destroy_kernel)(void* backend, uint64_t kernel);

  /* Optional pinned host memory (both, or neither: then xdev::pinned gives ordinary host memory):
   * - allocate_host: `*out` is the host address of `bytes` bytes (at least 1) of host memory that
   *   `device` reads and writes fast (page-locked, device-mapped), 64-byte aligned, readable and
   *   writable by the process until deallocate_host. xdev passes it to the transfer entries as
   *   `src`/`dst` like any host memory: the plugin should recognise it and skip any staging.
   * - deallocate_host: gives it back, after every transfer that used it has completed. */
  xdev_status (*allocate_host)(void* backend, uint64_t device, uint64_t bytes, void** out, xdev_error* err);
  void (*deallocate_host)(void* backend, uint64_t device, void* memory, uint64_t bytes);

  /* ---- since 1.11 (read only when `abi_minor` >= 11 and `struct_size` covers the field) ---- */

  /* Optional strided transfers (both, or neither: then xdev copies a strided window one row at a
   * time): the rows of `region` of `src` to dense host memory `dst`, and dense host memory `src`
   * into the rows of `region` of `dst`, each as one operation (on the bound queue, completing
   * `done`; `clEnqueueReadBufferRect` / `clEnqueueWriteBufferRect`). */
  xdev_status (*copy_to_host_strided)(void* backend, uint64_t device, xdev_memory src,
                                      const xdev_strided_region* region, void* dst, const xdev_completion* done,
                                      xdev_error* err);
  xdev_status (*copy_to_device_strided)(void* backend, uint64_t device, const void* src, xdev_memory dst,
                                        const xdev_strided_region* region, const xdev_completion* done,
                                        xdev_error* err);
  /* Optional on its own (null: one `copy_between` per row): each row of `src_region` of `src` to the
   * same row of `dst_region` of `dst`, as one operation (the regions have the same rows). */
  xdev_status (*copy_between_strided)(void* backend, uint64_t src_device, xdev_memory src,
                                      const xdev_strided_region* src_region, uint64_t dst_device, xdev_memory dst,
                                      const xdev_strided_region* dst_region, const xdev_completion* done,
                                      xdev_error* err);

  /* ---- since 1.12 (read only when `abi_minor` >= 12 and `struct_size` covers the field) ---- */

  /* Optional windows for operations (both, or neither): `open_window` sets `*out` to a handle of
   * the memory of `memory` from byte `offset` on, which the operation entries accept like an
   * allocation's (a sub-buffer), or to 0 when the device has none there (an offset below its base
   * alignment): xdev then runs that op through its CPU fallback. `close_window` is called once per
   * window, after the operation entry it was passed to returned (its work may still be running). */
  xdev_status (*open_window)(void* backend, uint64_t device, xdev_memory memory, uint64_t offset, xdev_memory* out,
                             xdev_error* err);
  void (*close_window)(void* backend, uint64_t device, xdev_memory window);
} xdev_plugin_api;

/* The entry: returns the plugin's table (static storage; never null for a working plugin). It must
 * not do anything else: xdev calls it before it has checked the ABI version. */
typedef const xdev_plugin_api* (*xdev_plugin_entry_fn)(void);

#ifdef __cplusplus
}
#endif

#endif /* XDEV_PLUGIN_ABI_H */
