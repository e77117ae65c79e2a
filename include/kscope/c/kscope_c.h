/* kscope/c/kscope_c.h — kscope's C interface, for languages that load a shared library
 * (Python's ctypes: the kscope Python package, docs/python.md) and for C programs.
 *
 *   uint32_t site;
 *   kscope_site_register("decode", 6, &site);           // once per name
 *   kscope_scope_handle s = kscope_scope_open_stream(site, (uintptr_t)stream);
 *   ... launch work on stream ...
 *   kscope_scope_close(s);
 *   kscope_report* r = NULL;
 *   if (kscope_report_create(&r) == KSCOPE_OK) {
 *     char* text = NULL; size_t size = 0;
 *     if (kscope_report_format(r, KSCOPE_FORMAT_TEXT, &text, &size) == KSCOPE_OK) fwrite(text, 1, size, stdout);
 *     kscope_free(text);
 *     kscope_report_destroy(r);
 *   }
 *
 * The library is libkscope_c.so, built from src/kscope_c.cpp over kscope's compiled mode
 * (CMake target kscope_c; KSCOPE_BUILD_PYTHON). It links the CUDA runtime only, as every
 * kscope binary does, so it loads on a machine without a GPU driver.
 *
 * The rules every function follows:
 *   - No C++ exception crosses this interface, and nothing here ends the process.
 *   - A function that can fail returns a kscope_status; on a failure (anything but
 *     KSCOPE_OK and KSCOPE_WOULD_BLOCK, which is no failure), kscope_last_error() holds one
 *     line saying why, for the calling thread, until the thread's next failing call. Output
 *     parameters are left as they were on failure.
 *   - Handles (kscope_report, kscope_range, kscope_bench) are opaque; NULL is accepted
 *     wherever a handle is destroyed and answered with KSCOPE_ERROR_INVALID_ARGUMENT
 *     wherever one is used.
 *   - Text comes back in buffers the library allocates (NUL-terminated, with the size
 *     given apart so that binary-safe callers need not scan it); release each with
 *     kscope_free().
 *   - Names and text going in are (pointer, size) pairs: they need no terminating NUL and
 *     may hold any bytes (kscope escapes them where it prints them).
 */
#ifndef KSCOPE_C_KSCOPE_C_H
#define KSCOPE_C_KSCOPE_C_H

#include <stddef.h>
#include <stdint.h>

/* Raised when a function changes meaning or signature; a function added keeps it. The
 * Python package refuses a library whose version differs from the one it was written for. */
#define KSCOPE_C_ABI_VERSION 1

#if defined(__GNUC__) || defined(__clang__)
#  define KSCOPE_C_API __attribute__((visibility("default")))
#else
#  define KSCOPE_C_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* What a call returns. The values are part of the ABI. */
typedef enum kscope_status {
  KSCOPE_OK = 0,
  KSCOPE_ERROR_INVALID_ARGUMENT = 1, /* a null pointer, a size out of range, malformed options */
  KSCOPE_ERROR_NOT_FOUND = 2,        /* an unknown site id, a scope handle not open on this thread */
  KSCOPE_ERROR_ORDER = 3,            /* a scope closed while scopes opened after it were still open */
  KSCOPE_ERROR_UNAVAILABLE = 4,      /* not possible here: no GPU, CUPTI missing or owned by another tool */
  KSCOPE_ERROR_IO = 5,               /* a file could not be written */
  KSCOPE_ERROR_LIMIT = 6,            /* a bound was reached (sites, nesting depth, memory) */
  KSCOPE_ERROR_CALLBACK = 7,         /* a callback of the caller's failed */
  KSCOPE_ERROR_INTERNAL = 8,         /* kscope itself failed; the message says where */
  KSCOPE_WOULD_BLOCK = 9             /* kscope_scope_try_close only: nothing done, call kscope_scope_close */
} kscope_status;

