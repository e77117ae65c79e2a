// Tests for kscope/report/trace.hpp: the Chrome trace / Perfetto JSON is parsed back with
// nlohmann-json and its structure checked: tracks, nesting, no overlapping complete
// events on a track, flow arrows from the launching scope to its GPU work, pids per rank,
// process and device, and the metadata a merge of ranks relies on.
#include <kscope/report/trace.hpp>
#include <kscope/activity/attribution.hpp>  // the trace is also written straight from an attribution
#include <kscope/report/rank.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace trace_test {  // one per file: the unit tests build as one program

namespace {

using json = nlohmann::json;

// A fixed writer, so that pids, names and the clock offset are known answers: rank 0 has
// the pids 1000 (host) and 1001 + device.
kscope::trace_process test_process(int rank = 0) {
  kscope::trace_process p;
  p.rank = rank;
  p.process_id = 4242 + rank;
  p.host_name = "node1";
  p.wall_clock_offset_ns = 1'700'000'000'000'000'000;
  return p;
}

kscope::trace_options fixed(kscope::trace_options options = {}) {
  options.process = test_process();
  return options;
}
constexpr std::int64_t host_pid = 1000;
constexpr std::int64_t gpu0_pid = 1001;

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
  const std::string text = kscope::chrome_trace_json(host, gpu, fixed(), &stats);
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
  CHECK(request.at("pid") == host_pid);
  CHECK(kscope::trace_host_pid(test_process()) == host_pid);
  CHECK(request.at("ts").get<double>() == doctest::Approx(0.0));
  CHECK(request.at("dur").get<double>() == doctest::Approx(100.0));
  CHECK(text.find("\"ts\":10.000") != std::string::npos);  // decode: 10 000 ns -> "10.000"
  // Kernel: pid = the device's, tid = stream, demangled, launch configuration in args.
  const json& attention = by_name.at("kscope::attention(float*, int)@7");
  CHECK(attention.at("pid") == gpu0_pid);
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
    if (e.at("name") == "process_name" && e.at("pid") == gpu0_pid)
      gpu_named = e.at("args").at("name") == "rank 0: GPU 0 (pid 4242 on node1)";
    if (e.at("name") == "thread_name" && e.at("pid") == gpu0_pid && e.at("tid") == 7) stream_named = e.at("args").at("name") == "stream 7";
    if (e.at("name") == "thread_name" && e.at("pid") == host_pid && e.at("tid") == 1) thread_named = true;
  }
  CHECK(gpu_named);
  CHECK(stream_named);
  CHECK(thread_named);

  for (const auto& entry : tracks_of(doc)) {
    const auto& track = entry.first;
    CHECK_MESSAGE(well_formed(entry.second, track.first == host_pid),
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
  const json doc = json::parse(kscope::chrome_trace_json(host, gpu, fixed(), &stats));
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
    CHECK(s.at("pid") == host_pid);
    CHECK(f.at("pid") == gpu0_pid);
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
  const json doc = json::parse(kscope::chrome_trace_json({}, gpu, fixed(), &stats));
  CHECK(stats.gpu_events == 6);
  CHECK(stats.clamped == 2);
  CHECK(stats.overflow_events == 2);
  auto tracks = tracks_of(doc);
  for (const auto& entry : tracks) {
    CHECK_MESSAGE(well_formed(entry.second, false), "track " << entry.first.first << "/" << entry.first.second);
  }
  REQUIRE(tracks.count({gpu0_pid, 4}) == 1);
  REQUIRE(tracks.count({gpu0_pid, 4 + kscope::trace_overflow_tid_stride}) == 1);
  REQUIRE(tracks.count({gpu0_pid + 1, 4}) == 1);  // device 1
  // Times are relative to the earliest event (1000 ns).
  const auto& lane0 = tracks.at({gpu0_pid, 4});
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

TEST_CASE("trace: an overflow track never takes the tid of a stream numbered 100000 or more") {
  // Stream 7's overflow lane would be tid 100007: stream 100007's own track.
  const std::vector<kscope::gpu_activity_event> gpu = {
      kernel_event(1, 0, 7, 2000, 5000), kernel_event(1, 0, 7, 2500, 9000),  // 2.5 us overlap: lane 1
      kernel_event(1, 0, 100007, 3000, 8000)};
  const json doc = json::parse(kscope::chrome_trace_json({}, gpu, fixed()));
  const auto tracks = tracks_of(doc);
  for (const auto& entry : tracks)
    CHECK_MESSAGE(well_formed(entry.second, false), "track " << entry.first.first << "/" << entry.first.second);
  CHECK(tracks.at({gpu0_pid, 100007}).size() == 1);   // its own track, alone
  CHECK(tracks.at({gpu0_pid, 1000007}).size() == 1);  // stream 7's lane 1, at the wider stride
  std::map<long long, std::string> names;
  for (const auto& e : doc.at("traceEvents"))
    if (e.at("ph") == "M" && e.at("name") == "thread_name") names[e.at("tid").get<long long>()] = e.at("args").at("name");
  CHECK(names[100007] == "stream 100007");
  CHECK(names[1000007] == "stream 7 (overlap 1)");
  CHECK(kscope::detail::overflow_tid_stride(99999) == 100000);
  CHECK(kscope::detail::overflow_tid_stride(100000) == 1000000);
}

TEST_CASE("trace: the default origin is the earliest event or counter point; a clamped event keeps its real start") {
  std::vector<kscope::host_interval> host;
  host.push_back(kscope::host_interval{"step", 1, 0, 5000, 9000});
  kscope::trace_options options = fixed();
  options.origin_ns = std::numeric_limits<std::int64_t>::min();  // the default: earliest
  kscope::trace_counter_track dram;
  dram.name = "sampled DRAM %";
  dram.points = {{1000, 10.0}, {6000, 20.0}};
  options.counter_tracks.push_back(dram);
  const json doc = json::parse(kscope::chrome_trace_json(host, {}, options));
  CHECK(doc.at("otherData").at("time_origin_ns") == 1000);
  for (const auto& e : doc.at("traceEvents")) {
    if (e.at("ph") == "C" || e.at("ph") == "X") CHECK(std::stod(e.at("ts").dump()) >= 0);
    if (e.at("ph") == "X") CHECK(std::stod(e.at("ts").dump()) == doctest::Approx(4.0));
  }
  // 200 ns of jitter: drawn from the previous end (2.000 us), its real start 1800 ns kept.
  const json clamped = json::parse(kscope::chrome_trace_json(
      {}, {kernel_event(1, 0, 7, 10000, 12000), kernel_event(1, 0, 7, 11800, 13000)}, options));
  bool found = false;
  for (const auto& e : clamped.at("traceEvents")) {
    if (e.at("ph") != "X" || !e.at("args").contains("clamped_start_ns")) continue;
    found = true;
    CHECK(e.at("args").at("clamped_start_ns") == 11800 - 1000);  // ns from the origin (the counter's 1000)
    CHECK(std::stod(e.at("ts").dump()) == doctest::Approx(11.0));
  }
  CHECK(found);
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
  const json doc = json::parse(kscope::chrome_trace_json(host, a.recent_events(), fixed(), &stats));
  CHECK(stats.flows == 1);
  bool found = false;
  for (const auto& e : doc.at("traceEvents")) found = found || (e.at("ph") == "X" && e.at("name") == "kernel()");
  CHECK(found);

  const std::string path = "kscope_trace_test.json";
  std::string why;
  REQUIRE(kscope::write_chrome_trace(path, host, a.recent_events(), fixed(), &why));
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
  kscope::trace_options options = fixed();
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
    CHECK(e.at("pid") == gpu0_pid);
    values.push_back(e.at("args").at("value").get<double>());
    times.push_back(std::stod(e.at("ts").dump()));
  }
  REQUIRE(values.size() == 3);
  CHECK(values[1] == 82.0);
  CHECK(times[1] == doctest::Approx(100.0));  // µs from the origin
}

namespace {

// Every metadata event of a trace as name@pid -> args.
std::map<std::string, json> metadata_of(const json& doc) {
  std::map<std::string, json> out;
  for (const auto& e : doc.at("traceEvents"))
    if (e.at("ph") == "M" && !e.contains("tid"))
      out[e.at("name").get<std::string>() + "@" + std::to_string(e.at("pid").get<long long>())] = e.at("args");
  return out;
}

std::set<long long> pids_of(const json& doc) {
  std::set<long long> out;
  for (const auto& e : doc.at("traceEvents")) out.insert(e.at("pid").get<long long>());
  return out;
}

}  // namespace

TEST_CASE("trace: two ranks get their own pids, names, labels and metadata (known answers)") {
  const std::int64_t t0 = 7'000'000'000;
  const std::vector<kscope::host_interval> host = {{"step", 1, 0, t0, t0 + 50'000}};
  const std::vector<kscope::gpu_activity_event> gpu = {
      kernel_event(1, 0, 7, t0 + 1'000, t0 + 2'000, "_Z4stepv", 0),
      kernel_event(1, 0, 9, t0 + 3'000, t0 + 4'000, "_Z4stepv", 1),
  };
  kscope::trace_options rank0;
  rank0.process = test_process(0);
  rank0.process->device_names = {"NVIDIA H100 80GB HBM3", ""};  // device 1's name not known
  kscope::trace_options rank1;
  rank1.process = test_process(1);
  rank1.process->host_name = "node2";
  rank1.process->device_names = {"NVIDIA H200"};
  rank1.process->wall_clock_offset_ns.reset();
  const json a = json::parse(kscope::chrome_trace_json(host, gpu, rank0));
  const json b = json::parse(kscope::chrome_trace_json(host, {gpu[0]}, rank1));

  // Rank 0: block 1 (host 1000, GPU 0 1001, GPU 1 1002); rank 1: block 2.
  CHECK(pids_of(a) == std::set<long long>{1000, 1001, 1002});
  CHECK(pids_of(b) == std::set<long long>{2000, 2001});
  CHECK(kscope::trace_device_pid(*rank1.process, 0) == 2001);

  const auto ma = metadata_of(a);
  CHECK(ma.at("process_name@1000").at("name") == "rank 0: kscope host threads (pid 4242 on node1)");
  CHECK(ma.at("process_name@1001").at("name") == "rank 0: GPU 0 NVIDIA H100 80GB HBM3 (pid 4242 on node1)");
  CHECK(ma.at("process_name@1002").at("name") == "rank 0: GPU 1 (pid 4242 on node1)");
  CHECK(ma.at("process_labels@1000").at("labels") == "rank 0,node1,pid 4242");
  CHECK(ma.at("process_labels@1002").at("labels") == "rank 0,node1,pid 4242");
  // The sort index is the pid: a rank's processes together, host first, ranks in order.
  CHECK(ma.at("process_sort_index@1000").at("sort_index") == 1000);
  CHECK(ma.at("process_sort_index@1002").at("sort_index") == 1002);
  const auto mb = metadata_of(b);
  CHECK(mb.at("process_name@2000").at("name") == "rank 1: kscope host threads (pid 4243 on node2)");
  CHECK(mb.at("process_name@2001").at("name") == "rank 1: GPU 0 NVIDIA H200 (pid 4243 on node2)");
  CHECK(mb.at("process_labels@2001").at("labels") == "rank 1,node2,pid 4243");
  CHECK(mb.at("process_sort_index@2001").at("sort_index") == 2001);

  const json& other = a.at("otherData");
  CHECK(other.at("schema") == "kscope.trace/1");
  CHECK(other.at("kscope_version") == KSCOPE_VERSION_STRING);
  CHECK(other.at("clock") == "steady_clock");
  CHECK(other.at("time_origin_ns") == t0);
  CHECK(other.at("wall_clock_offset_ns") == 1'700'000'000'000'000'000);
  CHECK(other.at("rank") == 0);
  CHECK(other.at("process_id") == 4242);
  CHECK(other.at("host_name") == "node1");
  CHECK(other.at("host_pid") == 1000);
  REQUIRE(other.at("devices").size() == 2);
  CHECK(other.at("devices")[0] == json({{"device", 0}, {"name", "NVIDIA H100 80GB HBM3"}, {"pid", 1001}}));
  CHECK(other.at("devices")[1] == json({{"device", 1}, {"name", ""}, {"pid", 1002}}));
  CHECK(b.at("otherData").at("rank") == 1);
  CHECK_FALSE(b.at("otherData").contains("wall_clock_offset_ns"));  // not known: left out

  // The events themselves moved with their process.
  for (const auto& e : b.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    CHECK(e.at("pid") == (e.at("cat") == "scope" ? 2000 : 2001));
  }
}

TEST_CASE("trace: a process without a rank, and pids that stay below 2^31") {
  kscope::trace_process no_rank;
  no_rank.process_id = 4242;
  CHECK(kscope::trace_pid_slot(no_rank) == 4242);  // the OS pid picks the block
  CHECK(kscope::trace_host_pid(no_rank) == 4'242'000);
  CHECK(kscope::trace_device_pid(no_rank, 3) == 4'242'004);
  no_rank.process_id = 0;
  CHECK(kscope::trace_host_pid(no_rank) == 1000);  // nothing known: block 1, never pid 0
  // A large OS pid or rank wraps around instead of leaving the signed 32-bit range.
  no_rank.process_id = 4'194'304;  // Linux's largest pid_max
  CHECK(kscope::trace_device_pid(no_rank, 998) <= 2147483647);
  CHECK(kscope::trace_host_pid(no_rank) >= 1000);
  kscope::trace_process big;
  big.rank = 2147483647;
  CHECK(kscope::trace_host_pid(big) >= 1000);
  CHECK(kscope::trace_device_pid(big, 998) <= 2147483647);
  CHECK(kscope::trace_pid_slot(big) <= kscope::trace_max_pid_slot);
  // The largest rank that keeps its own block.
  big.rank = static_cast<int>(kscope::trace_max_pid_slot - 1);
  CHECK(kscope::trace_pid_slot(big) == kscope::trace_max_pid_slot);
  // Device numbers wrap inside the block: never the next rank's host pid.
  kscope::trace_process rank0 = test_process(0);
  CHECK(kscope::trace_device_pid(rank0, 998) == 1999);
  CHECK(kscope::trace_device_pid(rank0, 999) == 1001);

  const json doc = json::parse(kscope::chrome_trace_json({{"a", 1, 0, 0, 10}}, {}, [] {
    kscope::trace_options o;
    o.process = kscope::trace_process{};
    return o;
  }()));
  const auto m = metadata_of(doc);
  CHECK(m.at("process_name@1000").at("name") == "kscope host threads");  // no rank, pid or host: no suffix
  CHECK(m.count("process_labels@1000") == 0);
  CHECK(doc.at("otherData").at("rank").is_null());
}

TEST_CASE("trace: this_trace_process takes the rank, the pid, the host and the clock offset") {
  kscope::set_rank(5);
  const kscope::trace_process p = kscope::this_trace_process();
  kscope::clear_rank();
  CHECK(p.rank == 5);
  CHECK(p.process_id > 0);
  CHECK_FALSE(p.host_name.empty());
  REQUIRE(p.wall_clock_offset_ns.has_value());
  CHECK(*p.wall_clock_offset_ns > 1'500'000'000'000'000'000);  // system_clock is after 2017, steady far less
  // The default writer is this process.
  kscope::set_rank(5);
  const json doc = json::parse(kscope::chrome_trace_json({{"a", 1, 0, 0, 10}}, {}));
  kscope::clear_rank();
  CHECK(doc.at("otherData").at("rank") == 5);
  CHECK(doc.at("otherData").at("host_pid") == 6000);
  CHECK(doc.at("otherData").at("process_id") == p.process_id);
}

}  // namespace trace_test
