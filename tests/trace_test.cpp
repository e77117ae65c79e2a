// Tests for kscope/report/trace.hpp: the Chrome trace / Perfetto JSON is parsed back with
// nlohmann-json and its structure checked: tracks, nesting, no overlapping complete
// events on a track, flow arrows from the launching scope to its GPU work.
#include <kscope/report/trace.hpp>
#include <kscope/activity/attribution.hpp>  // the trace is also written straight from an attribution

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace {

using json = nlohmann::json;

kscope::gpu_activity_event kernel_event(kscope::node_id node, std::uint32_t thread, std::uint32_t stream,
                                        std::int64_t start, std::int64_t end,
                                        std::string_view name = "_Z4stepv", std::uint32_t device = 0) {
  kscope::gpu_activity_event e;
  e.kind = kscope::activity_kind::kernel;
  e.node = node;
  e.thread_index = thread;
  e.stream = stream;
  e.device = device;
  e.start_ns = start;
  e.end_ns = end;
  e.name = name;
  e.grid = {132, 1, 1};
  e.block = {256, 1, 1};
  e.correlation_id = 9;
  return e;
}

// (pid, tid) -> complete events as (start, end) in ns relative to the origin.
std::map<std::pair<std::int64_t, std::int64_t>, std::vector<std::pair<std::int64_t, std::int64_t>>>
tracks_of(const json& doc) {
  std::map<std::pair<std::int64_t, std::int64_t>, std::vector<std::pair<std::int64_t, std::int64_t>>> tracks;
  for (const auto& e : doc.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    const auto start = static_cast<std::int64_t>(std::llround(e.at("ts").get<double>() * 1000));
    const auto dur = static_cast<std::int64_t>(std::llround(e.at("dur").get<double>() * 1000));
    tracks[{e.at("pid").get<std::int64_t>(), e.at("tid").get<std::int64_t>()}].emplace_back(start, start + dur);
  }
  for (auto& [key, events] : tracks) std::sort(events.begin(), events.end());
  return tracks;
}

// Host tracks: any two events are disjoint or nested. GPU tracks: disjoint.
bool well_formed(const std::vector<std::pair<std::int64_t, std::int64_t>>& events, bool allow_nesting) {
  for (std::size_t i = 0; i < events.size(); ++i) {
    for (std::size_t j = i + 1; j < events.size(); ++j) {
      const auto& a = events[i];
      const auto& b = events[j];  // b.first >= a.first
      const bool disjoint = b.first >= a.second;
      const bool nested = b.second <= a.second;
      if (!disjoint && !(allow_nesting && nested)) return false;
    }
  }
  return true;
}

}  // namespace