/* The formats a report prints to. */
typedef enum kscope_format {
  KSCOPE_FORMAT_TEXT = 0,
  KSCOPE_FORMAT_JSON = 1, /* kscope.report/2, docs/report_schema.md */
  KSCOPE_FORMAT_CSV = 2,
  KSCOPE_FORMAT_HTML = 3, /* with the SVG roofline */
  KSCOPE_FORMAT_OPENMETRICS = 4
} kscope_format;

/* How a benchmark is timed (kscope_bench_run). */
typedef enum kscope_timer {
  KSCOPE_TIMER_CUDA = 0, /* CUDA events on the benchmark's stream: the harness of bench/bench.hpp */
  KSCOPE_TIMER_HOST = 1  /* the steady clock around each batch of calls, on the calling thread */
} kscope_timer;

/* An open scope: positive, unique among the scopes open on its thread; 0 (disabled), -1
 * (an error) and KSCOPE_SCOPE_WOULD_BLOCK (the try functions only) mean nothing was opened.
 * An int, so that a caller without declared prototypes (ctypes' defaults: the cheapest calls
 * Python can make) passes it as it passes any small integer. */
typedef int kscope_scope_handle;

/* kscope_scope_try_open's answer when opening may block: nothing opened, no error. */
#define KSCOPE_SCOPE_WOULD_BLOCK (-2)

typedef struct kscope_report kscope_report;
typedef struct kscope_range kscope_range;
typedef struct kscope_bench kscope_bench;
typedef struct kscope_output_sink kscope_output_sink;

/* ---- the library ------------------------------------------------------------------ */

/* KSCOPE_C_ABI_VERSION of the library loaded. */
KSCOPE_C_API int kscope_c_abi_version(void);
/* kscope's version, "0.1.0" (static storage). */
KSCOPE_C_API const char* kscope_c_version(void);
/* Why this thread's most recent failing call failed; "" when none has (never NULL; valid
 * until this thread's next failing call). */
KSCOPE_C_API const char* kscope_last_error(void);
/* Releases a buffer the library returned; NULL is a no-op. */
KSCOPE_C_API void kscope_free(void* buffer);

/* ---- scopes ------------------------------------------------------------------------ */

/* The site id of a scope name (registered once, then found: the same name gives the same
 * id). A site's name is kept for the life of the process, so ids are for names that
 * recur; at most 65 536 distinct names (KSCOPE_ERROR_LIMIT after that: per-request data
 * belongs in tags; kscope_scope_open_named takes such a name). Names of up to 255 bytes
 * open as fast as a string literal in C++ (a call site caches the node); longer ones are
 * looked up by their text at each opening. */
KSCOPE_C_API kscope_status kscope_site_register(const char* name, size_t size, uint32_t* site);

/* Opens a scope on the calling thread, nested in the scope open there; it must be closed
 * on the same thread. Returns its handle (> 0); 0 when kscope is disabled (no scope, and
 * no error: kscope_is_enabled() is 0); -1 when it could not open one, which
 * kscope_last_error() names. */
KSCOPE_C_API kscope_scope_handle kscope_scope_open(uint32_t site);
/* The same with GPU time from CUDA events recorded on `stream` (a cudaStream_t; 0 is the
 * legacy default stream). The stream must outlive the scope's close. */
KSCOPE_C_API kscope_scope_handle kscope_scope_open_stream(uint32_t site, uintptr_t stream);
/* Opens a scope by name, without a site (names that do not recur; slower). */
KSCOPE_C_API kscope_scope_handle kscope_scope_open_named(const char* name, size_t size, int has_stream,
                                                         uintptr_t stream);
/* Closes a scope opened on this thread. Closing a scope while scopes opened after it are
 * still open closes those first (they end now) and returns KSCOPE_ERROR_ORDER naming
 * them; closing them later, or closing twice, returns KSCOPE_ERROR_NOT_FOUND. A handle
 * of 0, -1 or KSCOPE_SCOPE_WOULD_BLOCK (nothing opened) is a no-op (KSCOPE_OK). A
 * handle's number comes back after about a million openings on its thread, so a handle
 * kept after its close may name a later scope: close each handle once. */
