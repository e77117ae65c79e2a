// Tests for kscope/report/trace_merge.hpp: traces written by chrome_trace_json for two
// ranks are merged and the result parsed back with nlohmann-json: one process group per
// rank, no pid shared, every event kept, clocks placed per host, flow ids kept apart, and
// each bad input named with its reason while the others are still merged.
#include <kscope/report/trace_merge.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace trace_merge_test {  // one per file: the unit tests build as one program

namespace {

using json = nlohmann::json;

kscope::gpu_activity_event kernel(kscope::node_id node, std::uint32_t stream, std::int64_t start, std::int64_t end,
                                  std::uint32_t device = 0) {
  kscope::gpu_activity_event e;
  e.kind = kscope::activity_kind::kernel;
  e.node = node;
  e.thread_index = 0;
  e.stream = stream;
  e.device = device;
  e.start_ns = start;
  e.end_ns = end;
  e.name = "_Z4stepv";
  e.correlation_id = 1;
  return e;
}

kscope::trace_process process(int rank, const std::string& host, std::int64_t wall_offset_ns) {
  kscope::trace_process p;
  p.rank = rank;
  p.process_id = 100 + rank;
  p.host_name = host;
  p.device_names = {"NVIDIA H100 80GB HBM3"};
  p.wall_clock_offset_ns = wall_offset_ns;
  return p;
}

// One rank's trace: a step scope at `t0` launching two kernels on GPU 0 (two flow arrows).
std::string rank_trace(int rank, std::int64_t t0, const std::string& host = "node1",
                       std::int64_t wall_offset_ns = 1'000'000'000'000) {
  const std::vector<kscope::host_interval> host_intervals = {{"step", 1, 0, t0, t0 + 100'000}};
  const std::vector<kscope::gpu_activity_event> gpu = {kernel(1, 7, t0 + 10'000, t0 + 20'000),
                                                       kernel(1, 7, t0 + 30'000, t0 + 40'000)};
  kscope::trace_options options;
  options.process = process(rank, host, wall_offset_ns);
  return kscope::chrome_trace_json(host_intervals, gpu, options);
}

std::size_t event_count(const std::string& trace) { return json::parse(trace).at("traceEvents").size(); }

// The merged trace's processes: pid -> process_name.
std::map<long long, std::string> process_names(const json& doc) {
  std::map<long long, std::string> out;
  for (const auto& e : doc.at("traceEvents"))
    if (e.at("ph") == "M" && e.at("name") == "process_name")
      out[e.at("pid").get<long long>()] = e.at("args").at("name").get<std::string>();
  return out;
}

// Start of the "step" scope of the process whose pid is `pid`, in ns from the merged origin.
std::int64_t step_start_ns(const json& doc, long long pid) {
  for (const auto& e : doc.at("traceEvents"))
    if (e.at("ph") == "X" && e.at("name") == "step" && e.at("pid") == pid)
      return static_cast<std::int64_t>(std::llround(e.at("ts").get<double>() * 1000));
  FAIL("no step scope on pid " << pid);
  return -1;
}

}  // namespace

TEST_CASE("trace merge: two ranks of one host become one trace, a process group per rank") {
  const std::string r0 = rank_trace(0, 5'000'000'000);
  const std::string r1 = rank_trace(1, 5'000'000'000 + 5'000'000);  // started 5 ms later
  const kscope::merged_trace m = kscope::merge_traces({{"run.rank0.trace.json", r0}, {"run.rank1.trace.json", r1}});
  REQUIRE(m.merged_count() == 2);
  CHECK(m.notes.empty());
  const json doc = json::parse(m.json);

  // Every event of both inputs, none added.
  CHECK(doc.at("traceEvents").size() == event_count(r0) + event_count(r1));
  CHECK(m.events == event_count(r0) + event_count(r1));
  CHECK(m.inputs[0].events + m.inputs[1].events == m.events);

  // One group per rank, each named after its rank; no pid shared, none moved (the blocks differ).
  const auto names = process_names(doc);
  CHECK(names == std::map<long long, std::string>{
                     {1000, "rank 0: kscope host threads (pid 100 on node1)"},
                     {1001, "rank 0: GPU 0 NVIDIA H100 80GB HBM3 (pid 100 on node1)"},
                     {2000, "rank 1: kscope host threads (pid 101 on node1)"},
                     {2001, "rank 1: GPU 0 NVIDIA H100 80GB HBM3 (pid 101 on node1)"}});
  CHECK(m.inputs[1].pids == std::vector<std::pair<long long, long long>>{{2000, 2000}, {2001, 2001}});

  // One host: one clock. Rank 1's scope starts 5 ms after rank 0's, as it ran.
  CHECK(step_start_ns(doc, 1000) == 0);
  CHECK(step_start_ns(doc, 2000) == 5'000'000);
  CHECK(m.inputs[1].shift_ns == 5'000'000);
  CHECK(m.inputs[1].clock == "steady clock of node1");

  // Flow arrows: ids kept apart between ranks, each start and finish in one rank's group.
  std::map<long long, std::set<long long>> flow_pids;  // id -> pids of its s and f
  for (const auto& e : doc.at("traceEvents"))
    if (e.at("ph") == "s" || e.at("ph") == "f") flow_pids[e.at("id").get<long long>()].insert(e.at("pid").get<long long>());
  CHECK(flow_pids.size() == 4);
  for (const auto& [id, pids] : flow_pids) {
    CHECK(pids.size() == 2);
    CHECK(*pids.begin() / 1000 == *pids.rbegin() / 1000);  // host and GPU of one rank
  }

  // Sort order: rank 0's processes, then rank 1's, each host first.
  std::map<long long, long long> sort_index;
  for (const auto& e : doc.at("traceEvents"))
    if (e.at("ph") == "M" && e.at("name") == "process_sort_index")
      sort_index[e.at("pid").get<long long>()] = e.at("args").at("sort_index").get<long long>();
  REQUIRE(sort_index.size() == 4);
  CHECK(sort_index.at(1000) < sort_index.at(1001));
  CHECK(sort_index.at(1001) < sort_index.at(2000));
  CHECK(sort_index.at(2000) < sort_index.at(2001));

  // Metadata: what each input was and how it was placed.
  const json& other = doc.at("otherData");
  CHECK(other.at("schema") == "kscope.merged_trace/1");
  REQUIRE(other.at("inputs").size() == 2);
  CHECK(other.at("inputs")[0].at("name") == "run.rank0.trace.json");
  CHECK(other.at("inputs")[0].at("rank") == 0);
  CHECK(other.at("inputs")[1].at("rank") == 1);
  CHECK(other.at("inputs")[1].at("process_id") == 101);
  CHECK(other.at("inputs")[1].at("host_name") == "node1");
  CHECK(other.at("inputs")[1].at("time_origin_ns") == 5'005'000'000);
  CHECK(other.at("inputs")[1].at("shift_ns") == 5'000'000);
  CHECK(other.at("inputs")[1].at("devices")[0].at("name") == "NVIDIA H100 80GB HBM3");
  CHECK(other.at("inputs")[1].at("pids") == json::array({json::array({2000, 2000}), json::array({2001, 2001})}));

  const std::string text = m.text();
  CHECK(text.find("2 of 2 traces merged (" + std::to_string(m.events) + " events)") == 0);
  CHECK(text.find("steady clock of node1, +5.000 ms") != std::string::npos);
}

TEST_CASE("trace merge: ranks given out of order still sort in rank order") {
  const kscope::merged_trace m =
      kscope::merge_traces({{"r1", rank_trace(1, 1'000'000)}, {"r0", rank_trace(0, 1'000'000)}});
  const json doc = json::parse(m.json);
  std::map<long long, long long> sort_index;
  for (const auto& e : doc.at("traceEvents"))
    if (e.at("ph") == "M" && e.at("name") == "process_sort_index")
      sort_index[e.at("pid").get<long long>()] = e.at("args").at("sort_index").get<long long>();
  CHECK(sort_index.at(1001) < sort_index.at(2000));  // rank 0 first although given second
}

TEST_CASE("trace merge: colliding pids move to a fresh block, flow ids never join two ranks") {
  // Two processes that both call themselves rank 0 (two jobs, or a rank set twice).
  const std::string a = rank_trace(0, 1'000'000);
  const std::string b = rank_trace(0, 2'000'000);
  const kscope::merged_trace m = kscope::merge_traces({{"a.json", a}, {"b.json", b}});
  REQUIRE(m.merged_count() == 2);
  CHECK(m.inputs[0].pids == std::vector<std::pair<long long, long long>>{{1000, 1000}, {1001, 1001}});
  CHECK(m.inputs[1].pids == std::vector<std::pair<long long, long long>>{{1000, 2000}, {1001, 2001}});
  const json doc = json::parse(m.json);
  CHECK(doc.at("traceEvents").size() == event_count(a) + event_count(b));
  std::map<long long, int> x_per_pid;
  for (const auto& e : doc.at("traceEvents"))
    if (e.at("ph") == "X") ++x_per_pid[e.at("pid").get<long long>()];
  CHECK(x_per_pid == std::map<long long, int>{{1000, 1}, {1001, 2}, {2000, 1}, {2001, 2}});
  // b's flow ids were offset past a's: four distinct ids, each pair in one group.
  std::map<long long, std::set<long long>> flow_pids;
  for (const auto& e : doc.at("traceEvents"))
    if (e.at("ph") == "s" || e.at("ph") == "f") flow_pids[e.at("id").get<long long>()].insert(e.at("pid").get<long long>());
  CHECK(flow_pids.size() == 4);
  for (const auto& [id, pids] : flow_pids) CHECK(*pids.begin() / 1000 == *pids.rbegin() / 1000);
  REQUIRE(m.notes.size() == 1);
  CHECK(m.notes[0] == "rank 0 appears in 2 inputs (their pids are kept apart)");
  CHECK(m.text().find("1000-1001 -> 2000-2001") != std::string::npos);
}

TEST_CASE("trace merge: different hosts keep their own time lines unless wall clocks line them up") {
  // node2's steady clock is 1 s ahead of node1's, its wall offset 1 s behind: the two
  // steps ran at the same wall-clock instant.
  const std::string a = rank_trace(0, 5'000'000'000, "node1", 1'000'000'000'000);
  const std::string b = rank_trace(1, 6'000'000'000, "node2", 1'000'000'000'000 - 1'000'000'000);
  const kscope::merged_trace kept = kscope::merge_traces({{"a", a}, {"b", b}});
  const json kept_doc = json::parse(kept.json);
  CHECK(step_start_ns(kept_doc, 1000) == 0);
  CHECK(step_start_ns(kept_doc, 2000) == 0);  // each host starts at 0
  REQUIRE(kept.notes.size() == 1);
  CHECK(kept.notes[0].find("2 hosts: each host's steady clock counts from its own boot") == 0);
  CHECK(kept_doc.at("otherData").at("notes").size() == 1);

  kscope::trace_merge_options by_wall;
  by_wall.align_hosts_by_wall_clock = true;
  const std::string c = rank_trace(1, 6'000'000'000 + 2'000'000, "node2", 1'000'000'000'000 - 1'000'000'000);
  const kscope::merged_trace aligned = kscope::merge_traces({{"a", a}, {"c", c}}, by_wall);
  const json aligned_doc = json::parse(aligned.json);
  CHECK(step_start_ns(aligned_doc, 1000) == 0);
  CHECK(step_start_ns(aligned_doc, 2000) == 2'000'000);  // 2 ms later on the wall clock
  CHECK(aligned.inputs[1].clock == "steady clock of node2 (hosts by wall clock)");
  CHECK(aligned.notes.at(0).find("2 hosts lined up by their wall clocks") == 0);
}

TEST_CASE("trace merge: another tool's trace is merged as it is, its processes named after the file") {
  const std::string foreign =
      R"([{"name":"process_name","ph":"M","pid":1000,"args":{"name":"python3"}},)"
      R"({"name":"fwd","ph":"X","pid":1000,"tid":1,"ts":12.5,"dur":3,"args":{"big":12345678901}},)"
      R"({"name":"a","ph":"s","id":"0x1","pid":1000,"tid":1,"ts":13},)"
      R"({"name":"a","ph":"f","bp":"e","id":"0x1","pid":1000,"tid":1,"ts":14}])";
  const std::string r0 = rank_trace(0, 1'000'000);
  const kscope::merged_trace m = kscope::merge_traces({{"r0", r0}, {"torch.json", foreign}});
  REQUIRE(m.merged_count() == 2);
  const json doc = json::parse(m.json);
  CHECK(doc.at("traceEvents").size() == event_count(r0) + 4);
  const auto names = process_names(doc);
  CHECK(names.at(2000) == "torch.json: python3");  // moved off rank 0's block, named after its file
  for (const auto& e : doc.at("traceEvents")) {
    if (e.at("name") == "fwd") {
      CHECK(e.at("ts").get<double>() == doctest::Approx(12.5));  // as it was
      CHECK(e.at("dur") == 3);
      CHECK(e.at("args").at("big") == 12345678901LL);  // whole numbers stay whole
    }
    if (e.at("name") == "a") CHECK(e.at("id") != "0x1");  // hex string ids offset past r0's
  }
  CHECK(m.inputs[1].clock == "as it is (no kscope clock base)");
  REQUIRE(m.notes.size() == 1);
  CHECK(m.notes[0] == "torch.json: not written by kscope: its times are kept as they are");
}

TEST_CASE("trace merge: each bad input is named with its reason, the others are merged") {
  const std::string good = rank_trace(0, 1'000'000);
  const std::string report = R"({"schema": "kscope.report/1", "scopes": []})";
  const kscope::merged_trace m = kscope::merge_traces({
      {"good.json", good},
      {"notjson.csv", "a,b\n1,2\n"},
      {"cut.json", good.substr(0, good.size() / 2)},
      {"report.json", report},
      {"other.json", R"({"benchmarks": []})"},
      {"empty.json", R"({"traceEvents": []})"},
      {"number.json", "42"},
      {"scalar_event.json", R"({"traceEvents": [{"ph":"X","pid":1,"ts":0}, 7]})"},
      {"string_pid.json", R"({"traceEvents": [{"ph":"X","pid":"a","ts":0}]})"},
      {"bad_ts.json", R"({"traceEvents": [{"ph":"X","pid":1,"ts":"soon"}]})"},
      {"events_object.json", R"({"traceEvents": {"ph":"X"}})"},
  });
  CHECK(m.merged_count() == 1);
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"notjson.csv", "not valid JSON: offset 0: "},
      {"cut.json", "not valid JSON: offset "},
      {"report.json", "is a kscope.report/1 document, not a trace"},
      {"other.json", "not a Chrome trace: JSON without a \"traceEvents\" array"},
      {"empty.json", "no trace events (an empty \"traceEvents\" array)"},
      {"number.json", "not a Chrome trace: the JSON is 42, not an object with a \"traceEvents\" array"},
      {"scalar_event.json", "traceEvents[1]: an event must be an object, got 7"},
      {"string_pid.json", "traceEvents[0]: field \"pid\" must be an integer"},
      {"bad_ts.json", "traceEvents[0]: field \"ts\" must be a number of microseconds, got a string"},
      {"events_object.json", "\"traceEvents\" must be an array, got an object"},
  };
  for (const auto& [name, reason] : expected) {
    bool found = false;
    for (const kscope::merged_trace_input& in : m.inputs)
      if (in.name == name) {
        found = true;
        CHECK_MESSAGE(in.error.find(reason) == 0, name << ": " << in.error);
      }
    CHECK_MESSAGE(found, name);
  }
  CHECK(m.inputs[0].error.empty());
  const json doc = json::parse(m.json);
  CHECK(doc.at("traceEvents").size() == event_count(good));
  const std::string text = m.text();
  CHECK(text.find("1 of 11 traces merged") == 0);
  CHECK(text.find("error: input 3 (report.json): is a kscope.report/1 document, not a trace") != std::string::npos);

  // Nothing mergeable: no trace at all.
  const kscope::merged_trace none = kscope::merge_traces({{"empty.json", R"({"traceEvents": []})"}});
  CHECK(none.merged_count() == 0);
  CHECK(none.json.empty());
}

TEST_CASE("trace merge: a document is told apart by its content") {
  CHECK(kscope::identify_document(rank_trace(0, 0)) == kscope::document_kind::chrome_trace);
  CHECK(kscope::identify_document(R"([{"ph":"X"}])") == kscope::document_kind::chrome_trace);
  CHECK(kscope::identify_document(R"({"schema": "kscope.report/1", "scopes": [)") ==
        kscope::document_kind::kscope_document);  // decided before the cut
  CHECK(kscope::identify_document(R"({"displayTimeUnit": "ns", "traceEvents": [)") ==
        kscope::document_kind::chrome_trace);
  CHECK(kscope::identify_document(R"({"schema": "other/1"})") == kscope::document_kind::other_json);
  CHECK(kscope::identify_document(R"({"benchmarks": []})") == kscope::document_kind::other_json);
  CHECK(kscope::identify_document("3") == kscope::document_kind::other_json);
  CHECK(kscope::identify_document("") == kscope::document_kind::not_json);
  CHECK(kscope::identify_document(R"({"benchmarks": [)") == kscope::document_kind::not_json);
  CHECK(kscope::identify_document("a,b\n") == kscope::document_kind::not_json);
}

TEST_CASE("trace merge: a merged trace is a trace again") {
  const kscope::merged_trace first = kscope::merge_traces({{"r0", rank_trace(0, 0)}, {"r1", rank_trace(1, 0)}});
  const kscope::merged_trace again = kscope::merge_traces({{"merged.json", first.json}, {"r2", rank_trace(2, 0)}});
  REQUIRE(again.merged_count() == 2);
  CHECK(again.events == first.events + event_count(rank_trace(2, 0)));
  const json doc = json::parse(again.json);
  std::set<long long> pids;
  for (const auto& e : doc.at("traceEvents")) pids.insert(e.at("pid").get<long long>());
  CHECK(pids == std::set<long long>{1000, 1001, 2000, 2001, 3000, 3001});
}

namespace {

// A kscope trace written by hand, with any clock base: one event on pid 1 at `ts` us.
std::string clock_trace(const std::string& host, const std::string& origin_ns, const std::string& offset_ns,
                        const std::string& ts_us = "1.5") {
  return R"({"traceEvents":[{"name":"step","ph":"X","pid":1,"tid":1,"ts":)" + ts_us +
         R"(,"dur":2}],"otherData":{"schema":"kscope.trace/1","host_name":")" + host +
         R"(","time_origin_ns":)" + origin_ns + R"(,"wall_clock_offset_ns":)" + offset_ns + "}}";
}

// The "ts" of the step event on `merged_pid` in the merged trace (as a JSON number).
std::string step_ts(const kscope::merged_trace& m, long long merged_pid) {
  const json doc = json::parse(m.json);
  for (const auto& e : doc.at("traceEvents"))
    if (e.at("name") == "step" && e.at("pid") == merged_pid) return e.at("ts").dump();
  return "(none)";
}

bool has_note(const kscope::merged_trace& m, const std::string& text) {
  for (const std::string& note : m.notes)
    if (note == text) return true;
  return false;
}

}  // namespace

