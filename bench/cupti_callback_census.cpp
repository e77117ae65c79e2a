// bench/cupti_callback_census.cpp — which CUDA API calls a program makes, counted per call.
//
// Why: issue 41. A PyTorch eager op costs +6.5 us with kscope's activity collector on, a
// C++ eager launch +1.3 us. Before making torch cheaper to watch we must know what a torch op
// does besides its launch: which runtime and driver API calls (and resource events) it makes,
// and how many per op. This library counts them all, without kscope, in the loop itself.
//
// What: a CUDA injection library (CUDA_INJECTION64_PATH=libcupti_callback_census.so; the
// driver calls InitializeInjection() when the program's CUDA starts, as for
// bench/cupti_alone_injection.cpp). It subscribes to CUPTI, enables every callback of the
// runtime-API, driver-API, resource and synchronize domains (CENSUS_DOMAINS picks: any of
// runtime,driver,resource,sync,nvtx; nvtx counts only with NVTX_INJECTION64_PATH pointing at
// libcupti), and counts each (domain, callback id): API_ENTER only for runtime / driver calls,
// every callback for the others. The counters are relaxed atomics (the census is not timed).
//
// Per op: the program may mark a window (the steady part of its loop) through two exported C
// functions, reached with ctypes on the same path (dlopen returns the library already loaded):
//
//   lib = ctypes.CDLL(os.environ["CUDA_INJECTION64_PATH"])
//   lib.census_window_begin()                           # after the warm-up
//   ...                                                 # the ops
//   lib.census_window_end(ctypes.c_ulonglong(n_ops))    # writes the table now, too
//
// and gives CENSUS_OPS=n (the op count of the whole process; os.environ works, read at exit)
// for the whole-process column. At exit (atexit), and at census_window_end, it writes the
// table to the file CENSUS_OUT names (default stderr): domain, callback id, function name
// (cuptiGetCallbackName; resource / sync names from the header's enums), calls in the window,
// calls per op, how many of those came from threads other than the one that marked the
// window, calls in the whole process and per CENSUS_OPS op; sorted by window calls (then
// process calls). A markdown table, with a few summary lines above it.
//
// If CUPTI cannot subscribe (another tool holds it, no libcupti), it says why on stderr and
// in the table's header, and the program runs on untouched.
//
// Build (bench/torch_overhead.sh does):
//   g++ -O2 -std=c++17 -shared -fPIC -I$CUDA/include -I$CUDA/extras/CUPTI/include
//     bench/cupti_callback_census.cpp -L<libcupti dir> -Wl,-rpath,<libcupti dir> -lcupti
//     -o libcupti_callback_census.so   (one command)
// Run: CUDA_INJECTION64_PATH=$PWD/libcupti_callback_census.so CENSUS_OUT=census.txt ./program
// Bench only: it links libcupti, which kscope itself never does.
#include <cupti.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unistd.h>
#include <sys/syscall.h>
#include <vector>

namespace {

// Domains are small enums (CUPTI_CB_DOMAIN_SIZE is 7 in CUDA 13.0); callback ids of one
// domain stay below 1024 there (runtime 523, driver 807). Room for a newer libcupti's ids;
// anything beyond is counted in `out_of_range`.
constexpr std::size_t max_domains = 8;
constexpr std::size_t max_cbids = 2048;

using counter_table = std::array<std::array<std::atomic<std::uint64_t>, max_cbids>, max_domains>;
using plain_table = std::array<std::array<std::uint64_t, max_cbids>, max_domains>;

counter_table calls{};        // every counted callback, whole process
counter_table off_thread{};   // of them, from a thread other than the window's marking thread
std::atomic<std::uint64_t> out_of_range{0};
std::atomic<std::uint64_t> marking_thread{0};  // gettid() of census_window_begin's caller; 0: none

plain_table window_begin_calls{}, window_begin_off{}, window_end_calls{}, window_end_off{};
std::atomic<int> window_state{0};  // 0 never begun, 1 open, 2 closed
std::uint64_t window_ops = 0;
std::mutex report_mutex;

std::string status_text = "InitializeInjection never called (CUDA never started, or CUDA_INJECTION64_PATH unset)";
std::string domains_text;
bool subscribed = false;
CUpti_SubscriberHandle subscriber{};

// Names resolved when subscribing (no CUPTI call at exit).
std::array<std::array<const char*, max_cbids>, max_domains> names{};

std::uint64_t this_thread_id() {
  thread_local const std::uint64_t id = static_cast<std::uint64_t>(::syscall(SYS_gettid));
  return id;
}

void CUPTIAPI on_callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API || domain == CUPTI_CB_DOMAIN_DRIVER_API) {
    const auto* cb = static_cast<const CUpti_CallbackData*>(data);
    if (cb == nullptr || cb->callbackSite != CUPTI_API_ENTER) return;
  }
  const auto d = static_cast<std::size_t>(domain);
  const auto c = static_cast<std::size_t>(cbid);
  if (d >= max_domains || c >= max_cbids) {
    out_of_range.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  calls[d][c].fetch_add(1, std::memory_order_relaxed);
  const std::uint64_t marker = marking_thread.load(std::memory_order_relaxed);
  if (marker != 0 && this_thread_id() != marker) off_thread[d][c].fetch_add(1, std::memory_order_relaxed);
}