KSCOPE_C_API kscope_status kscope_scope_close(kscope_scope_handle scope);
/* kscope_scope_open, _open_stream and _close for a caller that holds a lock of its own
 * across the call, such as Python's GIL (the kscope package calls these through
 * ctypes.PyDLL, which keeps it): each does what the plain call does when that cannot block,
 * and nothing otherwise. Opening and
 * closing block only while per-scope hardware counters are on (kscope_enable_counters,
 * session::enable_counters in C++, KSCOPE_COUNTERS): the open and close of a call they
 * profile set up CUPTI, synchronize the device, sweep the L2 cache and decode the counters,
 * milliseconds or more, waiting for the GPU work queued before them (a host callback in it
 * that needs the caller's lock would wait forever). Then kscope_scope_try_open returns
 * KSCOPE_SCOPE_WOULD_BLOCK, having opened nothing, whenever counters are on, and
 * kscope_scope_try_close returns KSCOPE_WOULD_BLOCK, having closed nothing, for anything
 * but this thread's innermost scope unprofiled (a profiled call, a close out of order, a
 * handle not open), and for the thread's outermost scope while the collector traces in
 * windows of steps (its close may pause or resume CUPTI): release the lock and make the
 * plain call, which also names any mistake.
 * With counters off each costs what the plain call costs. */
KSCOPE_C_API kscope_scope_handle kscope_scope_try_open(uint32_t site);
KSCOPE_C_API kscope_scope_handle kscope_scope_try_open_stream(uint32_t site, uintptr_t stream);
KSCOPE_C_API kscope_status kscope_scope_try_close(kscope_scope_handle scope);
/* The work one call does (flops, bytes; NaN: not declared); the last call wins. */
KSCOPE_C_API kscope_status kscope_scope_set_work(kscope_scope_handle scope, double flops, double bytes);
/* A key=value tag on the open scope (shape, dtype, batch size); the report counts values. */
KSCOPE_C_API kscope_status kscope_scope_tag(kscope_scope_handle scope, const char* key, size_t key_size,
                                            const char* value, size_t value_size);

/* ---- cross-thread ranges ------------------------------------------------------------ */

/* Starts a range under the scope open on the calling thread; it may end on any thread.
 * Kernels are not attributed to it. *range is NULL when kscope is disabled. */
KSCOPE_C_API kscope_status kscope_range_start(uint32_t site, kscope_range** range);
KSCOPE_C_API kscope_status kscope_range_set_work(kscope_range* range, double flops, double bytes);
/* Ends the range and releases the handle (NULL: no-op). */
KSCOPE_C_API kscope_status kscope_range_end(kscope_range* range);

/* ---- run-time switches -------------------------------------------------------------- */

KSCOPE_C_API void kscope_set_enabled(int on);
KSCOPE_C_API int kscope_is_enabled(void);
KSCOPE_C_API void kscope_set_nvtx(int on);

/* ---- the session ------------------------------------------------------------------- */

/* Starts the CUPTI activity collector; `options` is KSCOPE_CUPTI_OPTIONS' "key=value,..."
 * text or NULL. KSCOPE_ERROR_UNAVAILABLE (with the collector's one line: no CUPTI, owned
 * by another tool such as Nsight or torch.profiler, no GPU) leaves scopes timed by CUDA
 * events only; an option not understood is KSCOPE_ERROR_INVALID_ARGUMENT and starts nothing. */
KSCOPE_C_API kscope_status kscope_enable_cupti(const char* options);
/* The production preset (session::enable_production). */
KSCOPE_C_API kscope_status kscope_enable_production(void);
/* Tracing in windows chosen by the program (cupti_collector::pause_tracing / resume_tracing):
 * pause stops recording launches until resume; the report then says that its GPU figures
 * rest on the windows traced. KSCOPE_OK when tracing is paused (resumed) after the call;
 * KSCOPE_ERROR_UNAVAILABLE when the collector is not running, or CUPTI refused. */
