// bench/cupti_alone_injection.cpp — CUPTI alone, without kscope: the floor that the activity
// collector's cost is measured against, in the same interleaved run as kscope itself.
//
// A CUDA injection library (CUDA_INJECTION64_PATH=libcupti_alone.so): the driver calls
// InitializeInjection() when the program's CUDA starts, and this library subscribes to CUPTI,
// enables the activity kinds and callbacks that CUPTI_ALONE names, and only counts records.
// Run on the uninstrumented serving binary (bench/serving_overhead.py: a configuration whose
// name starts with "bare-"), so the loop is the same and nothing of kscope runs:
//
//   CUPTI_ALONE=kernel                     kernel activity (CONCURRENT_KERNEL) only
//   CUPTI_ALONE=kernel,memcpy,memset,sync  the kinds kscope's collector enables by default
//   CUPTI_ALONE=...,runtime,driver         + the launch callbacks on the runtime and driver
//                                          APIs kscope hooks (detail/callback_ids.hpp: all
//                                          of each domain here), each storing the
//                                          correlation id in a small table as kscope does
//   CUPTI_ALONE=...,graph                  + graph-level trace (GRAPH_TRACE)
//   CUPTI_ALONE=...,timestamp              + CUPTI calling a steady_clock timestamp callback
//
// What tracing leaves behind once it is off (issue 41: "off must cost what no tracing costs"):
//   CUPTI_ALONE_OFF_AFTER=N   after the program's N-th driver API call, at that call's exit,
//                             every kind and callback above is disabled and the subscription
//                             dropped: the rest of the run is CUPTI attached and idle
//   CUPTI_ALONE_FINALIZE=1    with OFF_AFTER: cuptiFinalize() there too (CUPTI detached, the
//                             way its documentation's dynamic detach does it: from a callback's
//                             exit site)
// While counting, the driver domain is subscribed (a callback per driver call until the switch).
// Attached late: a program may dlopen this library and call InitializeInjection() itself once
// its CUDA context exists (bench/torch_overhead.py, CUPTI_ALONE_ATTACH=late), as kscope's
// collector attaches, instead of the driver calling it at its start.
//
// At exit it prints one line: "cupti-alone: <kinds>: N records (kernel K, ...), D dropped".
// Built by bench/serving_overhead.sh next to the serving binaries; bench only (it links
// libcupti, which kscope itself never does).
#include <cupti.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

std::atomic<std::uint64_t> records{0}, kernels{0}, copies{0}, memsets{0}, syncs{0}, graphs{0}, dropped{0};
std::atomic<std::uint64_t> launch_callbacks{0};
std::string enabled_text;
std::vector<CUpti_ActivityKind> enabled_kinds;
CUpti_SubscriberHandle subscriber{};
bool subscribed = false;
std::uint64_t off_after = 0;                // CUPTI_ALONE_OFF_AFTER (0: never)
bool finalize_at_off = false;               // CUPTI_ALONE_FINALIZE
std::atomic<std::uint64_t> driver_calls{0};
std::atomic<bool> switched_off{false};
bool count_launches = false;                // the launch callbacks asked for (runtime/driver)
bool count_runtime = false, count_driver = false;

// What kscope's launch hook does per callback: one store of the correlation id into a
// direct-mapped table (activity/correlation.hpp), so the callbacks cost what kscope's would.
constexpr std::size_t table_size = 1u << 16;
std::array<std::atomic<std::uint64_t>, table_size> correlation_table{};

constexpr std::size_t buffer_bytes = std::size_t{8} << 20;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, buffer_bytes));
  *size = *buffer != nullptr ? buffer_bytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream, uint8_t* buffer, size_t size, size_t valid) {
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    records.fetch_add(1, std::memory_order_relaxed);
    switch (record->kind) {
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      case CUPTI_ACTIVITY_KIND_KERNEL: kernels.fetch_add(1, std::memory_order_relaxed); break;
      case CUPTI_ACTIVITY_KIND_MEMCPY:
      case CUPTI_ACTIVITY_KIND_MEMCPY2: copies.fetch_add(1, std::memory_order_relaxed); break;
      case CUPTI_ACTIVITY_KIND_MEMSET: memsets.fetch_add(1, std::memory_order_relaxed); break;
      case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: syncs.fetch_add(1, std::memory_order_relaxed); break;
      case CUPTI_ACTIVITY_KIND_GRAPH_TRACE: graphs.fetch_add(1, std::memory_order_relaxed); break;
      default: break;
    }
  }
  size_t lost = 0;
  if (cuptiActivityGetNumDroppedRecords(context, stream, &lost) == CUPTI_SUCCESS)
    dropped.fetch_add(lost, std::memory_order_relaxed);
  std::free(buffer);
  (void)size;
}

// At the N-th driver call's exit: everything off, the subscription dropped, and CUPTI
// detached when asked. Runs once, on the thread that made that call.
void switch_off() {
  if (switched_off.exchange(true)) return;
  // Every refusal is said: a switch-off that did not happen must not read as one.
  std::string refused;
  const auto note = [&](CUptiResult r, const char* what) {
    if (r != CUPTI_SUCCESS) refused += std::string(refused.empty() ? "" : ", ") + what + " " + std::to_string(r);
  };
  for (const CUpti_ActivityKind kind : enabled_kinds) note(cuptiActivityDisable(kind), "cuptiActivityDisable");
  note(cuptiActivityFlushAll(1), "cuptiActivityFlushAll");
  note(cuptiEnableDomain(0, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API), "cuptiEnableDomain(runtime)");
  note(cuptiEnableDomain(0, subscriber, CUPTI_CB_DOMAIN_DRIVER_API), "cuptiEnableDomain(driver)");
  note(cuptiUnsubscribe(subscriber), "cuptiUnsubscribe");
  subscribed = false;
  // From the exit site of a driver call on the program's thread, as CUPTI's dynamic detach
  // does it; a program with other threads inside CUDA calls at that moment may race it.
  if (finalize_at_off) note(cuptiFinalize(), "cuptiFinalize");
  std::fprintf(stderr, "cupti-alone: switched off after %llu driver calls%s%s%s\n",
               static_cast<unsigned long long>(driver_calls.load()), finalize_at_off ? ", CUPTI finalized" : "",
               refused.empty() ? "" : "; refused: ", refused.c_str());
}

