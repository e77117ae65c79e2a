// Benchmarks of kscope's attribution path on the CPU (no GPU needed).
//
//   BM_attribute_records      synthetic CUPTI buffers of real record structs through the
//                             live path: libcupti's cuptiActivityGetNextRecord walk, the
//                             per-kind parse and gpu_attribution (detail::consume_activity_
//                             buffer; items/s = records/s;
//                             target >= 15 M records/s on one core of the dev VM, issue 41;
//                             built against kscope::compiled, as kscope's tools are, so it
//                             measures the compiled mode's code: bench/RESULTS.md)
//   BM_attribute_plain        the same records as kscope structs: attribution alone
//   BM_launch_hook            the launch-time hook (what every kernel launch pays on top of
//                             CUPTI's callback dispatch), 1 and 8 threads
//   BM_launch_hook_interleaved  the same with ids from one shared counter (as CUPTI's)
//   BM_shared_id_counter_only   that counter alone (the part CUPTI pays anyway)
//   BM_long_run_memory        10 M records: memory held at the start and at the end
//
// Run: build-*/bench/attribution_bench --benchmark_repetitions=5
//        --benchmark_report_aggregates_only=true
#include <kscope/activity/attribution.hpp>
#include <kscope/activity/collector.hpp>

#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#if KSCOPE_HAS_CUPTI
#  include "../tests/support/cupti_synth.hpp"
#endif