KSCOPE_C_API kscope_status kscope_pause_tracing(void);
KSCOPE_C_API kscope_status kscope_resume_tracing(void);
/* GPU metrics sampled while running; `step_scopes`: scope names separated by '\n' (or
 * NULL) whose calls get per-step distributions. */
KSCOPE_C_API kscope_status kscope_enable_metric_sampling(const char* step_scopes);
KSCOPE_C_API void kscope_disable_metric_sampling(void);
/* Hardware counters per scope; kernel_replay != 0 profiles every metric by kernel replay.
 * A profiled call is a whole step: a call of each thread's outermost scope, each kernel
 * counted in the scope that launched it (kscope_enable_counters_steps(k, 1, NULL)). */
KSCOPE_C_API kscope_status kscope_enable_counters(int kernel_replay);
/* The same, with what a profiled call is: whole_steps != 0, a whole step (a call of the scope
 * named `step_scope`, or of each thread's outermost scope when it is NULL or empty); 0, each
 * scope's calls on their own (`step_scope` must then be NULL or empty:
 * KSCOPE_ERROR_INVALID_ARGUMENT otherwise). */
KSCOPE_C_API kscope_status kscope_enable_counters_steps(int kernel_replay, int whole_steps, const char* step_scope);
KSCOPE_C_API void kscope_disable_counters(void);
/* Forgets every sample, tag and GPU record so far (site ids stay valid). */
KSCOPE_C_API void kscope_session_reset(void);
/* A warning shown once in later reports. */
KSCOPE_C_API kscope_status kscope_session_warn(const char* message, size_t size);
/* The Chrome trace / Perfetto JSON of the session so far. */
KSCOPE_C_API kscope_status kscope_write_trace(const char* path);

/* ---- reports ----------------------------------------------------------------------- */

/* The session's report now (session::report()). */
KSCOPE_C_API kscope_status kscope_report_create(kscope_report** report);
/* A report read back from kscope.report/2 (or /1) JSON (a file's content). */
KSCOPE_C_API kscope_status kscope_report_parse(const char* json, size_t size, kscope_report** report);
KSCOPE_C_API void kscope_report_destroy(kscope_report* report);
KSCOPE_C_API kscope_status kscope_report_format(const kscope_report* report, int format, char** text, size_t* size);
/* Writes the format to `path`, all or nothing. */
KSCOPE_C_API kscope_status kscope_report_write(const kscope_report* report, int format, const char* path);
/* The one verdict of the scope at `path` ("step/decode", `path_size` bytes): its class, limiting
 * unit, % of peak, the source and metric it rests on, how many calls or samples, its text and
 * the evidence under it, as the JSON object of docs/report_schema.md (`scopes[].verdict`);
 * "null" when the scope has none (a host-only scope). KSCOPE_ERROR_NOT_FOUND when the report
 * has no scope at `path`. */
KSCOPE_C_API kscope_status kscope_report_verdict(const kscope_report* report, const char* path, size_t path_size,
                                                 char** json, size_t* json_size);
/* Adds a section of the caller's own to the report (report/section.hpp): every format then
 * prints it under `key` (1-64 of a-z 0-9 _ -, not a name of the report's own sections; text and
 * JSON in `text_size` / `json_size` bytes): `text` in the text and HTML reports, `json` (one
 * JSON value) as its "data" in the JSON. KSCOPE_ERROR_INVALID_ARGUMENT for a bad key, a key the
 * report has already, or `json` that is not one JSON value; nothing added then. */
KSCOPE_C_API kscope_status kscope_report_add_section(kscope_report* report, const char* key, const char* heading,
                                                     const char* text, size_t text_size, const char* json,
                                                     size_t json_size);