TEST_CASE("trace: structure, tracks, nesting, names, exact timestamps") {
  const std::int64_t t0 = 5'000'000'000;
  std::vector<kscope::host_interval> host = {
      {"request", 1, 0, t0, t0 + 100'000},
      {"decode", 2, 0, t0 + 10'000, t0 + 60'000},     // nested in request
      {"attention", 3, 0, t0 + 20'000, t0 + 30'000},  // nested in decode
      {"decode", 2, 1, t0 + 5'000, t0 + 50'000},      // another thread
  };
  std::vector<kscope::gpu_activity_event> gpu = {
      kernel_event(3, 0, 7, t0 + 25'000, t0 + 40'000, "_ZN6kscope9attentionEPfi"),
      kernel_event(2, 1, 8, t0 + 45'000, t0 + 55'000),
  };
  kscope::gpu_activity_event copy;
  copy.kind = kscope::activity_kind::memcpy;
  copy.node = 2;
  copy.thread_index = 0;
  copy.stream = 7;
  copy.start_ns = t0 + 41'000;
  copy.end_ns = t0 + 42'500;
  copy.name = "Memcpy HtoD";
  copy.bytes = 1 << 20;
  copy.copy_kind = kscope::memcpy_kind::h2d;
  gpu.push_back(copy);

  kscope::trace_stats stats;
  const std::string text = kscope::chrome_trace_json(host, gpu, {}, &stats);
  const json doc = json::parse(text);
  REQUIRE(doc.contains("traceEvents"));
  CHECK(doc.at("displayTimeUnit") == "ns");
  CHECK(doc.at("otherData").at("time_origin_ns") == t0);
  CHECK(stats.host_events == 4);
  CHECK(stats.gpu_events == 3);
  CHECK(stats.flows == 3);
  CHECK(stats.clamped == 0);
  CHECK(stats.overflow_events == 0);

  std::map<std::string, json> by_name;
  for (const auto& e : doc.at("traceEvents")) {
    if (e.at("ph") == "X") by_name[e.at("name").get<std::string>() + "@" + std::to_string(e.at("tid").get<int>())] = e;
  }
  // Host scope on the host pid, thread track; microseconds with nanosecond digits.
  const json& request = by_name.at("request@0");
  CHECK(request.at("pid") == kscope::trace_host_pid);
  CHECK(request.at("ts").get<double>() == doctest::Approx(0.0));
  CHECK(request.at("dur").get<double>() == doctest::Approx(100.0));
  CHECK(text.find("\"ts\":10.000") != std::string::npos);  // decode: 10 000 ns -> "10.000"
  // Kernel: pid = device, tid = stream, demangled, launch configuration in args.
  const json& attention = by_name.at("kscope::attention(float*, int)@7");
  CHECK(attention.at("pid") == 0);
  CHECK(attention.at("cat") == "kernel");
  CHECK(attention.at("args").at("node") == 3);
  CHECK(attention.at("args").at("scope") == "attention");
  CHECK(attention.at("args").at("grid") == json::array({132, 1, 1}));
  CHECK(attention.at("ts").get<double>() == doctest::Approx(25.0));
  const json& memcpy_event = by_name.at("Memcpy HtoD@7");
  CHECK(memcpy_event.at("cat") == "memcpy");
  CHECK(memcpy_event.at("args").at("bytes") == (1 << 20));

  // Track names as metadata.
  bool gpu_named = false, stream_named = false, thread_named = false;
  for (const auto& e : doc.at("traceEvents")) {
    if (e.at("ph") != "M") continue;
    if (e.at("name") == "process_name" && e.at("pid") == 0) gpu_named = e.at("args").at("name") == "GPU 0";
    if (e.at("name") == "thread_name" && e.at("pid") == 0 && e.at("tid") == 7) stream_named = e.at("args").at("name") == "stream 7";
    if (e.at("name") == "thread_name" && e.at("pid") == kscope::trace_host_pid && e.at("tid") == 1) thread_named = true;
  }
  CHECK(gpu_named);
  CHECK(stream_named);
  CHECK(thread_named);

  for (const auto& entry : tracks_of(doc)) {
    const auto& track = entry.first;
    CHECK_MESSAGE(well_formed(entry.second, track.first == kscope::trace_host_pid),
                  "track " << track.first << "/" << track.second);
  }
}

TEST_CASE("trace: flow arrows bind the launching scope instance to its GPU work") {
  const std::int64_t t0 = 1'000'000;
  // The same node runs twice on thread 0; kernels must point at the right instance.
  std::vector<kscope::host_interval> host = {
      {"step", 5, 0, t0, t0 + 10'000},
      {"step", 5, 0, t0 + 20'000, t0 + 30'000},
      {"inner", 6, 0, t0 + 20'000 + 100, t0 + 25'000},
  };
  std::vector<kscope::gpu_activity_event> gpu = {
      kernel_event(5, 0, 3, t0 + 12'000, t0 + 15'000),  // launched by the 1st step, ran later
      kernel_event(5, 0, 3, t0 + 26'000, t0 + 27'000),  // 2nd step
      kernel_event(6, 0, 3, t0 + 28'000, t0 + 29'000),  // inner
      kernel_event(9, 0, 3, t0 + 31'000, t0 + 32'000),  // node without a host interval
      kernel_event(5, kscope::unknown_thread, 3, t0 + 33'000, t0 + 34'000),
  };
  kscope::trace_stats stats;
  const json doc = json::parse(kscope::chrome_trace_json(host, gpu, {}, &stats));
  CHECK(stats.flows == 3);
  CHECK(stats.flows_without_scope == 2);

  std::map<long long, json> starts, finishes;
  for (const auto& e : doc.at("traceEvents")) {
    if (e.at("ph") == "s") starts[e.at("id").get<long long>()] = e;
    if (e.at("ph") == "f") finishes[e.at("id").get<long long>()] = e;
  }
  REQUIRE(starts.size() == 3);
  REQUIRE(finishes.size() == 3);
  std::vector<double> start_ts;
  for (const auto& [id, s] : starts) {
    REQUIRE(finishes.count(id) == 1);
    const json& f = finishes.at(id);
    CHECK(f.at("bp") == "e");
    CHECK(s.at("pid") == kscope::trace_host_pid);
    CHECK(f.at("pid") == 0);
    CHECK(f.at("tid") == 3);
    CHECK(f.at("ts").get<double>() >= s.at("ts").get<double>());
    start_ts.push_back(s.at("ts").get<double>());
  }
  std::sort(start_ts.begin(), start_ts.end());
  // 1 ns inside each launching instance: step #1 at 0, step #2 at 20 us, inner at 20.1 us.
  CHECK(start_ts[0] == doctest::Approx(0.001));
  CHECK(start_ts[1] == doctest::Approx(20.001));
  CHECK(start_ts[2] == doctest::Approx(20.101));

  kscope::trace_options no_flows;
  no_flows.flows = false;
  const json quiet = json::parse(kscope::chrome_trace_json(host, gpu, no_flows));
  for (const auto& e : quiet.at("traceEvents")) CHECK(e.at("ph") != "s");
}

TEST_CASE("trace: overlapping GPU events on one stream are clamped or moved, never overlapped") {
  std::vector<kscope::gpu_activity_event> gpu = {
      kernel_event(1, 0, 4, 1000, 2000),
      kernel_event(1, 0, 4, 1800, 3000),  // 200 ns overlap: jitter, clamped to 2000
      kernel_event(1, 0, 4, 2500, 2600),  // inside the previous one: overflow track
      kernel_event(1, 0, 4, 2550, 4000),  // overlaps by 450 ns on lane 0 (< 1 us): clamped
      kernel_event(1, 0, 4, 2900, 9000),  // 1.1 us overlap with lane 0 -> overflow lane 1
      kernel_event(1, 0, 4, 5000, 6000, "_Z4stepv", /*device*/ 1),  // other device: own track
  };
  kscope::trace_stats stats;
  const json doc = json::parse(kscope::chrome_trace_json({}, gpu, {}, &stats));
  CHECK(stats.gpu_events == 6);
  CHECK(stats.clamped == 2);
  CHECK(stats.overflow_events == 2);
  auto tracks = tracks_of(doc);
  for (const auto& entry : tracks) {
    CHECK_MESSAGE(well_formed(entry.second, false), "track " << entry.first.first << "/" << entry.first.second);
  }
  REQUIRE(tracks.count({0, 4}) == 1);
  REQUIRE(tracks.count({0, 4 + kscope::trace_overflow_tid_stride}) == 1);
  REQUIRE(tracks.count({1, 4}) == 1);
  // Times are relative to the earliest event (1000 ns).
  const auto& lane0 = tracks.at({0, 4});
  REQUIRE(lane0.size() == 3);
  CHECK(lane0[0] == std::make_pair<std::int64_t, std::int64_t>(0, 1000));
  CHECK(lane0[1] == std::make_pair<std::int64_t, std::int64_t>(1000, 2000));  // clamped start
  CHECK(lane0[2] == std::make_pair<std::int64_t, std::int64_t>(2000, 3000));  // clamped start
  bool overflow_named = false;
  for (const auto& e : doc.at("traceEvents")) {
    if (e.at("ph") == "M" && e.at("name") == "thread_name" && e.at("tid") == 4 + kscope::trace_overflow_tid_stride) {
      overflow_named = e.at("args").at("name") == "stream 4 (overlap 1)";
    }
  }
  CHECK(overflow_named);
  CHECK(doc.at("otherData").at("clamped_gpu_events") == 2);
}

TEST_CASE("trace: partially overlapping host intervals go to an overflow track") {
  std::vector<kscope::host_interval> host = {
      {"a", 1, 2, 0, 100},
      {"b", 2, 2, 50, 150},   // starts inside a, ends after it: not nestable
      {"c", 3, 2, 60, 70},    // nested in a
      {"bad", 4, 2, 80, 10},  // end < start: skipped
  };
  kscope::trace_stats stats;
  const json doc = json::parse(kscope::chrome_trace_json(host, {}, {}, &stats));
  CHECK(stats.host_events == 3);
  CHECK(stats.skipped == 1);
  CHECK(stats.overflow_events == 1);
  for (const auto& entry : tracks_of(doc)) CHECK(well_formed(entry.second, true));
}

TEST_CASE("trace: empty input, attribution output, and writing a file") {
  const json empty = json::parse(kscope::chrome_trace_json({}, {}));
  CHECK(empty.at("traceEvents").is_array());

  // Straight from the attribution's recent-event ring.
  kscope::gpu_attribution a;
  a.launches().record_launch(1, 7, 0);
  kscope::kernel_record k;
  k.correlation_id = 1;
  k.start_ns = 2000;
  k.end_ns = 3000;
  k.name = "_Z6kernelv";
  a.add_kernel(k);
  std::vector<kscope::host_interval> host = {{"scope", 7, 0, 1000, 4000}};
  kscope::trace_stats stats;
  const json doc = json::parse(kscope::chrome_trace_json(host, a.recent_events(), {}, &stats));
  CHECK(stats.flows == 1);
  bool found = false;
  for (const auto& e : doc.at("traceEvents")) found = found || (e.at("ph") == "X" && e.at("name") == "kernel()");
  CHECK(found);

  const std::string path = "kscope_trace_test.json";
  std::string why;
  REQUIRE(kscope::write_chrome_trace(path, host, a.recent_events(), {}, &why));
  std::FILE* f = std::fopen(path.c_str(), "rb");
  REQUIRE(f != nullptr);
  std::string contents;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) contents.append(buf, n);
  std::fclose(f);
  std::remove(path.c_str());
  CHECK(json::parse(contents) == doc);
  CHECK_FALSE(kscope::write_chrome_trace("/nonexistent-dir/x/trace.json", host, {}, {}, &why));
  CHECK(why.find("cannot write /nonexistent-dir/x/trace.json: No such file or directory") != std::string::npos);
}

TEST_CASE("trace: sampled GPU metrics as counter tracks, NaN points left out") {
  std::vector<kscope::host_interval> host;
  host.push_back(kscope::host_interval{"step", 1, 0, 1000, 301000});
  kscope::trace_options options;
  options.origin_ns = 1000;
  kscope::trace_counter_track dram;
  dram.name = "sampled DRAM %";
  dram.device = 0;
  dram.points = {{1000, 0.5}, {101000, 82.0}, {201000, std::nan("")}, {301000, 1.0}};
  options.counter_tracks.push_back(dram);
  kscope::trace_stats stats;
  const nlohmann::json j = nlohmann::json::parse(kscope::chrome_trace_json(host, {}, options, &stats));
  CHECK(stats.counter_points == 3);
  std::vector<double> values, times;
  for (const nlohmann::json& e : j.at("traceEvents")) {
    if (e.value("ph", "") != "C") continue;
    CHECK(e.at("name") == "sampled DRAM %");
    CHECK(e.at("pid") == 0);
    values.push_back(e.at("args").at("value").get<double>());
    times.push_back(std::stod(e.at("ts").dump()));
  }
  REQUIRE(values.size() == 3);
  CHECK(values[1] == 82.0);
  CHECK(times[1] == doctest::Approx(100.0));  // µs from the origin
}