// Before these bounds, origins and offsets up to 9.2e18 were taken and added: origin +
// offset, one origin minus another, one wall clock minus another and a timestamp plus its
// shift overflowed int64 (undefined behaviour; -fsanitize=undefined stops there).
TEST_CASE("trace merge: a clock base out of range leaves that trace's clock unknown, with a note naming it") {
  const kscope::merged_trace m = kscope::merge_traces({
      {"low.json", clock_trace("h", "-9100000000000000000", "0")},
      {"high.json", clock_trace("h", "9100000000000000000", "9100000000000000000")},
      {"offset.json", clock_trace("h", "5", "-9100000000000000000")},
      {"fraction.json", clock_trace("h", "5.5", "0")},
      {"edge.json", clock_trace("h", "4611686018427387392", "-4611686018427387392")},  // 2^62 - 512: taken
      {"first.json", clock_trace("h", "4611686018427387392", "0", "2")},
  });
  REQUIRE(m.merged_count() == 6);
  CHECK(has_note(m, "low.json: otherData field \"time_origin_ns\" must be an integer in [0, 4611686018427387903], "
                    "got -9.1e+18: its clock is unknown, its times are kept as they are"));
  CHECK(has_note(m, "high.json: otherData field \"time_origin_ns\" must be an integer in [0, 4611686018427387903], "
                    "got 9.1e+18: its clock is unknown, its times are kept as they are"));
  CHECK(has_note(m, "offset.json: otherData field \"wall_clock_offset_ns\" must be an integer in "
                    "[-4611686018427387903, 4611686018427387903], got -9.1e+18: its clock is unknown, its times are "
                    "kept as they are"));
  CHECK(has_note(m, "fraction.json: otherData field \"time_origin_ns\" must be an integer in [0, 4611686018427387903], "
                    "got 5.5: its clock is unknown, its times are kept as they are"));
  CHECK(m.notes.size() == 4);  // one note each, no second "no time origin" note
  for (std::size_t i = 0; i < 4; ++i) {
    CHECK(m.inputs[i].clock == "as it is (its clock base is out of range)");
    CHECK(m.inputs[i].shift_ns == 0);
    CHECK_FALSE(m.inputs[i].time_origin_ns.has_value());
    CHECK_FALSE(m.inputs[i].wall_clock_offset_ns.has_value());
  }
  CHECK(step_ts(m, 1) == "1.5");     // kept as it was
  CHECK(step_ts(m, 1001) == "1.5");  // moved pid, same time
  // The largest origin and offset taken: the host's time line starts at its earliest.
  CHECK(m.inputs[4].time_origin_ns == std::optional<std::int64_t>(4611686018427387392));
  CHECK(m.inputs[4].clock == "steady clock of h");
  CHECK(m.inputs[4].shift_ns == 0);
  CHECK(m.inputs[5].shift_ns == 0);
  const json doc = json::parse(m.json);
  CHECK(doc.at("otherData").at("inputs").at(0).at("time_origin_ns").is_null());
}