/* The serving diagnosis (verdict/diagnose.hpp) of a report: `json` gets
 * kscope.diagnosis/1, `text` the printed findings (either may be NULL). `options` is NULL
 * or a JSON object of diagnose_options' members (kscope_diagnose_options lists them):
 * "step_names", "prefill_names", "decode_names", "sync_names", "kv_names", "weight_names"
 * (arrays of strings) and the numbers "low_busy_share", "step_tail_ratio",
 * "prefill_max_step_share", "prefill_explains", "min_step_calls", "busy_share_high",
 * "decode_min_gpu_share", "comm_share", "sync_idle_share", "sync_copies_per_step",
 * "kv_bytes_share", "host_link_bytes_per_s" (null: unknown). */
KSCOPE_C_API kscope_status kscope_diagnose(const kscope_report* report, const char* options, char** json,
                                           size_t* json_size, char** text, size_t* text_size);
/* Every option kscope_diagnose takes, with its default, as one JSON object (an array of
 * strings for the names, a number, or null for an unknown number): the list the options
 * are declared in once (KSCOPE_DIAGNOSE_OPTIONS, verdict/diagnose.hpp). */
KSCOPE_C_API kscope_status kscope_diagnose_options(char** json, size_t* json_size);

/* ---- benchmarks -------------------------------------------------------------------- */

/* One call of the benchmark: launch the work on `stream` (KSCOPE_TIMER_CUDA) and return 0;
 * anything else is a failure (say why first with kscope_bench_callback_error). */
typedef int (*kscope_bench_call)(void* user, uintptr_t stream);
/* Hands the benchmark's output to the check against the reference: call kscope_output_put
 * (any number of times) and return 0. */
typedef int (*kscope_bench_read_output)(void* user, kscope_output_sink* sink);

/* A benchmark around `call`. `spec` is NULL or a JSON object: "name" (string), "dtype"
 * (string), "shape" (array of integers), "params" (object of numbers or strings), "work"
 * ([flops, bytes]) and "options" (an object of bench_options' members: "cache" ("hot" or
 * "cold"), "target_rel_ci", "level", "min_samples", "min_time_s", "time_budget_s",
 * "max_samples", "launches_per_sample", "min_sample_s", "use_graphs", "hold_launches",
 * "warmup_min_s", "warmup_min_calls", "discard_throttled", "burst" (true: start from
 * bench_options::burst())). */
KSCOPE_C_API kscope_status kscope_bench_create(const char* spec, kscope_bench_call call, void* user,
                                               kscope_bench** bench);
/* The stream the CUDA timer runs on (default: a non-blocking stream it creates). */
KSCOPE_C_API kscope_status kscope_bench_set_stream(kscope_bench* bench, uintptr_t stream);
/* The CUDA device the CUDA timer runs on (default: the runtime's current device); the
 * calling thread's current device is set back afterwards. */
KSCOPE_C_API kscope_status kscope_bench_set_device(kscope_bench* bench, int device);
/* The output reader for the check against the reference; tolerance NaN: report only. */
KSCOPE_C_API kscope_status kscope_bench_set_output(kscope_bench* bench, kscope_bench_read_output read, void* user,
                                                   double tolerance);
/* Compares with `reference` (its name, call and output reader are copied now); both are
 * sampled in the same run, interleaved A B B A. */
KSCOPE_C_API kscope_status kscope_bench_set_reference(kscope_bench* bench, const kscope_bench* reference);
/* Runs it. `json` gets kscope.bench/1 (docs/bench_schema.md) with the samples, `text` the
 * markdown table (either may be NULL). A run that times nothing (no GPU, a failing call)
 * is still KSCOPE_OK: the result says why (stop reason "error" or "invalid"). */
KSCOPE_C_API kscope_status kscope_bench_run(kscope_bench* bench, int timer, char** json, size_t* json_size,
                                            char** text, size_t* text_size);
KSCOPE_C_API void kscope_bench_destroy(kscope_bench* bench);
/* From inside a failing kscope_bench_call or kscope_bench_read_output: why it failed
 * (the result then says "the benchmark threw: <message>"). */
KSCOPE_C_API void kscope_bench_callback_error(const char* message, size_t size);
KSCOPE_C_API kscope_status kscope_output_put(kscope_output_sink* sink, const double* values, size_t count);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* KSCOPE_C_KSCOPE_C_H */