const char* domain_name(std::size_t d) {
  switch (d) {
    case CUPTI_CB_DOMAIN_DRIVER_API: return "driver";
    case CUPTI_CB_DOMAIN_RUNTIME_API: return "runtime";
    case CUPTI_CB_DOMAIN_RESOURCE: return "resource";
    case CUPTI_CB_DOMAIN_SYNCHRONIZE: return "sync";
    case CUPTI_CB_DOMAIN_NVTX: return "nvtx";
    default: return "domain?";
  }
}

const char* resource_name(std::size_t c) {
  switch (c) {
    case CUPTI_CBID_RESOURCE_CONTEXT_CREATED: return "CONTEXT_CREATED";
    case CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING: return "CONTEXT_DESTROY_STARTING";
    case CUPTI_CBID_RESOURCE_STREAM_CREATED: return "STREAM_CREATED";
    case CUPTI_CBID_RESOURCE_STREAM_DESTROY_STARTING: return "STREAM_DESTROY_STARTING";
    case CUPTI_CBID_RESOURCE_CU_INIT_FINISHED: return "CU_INIT_FINISHED";
    case CUPTI_CBID_RESOURCE_MODULE_LOADED: return "MODULE_LOADED";
    case CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING: return "MODULE_UNLOAD_STARTING";
    case CUPTI_CBID_RESOURCE_MODULE_PROFILED: return "MODULE_PROFILED";
    case CUPTI_CBID_RESOURCE_GRAPH_CREATED: return "GRAPH_CREATED";
    case CUPTI_CBID_RESOURCE_GRAPH_DESTROY_STARTING: return "GRAPH_DESTROY_STARTING";
    case CUPTI_CBID_RESOURCE_GRAPH_CLONED: return "GRAPH_CLONED";
    case CUPTI_CBID_RESOURCE_GRAPHNODE_CREATE_STARTING: return "GRAPHNODE_CREATE_STARTING";
    case CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED: return "GRAPHNODE_CREATED";
    case CUPTI_CBID_RESOURCE_GRAPHNODE_DESTROY_STARTING: return "GRAPHNODE_DESTROY_STARTING";
    case CUPTI_CBID_RESOURCE_GRAPHNODE_DEPENDENCY_CREATED: return "GRAPHNODE_DEPENDENCY_CREATED";
    case CUPTI_CBID_RESOURCE_GRAPHNODE_DEPENDENCY_DESTROY_STARTING: return "GRAPHNODE_DEPENDENCY_DESTROY_STARTING";
    case CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATE_STARTING: return "GRAPHEXEC_CREATE_STARTING";
    case CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED: return "GRAPHEXEC_CREATED";
    case CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING: return "GRAPHEXEC_DESTROY_STARTING";
    case CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED: return "GRAPHNODE_CLONED";
    case CUPTI_CBID_RESOURCE_STREAM_ATTRIBUTE_CHANGED: return "STREAM_ATTRIBUTE_CHANGED";
    default: return nullptr;
  }
}

const char* sync_name(std::size_t c) {
  switch (c) {
    case CUPTI_CBID_SYNCHRONIZE_STREAM_SYNCHRONIZED: return "STREAM_SYNCHRONIZED";
    case CUPTI_CBID_SYNCHRONIZE_CONTEXT_SYNCHRONIZED: return "CONTEXT_SYNCHRONIZED";
    default: return nullptr;
  }
}

bool wants(const char* list, const char* word) {
  const std::size_t n = std::strlen(word);
  for (const char* p = list; (p = std::strstr(p, word)) != nullptr; p += n) {
    const bool starts = p == list || p[-1] == ',';
    const bool ends = p[n] == '\0' || p[n] == ',';
    if (starts && ends) return true;
  }
  return false;
}

std::string result_text(CUptiResult r) {
  const char* s = nullptr;
  if (cuptiGetResultString(r, &s) != CUPTI_SUCCESS || s == nullptr) return "CUPTI error " + std::to_string(r);
  return std::string(s) + " (" + std::to_string(r) + ")";
}