void CUPTIAPI on_callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId, const void* data) {
  if (domain != CUPTI_CB_DOMAIN_RUNTIME_API && domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
  const auto* cb = static_cast<const CUpti_CallbackData*>(data);
  if (off_after != 0 && domain == CUPTI_CB_DOMAIN_DRIVER_API && cb->callbackSite == CUPTI_API_EXIT &&
      driver_calls.fetch_add(1, std::memory_order_relaxed) + 1 == off_after) {
    switch_off();
    return;
  }
  // The launch callbacks count only in the domains asked for (the driver domain may be on
  // for the switch-off alone).
  if (cb->callbackSite != CUPTI_API_ENTER || !count_launches) return;
  if (!(domain == CUPTI_CB_DOMAIN_RUNTIME_API ? count_runtime : count_driver)) return;
  launch_callbacks.fetch_add(1, std::memory_order_relaxed);
  correlation_table[cb->correlationId % table_size].store(cb->correlationId, std::memory_order_release);
}

uint64_t CUPTIAPI steady_timestamp() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
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

void enable(CUpti_ActivityKind kind, const char* name) {
  const CUptiResult r = cuptiActivityEnable(kind);
  if (r == CUPTI_SUCCESS) enabled_kinds.push_back(kind);
  enabled_text += (enabled_text.empty() ? "" : "+") + std::string(name);
  if (r != CUPTI_SUCCESS) enabled_text += "(refused)";
}

void report_at_exit() {
  if (!(switched_off.load() && finalize_at_off)) cuptiActivityFlushAll(1);
  std::fprintf(stderr,
               "cupti-alone: %s: %llu records (kernel %llu, copy %llu, memset %llu, sync %llu, graph %llu), "
               "%llu launch callbacks, %llu dropped\n",
               enabled_text.c_str(), static_cast<unsigned long long>(records.load()),
               static_cast<unsigned long long>(kernels.load()), static_cast<unsigned long long>(copies.load()),
               static_cast<unsigned long long>(memsets.load()), static_cast<unsigned long long>(syncs.load()),
               static_cast<unsigned long long>(graphs.load()), static_cast<unsigned long long>(launch_callbacks.load()),
               static_cast<unsigned long long>(dropped.load()));
}

}  // namespace

extern "C" int InitializeInjection(void) {
  const char* what = std::getenv("CUPTI_ALONE");
  if (what == nullptr || *what == '\0') what = "kernel";
  if (wants(what, "timestamp")) {
    (void)cuptiActivityRegisterTimestampCallback(&steady_timestamp);
    enabled_text = "timestamp";
  }
  if (cuptiActivityRegisterCallbacks(&buffer_requested, &buffer_completed) != CUPTI_SUCCESS) {
    std::fprintf(stderr, "cupti-alone: cuptiActivityRegisterCallbacks failed\n");
    return 1;
  }
  if (const char* n = std::getenv("CUPTI_ALONE_OFF_AFTER")) off_after = std::strtoull(n, nullptr, 10);
  if (const char* f = std::getenv("CUPTI_ALONE_FINALIZE")) finalize_at_off = std::strcmp(f, "1") == 0;
  count_runtime = wants(what, "runtime");
  count_driver = wants(what, "driver");
  count_launches = count_runtime || count_driver;
  if (count_launches || off_after != 0) {
    if (cuptiSubscribe(&subscriber, &on_callback, nullptr) == CUPTI_SUCCESS) {
      subscribed = true;
      if (off_after != 0) {
        (void)cuptiEnableDomain(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API);
        enabled_text += (enabled_text.empty() ? "" : "+") + std::string("off-after-") + std::to_string(off_after) +
                        (finalize_at_off ? "-finalize" : "");
      }
      if (wants(what, "runtime")) {
        (void)cuptiEnableDomain(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API);
        enabled_text += (enabled_text.empty() ? "" : "+") + std::string("runtime-callbacks");
      }
      if (wants(what, "driver")) {
        (void)cuptiEnableDomain(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API);
        enabled_text += (enabled_text.empty() ? "" : "+") + std::string("driver-callbacks");
      }
    } else {
      std::fprintf(stderr, "cupti-alone: cuptiSubscribe failed (another tool?)\n");
    }
  }
  if (wants(what, "kernel")) enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "kernel");
  if (wants(what, "graph")) enable(CUPTI_ACTIVITY_KIND_GRAPH_TRACE, "graph");
  if (wants(what, "memcpy")) enable(CUPTI_ACTIVITY_KIND_MEMCPY, "memcpy");
  if (wants(what, "memset")) enable(CUPTI_ACTIVITY_KIND_MEMSET, "memset");
  if (wants(what, "sync")) enable(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, "sync");
  std::atexit(&report_at_exit);
  return 1;
}