namespace {

constexpr int kernel_names_count = 16;
const char* const kernel_names[kernel_names_count] = {
    "_Z13gemm_bf16_tn_PK13__nv_bfloat16S1_PS_iii", "_Z9layernormPKfPfi",
    "_Z7softmaxPKfPfii", "_Z15flash_attentionPK6__halfS1_S1_PS_iii",
    "_Z4geluPKfPfi", "_Z7rmsnormPKfS0_Pfi", "_Z4ropePfPKfi", "_Z6argmaxPKfPii",
    "_ZN7cutlass6KernelINS_4gemm6kernel4GemmIEEEEvNT_6ParamsE", "_Z10embeddingPKiPKfPfi",
    "_Z8residualPfPKfi", "_Z9transposePKfPfii", "_Z6concatPKfS0_Pfi", "_Z6reducePKfPfi",
    "my_c_kernel", "_Z4copyPKfPfi"};

constexpr std::uint32_t nodes = 8;
constexpr std::uint32_t streams = 4;
constexpr std::size_t records_per_buffer = 8192;
constexpr std::size_t buffers_per_pass = 8;  // 65 536 records per pass

// One pass of records, in the proportions of an inference step: 90 % kernels, 7 %
// copies, 3 % memsets; 4 streams, 8 scope nodes, 16 kernel names; correlation ids
// recorded in the launch table as the launch hook would.
struct plain_pass {
  std::vector<kscope::activity_record> records;
  std::int64_t span_ns = 0;
};

plain_pass make_plain_pass() {
  plain_pass p;
  p.records.reserve(records_per_buffer * buffers_per_pass);
  std::int64_t t[streams] = {1000000, 1000100, 1000200, 1000300};
  for (std::uint32_t i = 0; i < records_per_buffer * buffers_per_pass; ++i) {
    const std::uint32_t id = i + 1;
    const std::uint32_t stream = i % streams;
    kscope::activity_record r;
    const std::int64_t start = t[stream];
    const std::int64_t end = start + 2000 + 37 * (i % 11);
    t[stream] = end + 300;
    if (i % 100 < 90) {
      r.kind = kscope::activity_kind::kernel;
      auto& k = r.kernel;
      k.correlation_id = id;
      k.stream = stream;
      k.start_ns = start;
      k.end_ns = end;
      k.name = kernel_names[i % kernel_names_count];
      k.grid_x = 132;
      k.grid_y = k.grid_z = 1;
      k.block_x = 256;
      k.block_y = k.block_z = 1;
      k.registers_per_thread = 64;
    } else if (i % 100 < 97) {
      r.kind = kscope::activity_kind::memcpy;
      auto& m = r.memcpy;
      m.correlation_id = id;
      m.stream = stream;
      m.start_ns = start;
      m.end_ns = end;
      m.kind = (i % 3 == 0) ? kscope::memcpy_kind::h2d : (i % 3 == 1) ? kscope::memcpy_kind::d2h : kscope::memcpy_kind::d2d;
      m.bytes = 1 << 20;
    } else {
      r.kind = kscope::activity_kind::memset;
      auto& s = r.memset;
      s.correlation_id = id;
      s.stream = stream;
      s.start_ns = start;
      s.end_ns = end;
      s.bytes = 4096;
    }
    p.records.push_back(r);
  }
  std::int64_t last = 0;
  for (auto v : t) last = std::max(last, v);
  p.span_ns = last - 1000000 + 1000;
  return p;
}

const plain_pass& plain() {
  static const plain_pass p = make_plain_pass();
  return p;
}

void record_launches(kscope::correlation_table& table) {
  for (std::uint32_t id = 1; id <= records_per_buffer * buffers_per_pass; ++id) {
    table.record_launch(id, 1 + id % nodes, id % 3);
  }
}

void BM_attribute_plain(benchmark::State& state) {
  const plain_pass& p = plain();
  kscope::gpu_attribution a;
  record_launches(a.launches());
  std::int64_t pass = 0;
  for (auto _ : state) {
    // Shift time forward each pass, as a real run does (outside the timed work would cost
    // more than the shift itself: it is 2 adds per record, included and negligible).
    const std::int64_t offset = pass * p.span_ns;
    for (const auto& r0 : p.records) {
      kscope::activity_record r = r0;
      switch (r.kind) {
        case kscope::activity_kind::kernel: r.kernel.start_ns += offset; r.kernel.end_ns += offset; break;
        case kscope::activity_kind::memcpy: r.memcpy.start_ns += offset; r.memcpy.end_ns += offset; break;
        default: r.memset.start_ns += offset; r.memset.end_ns += offset; break;
      }
      a.add(r);
    }
    ++pass;
  }
  state.SetItemsProcessed(pass * static_cast<std::int64_t>(p.records.size()));
  state.counters["memory_MiB"] = static_cast<double>(a.memory_bytes()) / (1 << 20);
}
BENCHMARK(BM_attribute_plain)->Unit(benchmark::kMillisecond);

#if KSCOPE_HAS_CUPTI

struct buffer_pass {
  std::vector<std::unique_ptr<kscope_test::cupti_buffer>> buffers;
  std::size_t records = 0;
  std::int64_t span_ns = 0;
};

const buffer_pass& buffers() {
  static const buffer_pass b = [] {
    buffer_pass out;
    const plain_pass& p = plain();
    for (std::size_t i = 0; i < buffers_per_pass; ++i) {
      out.buffers.push_back(std::make_unique<kscope_test::cupti_buffer>(records_per_buffer * 232));
    }
    for (std::size_t i = 0; i < p.records.size(); ++i) {
      kscope_test::cupti_buffer& buf = *out.buffers[i / records_per_buffer];
      const auto& r = p.records[i];
      if (r.kind == kscope::activity_kind::kernel) {
        kscope_test::synth_kernel k;
        k.correlation = r.kernel.correlation_id;
        k.stream = r.kernel.stream;
        k.start = static_cast<std::uint64_t>(r.kernel.start_ns);
        k.end = static_cast<std::uint64_t>(r.kernel.end_ns);
        k.name = r.kernel.name;
        k.grid[0] = 132;
        k.block[0] = 256;
        k.registers = 64;
        buf.kernel(k);
      } else if (r.kind == kscope::activity_kind::memcpy) {
        kscope_test::synth_memcpy m;
        m.correlation = r.memcpy.correlation_id;
        m.stream = r.memcpy.stream;
        m.start = static_cast<std::uint64_t>(r.memcpy.start_ns);
        m.end = static_cast<std::uint64_t>(r.memcpy.end_ns);
        m.bytes = r.memcpy.bytes;
        buf.memcpy(m);
      } else {
        kscope_test::synth_memset s;
        s.correlation = r.memset.correlation_id;
        s.stream = r.memset.stream;
        s.start = static_cast<std::uint64_t>(r.memset.start_ns);
        s.end = static_cast<std::uint64_t>(r.memset.end_ns);
        s.bytes = r.memset.bytes;
        buf.memset(s);
      }
    }
    out.records = p.records.size();
    out.span_ns = p.span_ns;
    return out;
  }();
  return b;
}

const kscope::detail::cupti_api* cupti() {
  static kscope::detail::cupti_api api;
  static const bool ok = [] {
    std::string why;
    return kscope::detail::load_cupti(api, "", why);
  }();
  return ok ? &api : nullptr;
}

void BM_attribute_records(benchmark::State& state) {
  const buffer_pass& b = buffers();
  const kscope::detail::cupti_api* api = cupti();
  kscope::gpu_attribution a;
  record_launches(a.launches());
  std::int64_t pass = 0;
  for (auto _ : state) {
    // The clock offset moves every pass forward in time, as successive buffers do.
    for (const auto& buf : b.buffers) {
      kscope::detail::consume_activity_buffer(api, buf->data(), buf->size(), a, pass * b.span_ns);
    }
    ++pass;
  }
  state.SetItemsProcessed(pass * static_cast<std::int64_t>(b.records));
  state.counters["memory_MiB"] = static_cast<double>(a.memory_bytes()) / (1 << 20);
  state.counters["libcupti_walk"] = api != nullptr ? 1 : 0;
  state.counters["unattributed"] = static_cast<double>(a.counters().unattributed);
}
BENCHMARK(BM_attribute_records)->Unit(benchmark::kMillisecond);

void BM_long_run_memory(benchmark::State& state) {
  const buffer_pass& b = buffers();
  const kscope::detail::cupti_api* api = cupti();
  double start_mib = 0, end_mib = 0;
  std::int64_t records = 0;
  for (auto _ : state) {
    kscope::gpu_attribution a;
    record_launches(a.launches());
    const std::int64_t passes = (10'000'000 + static_cast<std::int64_t>(b.records) - 1) /
                                static_cast<std::int64_t>(b.records);
    for (std::int64_t pass = 0; pass < passes; ++pass) {
      for (const auto& buf : b.buffers) {
        kscope::detail::consume_activity_buffer(api, buf->data(), buf->size(), a, pass * b.span_ns);
      }
      if (pass == 0) start_mib = static_cast<double>(a.memory_bytes()) / (1 << 20);
      records += static_cast<std::int64_t>(b.records);
    }
    end_mib = static_cast<double>(a.memory_bytes()) / (1 << 20);
    state.counters["clipped"] = static_cast<double>(a.report().counters.busy_intervals_clipped);
  }
  state.SetItemsProcessed(records);
  state.counters["memory_after_65k_MiB"] = start_mib;
  state.counters["memory_after_10M_MiB"] = end_mib;
}
BENCHMARK(BM_long_run_memory)->Unit(benchmark::kMillisecond)->Iterations(1);

#endif  // KSCOPE_HAS_CUPTI

kscope::correlation_table& shared_table() {
  static kscope::correlation_table table;
  return table;
}

void BM_launch_hook(benchmark::State& state) {
  kscope::correlation_table& table = shared_table();
  auto& ts = kscope::detail::this_thread_state();
  const kscope::node_id saved = ts.current;
  ts.current = 1234;
  std::uint32_t id = 1 + static_cast<std::uint32_t>(state.thread_index()) * 100'000'000u;
  for (auto _ : state) {
    kscope::record_launch_from_this_thread(table, id);
    ++id;
  }
  ts.current = saved;
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}
BENCHMARK(BM_launch_hook)->Threads(1)->Threads(8);

// As CUPTI hands them out: one process-wide counter, so neighbouring slots are written by
// different threads (false sharing included). The fetch_add stands in for CUPTI's own.
void BM_launch_hook_interleaved(benchmark::State& state) {
  static std::atomic<std::uint32_t> next_id{1};
  kscope::correlation_table& table = shared_table();
  auto& ts = kscope::detail::this_thread_state();
  const kscope::node_id saved = ts.current;
  ts.current = 4321;
  for (auto _ : state) {
    kscope::record_launch_from_this_thread(table, next_id.fetch_add(1, std::memory_order_relaxed));
  }
  ts.current = saved;
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}
BENCHMARK(BM_launch_hook_interleaved)->Threads(1)->Threads(2)->Threads(8);

// The shared counter alone: subtract from BM_launch_hook_interleaved to get the table's
// share under contention.
void BM_shared_id_counter_only(benchmark::State& state) {
  static std::atomic<std::uint32_t> next_id{1};
  std::uint32_t sink = 0;
  for (auto _ : state) {
    sink += next_id.fetch_add(1, std::memory_order_relaxed);
  }
  benchmark::DoNotOptimize(sink);
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}
BENCHMARK(BM_shared_id_counter_only)->Threads(1)->Threads(2)->Threads(8);

}  // namespace

BENCHMARK_MAIN();