TEST_CASE("trace merge: hosts whose wall clocks are 2^62 ns apart are not lined up, with a note") {
  // wall(b) - wall(a) = 2^63 + 2^62 - 1536: past int64.
  kscope::trace_merge_options by_wall;
  by_wall.align_hosts_by_wall_clock = true;
  const kscope::merged_trace m = kscope::merge_traces(
      {{"a.json", clock_trace("a", "0", "-4611686018427387392")},
       {"b.json", clock_trace("b", "4611686018427387392", "4611686018427387392")},
       {"c.json", clock_trace("c", "1000", "-4611686018427387392")}},  // 2 us after a on the wall clock
      by_wall);
  REQUIRE(m.merged_count() == 3);
  CHECK(has_note(m, "host b: its wall clock is more than 2^62 ns (146 years) from the earliest host's: its time "
                    "line starts at 0"));
  CHECK(m.inputs[1].shift_ns == 0);
  CHECK(m.inputs[2].shift_ns == 1000);
  CHECK(step_ts(m, 1) == "1.5");
  CHECK(step_ts(m, 1001) == "1.5");
  CHECK(step_ts(m, 2001) == "2.5");
}

TEST_CASE("trace merge: an input whose shift would carry a timestamp past 9e15 us keeps its times") {
  // first.json sets the host's origin at 0; late.json's origin is 2^62 - 512 ns later, so
  // its timestamps move by that much: 8e15 us would overflow int64 (8e18 + 4.6e18 ns), 5e15
  // us would fit in int64 but pass the 9e15 us a trace may hold (the merged trace would not
  // merge again); 4e15 us fits.
  for (const auto& [ts, placed] : {std::pair<std::string, bool>{"8e15", false}, {"5e15", false}, {"4e15", true}}) {
    CAPTURE(ts);
    const kscope::merged_trace m = kscope::merge_traces({{"first.json", clock_trace("h", "0", "0")},
                                                          {"late.json", clock_trace("h", "4611686018427387392", "0", ts)}});
    REQUIRE(m.merged_count() == 2);
    if (placed) {
      CHECK(m.inputs[1].shift_ns == 4611686018427387392);
      CHECK(m.inputs[1].clock == "steady clock of h");
      CHECK(m.json.find(R"("ts":8611686018427387.392)") != std::string::npos);  // exact, in ns
      CHECK(m.notes.empty());
    } else {
      CHECK(m.inputs[1].shift_ns == 0);
      CHECK(m.inputs[1].clock == "as it is (its place on the time line is out of range)");
      REQUIRE(m.notes.size() == 1);
      CHECK(m.notes[0] == "late.json: placed on its host's time line, its timestamps would pass 9e15 us (285 years): "
                          "its times are kept as they are");
      CHECK(json::parse(step_ts(m, 1001)).get<double>() == std::stod(ts));
    }
    // Either way the merged trace is a trace that merges again.
    const kscope::merged_trace again = kscope::merge_traces({{"merged.json", m.json}});
    CHECK(again.merged_count() == 1);
    CHECK(again.events == 2);
  }
}