void snapshot(plain_table& c, plain_table& o) {
  for (std::size_t d = 0; d < max_domains; ++d)
    for (std::size_t i = 0; i < max_cbids; ++i) {
      c[d][i] = calls[d][i].load(std::memory_order_relaxed);
      o[d][i] = off_thread[d][i].load(std::memory_order_relaxed);
    }
}

struct row {
  std::size_t domain, cbid;
  std::uint64_t window, window_off, process;
};

std::string name_of(std::size_t d, std::size_t c) {
  const char* n = nullptr;
  if (d == CUPTI_CB_DOMAIN_RESOURCE) n = resource_name(c);
  else if (d == CUPTI_CB_DOMAIN_SYNCHRONIZE) n = sync_name(c);
  else n = names[d][c];
  if (n != nullptr && *n != '\0') return n;
  return std::string(domain_name(d)) + " cbid " + std::to_string(c);
}

// Writes the table (report_mutex held by the caller).
void write_report(const char* when) {
  const bool have_window = window_state.load() == 2;
  plain_table* now_calls = new plain_table{};
  plain_table* now_off = new plain_table{};
  snapshot(*now_calls, *now_off);
  std::vector<row> rows;
  std::array<std::uint64_t, max_domains> domain_window{}, domain_process{};
  for (std::size_t d = 0; d < max_domains; ++d)
    for (std::size_t c = 0; c < max_cbids; ++c) {
      const std::uint64_t process = (*now_calls)[d][c];
      if (process == 0) continue;
      row r{d, c, 0, 0, process};
      if (have_window) {
        r.window = window_end_calls[d][c] - window_begin_calls[d][c];
        r.window_off = window_end_off[d][c] - window_begin_off[d][c];
      }
      domain_window[d] += r.window;
      domain_process[d] += process;
      rows.push_back(r);
    }
  delete now_calls;
  delete now_off;
  std::sort(rows.begin(), rows.end(), [](const row& a, const row& b) {
    if (a.window != b.window) return a.window > b.window;
    if (a.process != b.process) return a.process > b.process;
    return a.domain != b.domain ? a.domain < b.domain : a.cbid < b.cbid;
  });
  double process_ops = 0;
  if (const char* ops = std::getenv("CENSUS_OPS")) process_ops = std::strtod(ops, nullptr);

  FILE* out = stderr;
  const char* path = std::getenv("CENSUS_OUT");
  bool to_file = false;
  if (path != nullptr && *path != '\0') {
    if (FILE* f = std::fopen(path, "w")) {
      out = f;
      to_file = true;
    } else {
      std::fprintf(stderr, "cupti-callback-census: cannot write CENSUS_OUT=%s; the table goes to stderr\n", path);
    }
  }
  std::fprintf(out, "cupti-callback-census (%s): %s\n", when, status_text.c_str());
  std::fprintf(out, "domains: %s; API_ENTER counted for runtime/driver, every callback for the others\n",
               domains_text.empty() ? "(none)" : domains_text.c_str());
  if (have_window) {
    std::fprintf(out, "window: %llu ops (census_window_begin .. census_window_end)\n",
                 static_cast<unsigned long long>(window_ops));
  } else {
    std::fprintf(out, "window: none marked (census_window_begin/end not called%s)\n",
                 window_state.load() == 1 ? "; begun, never ended" : "");
  }
  if (process_ops > 0) std::fprintf(out, "whole process: CENSUS_OPS=%.0f ops\n", process_ops);
  else std::fprintf(out, "whole process: CENSUS_OPS not given\n");
  for (std::size_t d = 0; d < max_domains; ++d) {
    if (domain_process[d] == 0) continue;
    std::fprintf(out, "domain %s: window %llu calls", domain_name(d), static_cast<unsigned long long>(domain_window[d]));
    if (have_window && window_ops > 0)
      std::fprintf(out, " (%.3f per op)", static_cast<double>(domain_window[d]) / static_cast<double>(window_ops));
    std::fprintf(out, ", process %llu calls\n", static_cast<unsigned long long>(domain_process[d]));
  }
  if (out_of_range.load() != 0)
    std::fprintf(out, "out of range (domain or cbid beyond this census's tables): %llu callbacks\n",
                 static_cast<unsigned long long>(out_of_range.load()));
  std::fprintf(out, "\n| # | domain | cbid | function | window calls | per op | off marking thread | process calls | "
                    "per CENSUS_OPS op |\n");
  std::fprintf(out, "|---:|---|---:|---|---:|---:|---:|---:|---:|\n");
  std::size_t rank = 0;
  for (const row& r : rows) {
    ++rank;
    char per_op[32] = "", per_process_op[32] = "";
    if (have_window && window_ops > 0)
      std::snprintf(per_op, sizeof per_op, "%.3f", static_cast<double>(r.window) / static_cast<double>(window_ops));
    if (process_ops > 0) std::snprintf(per_process_op, sizeof per_process_op, "%.3f", static_cast<double>(r.process) / process_ops);
    std::fprintf(out, "| %zu | %s | %zu | %s | %llu | %s | %llu | %llu | %s |\n", rank, domain_name(r.domain), r.cbid,
                 name_of(r.domain, r.cbid).c_str(), static_cast<unsigned long long>(r.window), per_op,
                 static_cast<unsigned long long>(r.window_off), static_cast<unsigned long long>(r.process),
                 per_process_op);
  }
  if (rows.empty()) std::fprintf(out, "| | | | (no callback counted) | | | | | |\n");
  std::fflush(out);
  if (to_file) std::fclose(out);
}