TEST_CASE("trace merge: a ts or dur past 9e15 us is a bad event, named with the file") {
  const kscope::merged_trace m = kscope::merge_traces({
      {"good.json", rank_trace(0, 1'000'000)},
      {"ts_far.json", R"({"traceEvents": [{"ph":"X","pid":1,"ts":0}, {"ph":"X","pid":1,"ts":-9e15}]})"},
      {"ts_huge.json", R"({"traceEvents": [{"ph":"X","pid":1,"ts":1e300}]})"},
      {"dur_huge.json", R"({"traceEvents": [{"ph":"X","pid":1,"ts":0,"dur":1e300}]})"},
      {"dur_string.json", R"({"traceEvents": [{"ph":"X","pid":1,"ts":0,"dur":"long"}]})"},
      {"ts_edge.json", R"({"traceEvents": [{"ph":"X","pid":1,"ts":8999999999999999,"dur":-8999999999999999}]})"},
  });
  CHECK(m.inputs[1].error == "traceEvents[1]: field \"ts\" must be a number of microseconds, got -9e+15 (beyond "
                             "9e15 us, 285 years, either way)");
  CHECK(m.inputs[2].error == "traceEvents[0]: field \"ts\" must be a number of microseconds, got 1e+300 (beyond "
                             "9e15 us, 285 years, either way)");
  CHECK(m.inputs[3].error == "traceEvents[0]: field \"dur\" must be a number of microseconds, got 1e+300 (beyond "
                             "9e15 us, 285 years, either way)");
  CHECK(m.inputs[4].error == "traceEvents[0]: field \"dur\" must be a number of microseconds, got a string");
  CHECK(m.inputs[5].error.empty());
  CHECK(m.merged_count() == 2);
  const std::string text = m.text();
  CHECK(text.find("error: input 2 (ts_huge.json): traceEvents[0]: field \"ts\"") != std::string::npos);
}

}  // namespace trace_merge_test