void report_at_exit() {
  std::lock_guard<std::mutex> lock(report_mutex);
  write_report("at exit");
}

}  // namespace

extern "C" {

// Marks the start of the counted window on the calling thread (calls from other threads are
// counted too, and shown apart).
__attribute__((visibility("default"))) void census_window_begin(void) {
  std::lock_guard<std::mutex> lock(report_mutex);
  marking_thread.store(this_thread_id(), std::memory_order_relaxed);
  snapshot(window_begin_calls, window_begin_off);
  window_state.store(1);
}

// Ends the window: `ops` is the number of ops it held (calls per op = calls / ops). Writes
// the table at once (and again at exit, with the whole process's final counts).
__attribute__((visibility("default"))) void census_window_end(unsigned long long ops) {
  std::lock_guard<std::mutex> lock(report_mutex);
  if (window_state.load() != 1) {
    std::fprintf(stderr, "cupti-callback-census: census_window_end without census_window_begin: ignored\n");
    return;
  }
  snapshot(window_end_calls, window_end_off);
  window_ops = ops;
  window_state.store(2);
  write_report("window end");
}

__attribute__((visibility("default"))) int InitializeInjection(void) {
  std::lock_guard<std::mutex> lock(report_mutex);
  std::atexit(&report_at_exit);
  const CUptiResult r = cuptiSubscribe(&subscriber, &on_callback, nullptr);
  if (r != CUPTI_SUCCESS) {
    status_text = "NOT SUBSCRIBED: cuptiSubscribe failed: " + result_text(r) +
                  " (another CUPTI subscriber, e.g. a profiler or kscope's collector, or no usable libcupti); "
                  "nothing counted";
    std::fprintf(stderr, "cupti-callback-census: %s\n", status_text.c_str());
    return 1;  // the program runs on
  }
  subscribed = true;
  const char* what = std::getenv("CENSUS_DOMAINS");
  if (what == nullptr || *what == '\0') what = "runtime,driver,resource,sync";
  struct choice {
    const char* word;
    CUpti_CallbackDomain domain;
  };
  const choice choices[] = {{"runtime", CUPTI_CB_DOMAIN_RUNTIME_API},
                            {"driver", CUPTI_CB_DOMAIN_DRIVER_API},
                            {"resource", CUPTI_CB_DOMAIN_RESOURCE},
                            {"sync", CUPTI_CB_DOMAIN_SYNCHRONIZE},
                            {"nvtx", CUPTI_CB_DOMAIN_NVTX}};
  std::string refused;
  for (const choice& c : choices) {
    if (!wants(what, c.word)) continue;
    const CUptiResult e = cuptiEnableDomain(1, subscriber, c.domain);
    if (e == CUPTI_SUCCESS) {
      domains_text += (domains_text.empty() ? "" : ",") + std::string(c.word);
    } else {
      refused += std::string(refused.empty() ? "" : "; ") + c.word + ": " + result_text(e);
    }
  }
  // Function names for the API domains, once.
  for (const CUpti_CallbackDomain d : {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_CB_DOMAIN_DRIVER_API}) {
    for (std::size_t c = 0; c < max_cbids; ++c) {
      const char* n = nullptr;
      if (cuptiGetCallbackName(d, static_cast<uint32_t>(c), &n) == CUPTI_SUCCESS && n != nullptr)
        names[static_cast<std::size_t>(d)][c] = n;
    }
  }
  uint32_t version = 0;
  (void)cuptiGetVersion(&version);
  status_text = "subscribed (CUPTI API version " + std::to_string(version) + ")";
  if (!refused.empty()) {
    status_text += "; domains refused: " + refused;
    std::fprintf(stderr, "cupti-callback-census: cuptiEnableDomain refused: %s\n", refused.c_str());
  }
  return 1;
}

}  // extern "C"
