// --sweep of examples/serving.cu: one run of the loop per point on a fresh engine, the
// points' measurements as a kscope::sweep_results table, and its files (.md, .csv, .json
// and an .svg plot).
#pragma once

#include "engine.hpp"

#include <kscope/kscope.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace {

// This program never changes its locale, so printf's "%.2f" is written with a point.
std::string two_decimals(double v) {
  char text[64];
  std::snprintf(text, sizeof text, "%.2f", v);
  return text;
}

// ---- sweeps -------------------------------------------------------------------------------
//
// Each point is one run of the loop on a fresh engine (its KV cache is sized by the
// point). The loop is steady between the first finish (before it the batch was filling)
// and the last arrival (after it the batch drains). Warm-up: the requests that arrived
// before the first finish; they are left out of everything. TTFT: every other request.
// TPOT: those of them that also finished by the last arrival, since a request still
// decoding then ran its last tokens in a shrinking batch with no prefill beside it, which
// makes its TPOT faster than the steady loop's. Throughput and the mean decode batch:
// the steps that ended in the window from the first measured arrival to the last arrival.

constexpr double nan_value = std::numeric_limits<double>::quiet_NaN();
// Closed loop: 6 requests per client, so a batch of 32 leaves 160 for TTFT and about 128
// for TPOT after warm-up (the first wave) and the drain (the last), enough for a p99.
constexpr int closed_loop_requests_per_client = 6;
constexpr int closed_loop_min_requests = 8;
constexpr double rate_point_arrival_s = 1.5;  // rate set: requests = rate x this, ...
constexpr int rate_point_min_requests = 140;  // ... and at least this many

// What one point measured.
struct point_measurement {
  std::size_t warmup = 0;                // arrived before the first request finished
  std::vector<double> ttft_ms;           // the others'
  std::vector<double> tpot_ms;           // of those, the ones that finished by the last arrival (2+ tokens)
  double window_s = nan_value;           // first measured arrival -> last arrival
  double tokens_per_s = nan_value, requests_per_s = nan_value, mean_decode_batch = nan_value;
  std::string no_window;                 // why there is no window, when there is none
  int waiting_at_last_arrival = 0;       // arrived but not admitted into a slot yet
};

point_measurement measure(const engine& e) {
  point_measurement m;
  const std::vector<request_timing>& done = e.finished();
  if (done.empty()) {
    m.no_window = "no request finished";
    return m;
  }
  steady::time_point first_finish = steady::time_point::max(), last_arrival = steady::time_point::min();
  for (const request_timing& t : done) {
    first_finish = std::min(first_finish, t.finished);
    last_arrival = std::max(last_arrival, t.arrival);
  }
  steady::time_point window_start = steady::time_point::max();
  for (const request_timing& t : done) {
    if (t.arrival < first_finish) {
      ++m.warmup;
      continue;
    }
    m.ttft_ms.push_back(t.ttft_ms);
    if (t.finished <= last_arrival && std::isfinite(t.tpot_ms)) m.tpot_ms.push_back(t.tpot_ms);  // NaN: 1 token
    window_start = std::min(window_start, t.arrival);
    if (t.admitted > last_arrival) ++m.waiting_at_last_arrival;
  }
  if (m.ttft_ms.size() < 2 || !(window_start < last_arrival)) {
    m.no_window = "fewer than 2 requests arrived after the first one finished: no window to measure in";
    return m;
  }
  double tokens = 0, finished = 0, decode_rows = 0, decode_steps = 0;
  for (const step_record& step : e.step_log()) {
    if (step.end <= window_start || step.end > last_arrival) continue;
    tokens += step.tokens;
    finished += step.finished;
    if (step.decode_rows > 0) {
      decode_rows += step.decode_rows;
      ++decode_steps;
    }
  }
  m.window_s = std::chrono::duration<double>(last_arrival - window_start).count();
  m.tokens_per_s = tokens / m.window_s;
  m.requests_per_s = finished / m.window_s;
  if (decode_steps > 0) m.mean_decode_batch = decode_rows / decode_steps;
  return m;
}

// Columns of every sweep table, in order; point_values() follows it.
const std::vector<kscope::sweep_metric>& sweep_metrics() {
  static const std::vector<kscope::sweep_metric> metrics = {
      {"requests", "", "requests"},
      {"warmup", "", "warm-up"},
      {"tpot_requests", "", "TPOT requests"},
      {"ttft_p50_ms", "ms", "TTFT p50"},
      {"ttft_p99_ms", "ms", "TTFT p99"},
      {"tpot_p50_ms", "ms", "TPOT p50"},
      {"tpot_p99_ms", "ms", "TPOT p99"},
      {"output_tokens_per_s", "tokens/s", "throughput"},
      {"requests_per_s", "requests/s", "throughput"},
      {"decode_batch", "", "mean decode batch"},
      {"window_s", "s", "window"},
  };
  return metrics;
}

std::vector<kscope::sweep_value> point_values(const point_measurement& m) {
  using kscope::sweep_value;
  const auto windowed = [&](double v) { return m.no_window.empty() ? sweep_value::of(v) : sweep_value::absent(m.no_window); };
  return {sweep_value::of(static_cast<double>(m.ttft_ms.size())),
          sweep_value::of(static_cast<double>(m.warmup)),
          sweep_value::of(static_cast<double>(m.tpot_ms.size())),
          kscope::quantile_value(m.ttft_ms, 0.50, 0.95, "requests"),
          kscope::quantile_value(m.ttft_ms, 0.99, 0.95, "requests"),
          kscope::quantile_value(m.tpot_ms, 0.50, 0.95, "requests"),
          kscope::quantile_value(m.tpot_ms, 0.99, 0.95, "requests"),
          windowed(m.tokens_per_s),
          windowed(m.requests_per_s),
          m.no_window.empty() && std::isnan(m.mean_decode_batch) ? sweep_value::absent("no decode step in the window")
                                                                 : windowed(m.mean_decode_batch),
          windowed(m.window_s)};
}

// The options of one point: the base options with the point's values.
serving_options options_at(const serving_options& base, const kscope::sweep_point& p) {
  serving_options o = base;
  if (p.has("batch")) o.max_batch = static_cast<int>(p.integer("batch"));
  if (p.has("clients")) o.concurrency = static_cast<int>(p.integer("clients"));
  if (p.has("rate")) o.rate_per_s = p.real("rate"), o.concurrency = 0;
  if (p.has("prompt")) o.prompt_tokens = static_cast<int>(p.integer("prompt"));
  if (p.has("output")) o.output_tokens = static_cast<int>(p.integer("output"));
  if (!base.requests_given) {
    o.requests = o.concurrency > 0
                     ? std::max(closed_loop_min_requests, closed_loop_requests_per_client * o.concurrency)
                     : static_cast<int>(std::clamp(std::ceil(o.rate_per_s * rate_point_arrival_s),
                                                   static_cast<double>(rate_point_min_requests), 1e7));
  }
  return o;
}

// The command line that runs one point alone, with the full kscope report and diagnosis.
std::string command_line(const serving_options& o) {
  std::string s = "serving --batch " + std::to_string(o.max_batch) + " --prompt " + std::to_string(o.prompt_tokens) +
                  " --output " + std::to_string(o.output_tokens) + " --requests " + std::to_string(o.requests);
  s += o.concurrency > 0 ? " --concurrency " + std::to_string(o.concurrency)
                         : " --rate " + kscope::param_value(o.rate_per_s).to_string();
  if (o.layers != 8) s += " --layers " + std::to_string(o.layers);
  if (o.hidden != 4096) s += " --hidden " + std::to_string(o.hidden);
  if (o.graph) s += " --graph";
  if (o.launch_bound) s += " --launch-bound";
  if (o.sync_in_step) s += " --sync-in-step";
  if (o.pageable_copy) s += " --pageable-copy";
  if (o.interleave_prefill) s += " --interleave-prefill";
  if (o.large_kv) s += " --large-kv";
  return s;
}

// The points of a set: the swept axis first (it is the plot's x), then the fixed sizes.
kscope::sweep make_sweep(const std::string& set, const serving_options& base) {
  using kscope::axis;
  using kscope::sweep;
  std::vector<double> given = base.sweep_points;
  for (const sweep_set& s : sweep_sets())
    if (set == s.name && given.empty()) given = s.default_points;
  std::vector<long long> integers;
  for (double v : given) integers.push_back(static_cast<long long>(v));
  const long long batch = base.max_batch, prompt = base.prompt_tokens, output = base.output_tokens;
  if (set == "batch")  // one client per slot: the batch stays full
    return sweep::zip({axis("batch", integers), axis("clients", integers)}) *
           sweep::cartesian({axis("prompt", {prompt}), axis("output", {output})});
  if (set == "seq")
    return sweep::cartesian({axis("prompt", integers)}) *
           sweep::cartesian({axis("batch", {batch}), axis("clients", {batch}), axis("output", {output})});
  return sweep::cartesian({axis("rate", given)}) *
         sweep::cartesian({axis("batch", {batch}), axis("prompt", {prompt}), axis("output", {output})});
}

std::string set_title(const std::string& set) {
  if (set == "batch") return "serving sweep: batch size (closed loop, one client per batch slot)";
  if (set == "seq") return "serving sweep: prompt length (closed loop, one client per batch slot)";
  return "serving sweep: request rate (open loop, Poisson arrivals)";
}

// Runs one set, prints its table and writes its files. Returns 1 when a file could not
// be written, else 0.
int run_sweep_set(const std::string& set, const serving_options& base, const std::string& device) {
  const kscope::sweep points = make_sweep(set, base);
  kscope::sweep_results results;
  results.title = set_title(set);
  results.metrics = sweep_metrics();
  const bool graph = base.graph && !base.launch_bound && !base.sync_in_step;
  results.context = {
      device,
      "model: " + std::to_string(base.layers) + " layers, hidden " + std::to_string(base.hidden) +
          ", fp16; decode " + (graph ? "as CUDA graphs" : "eager") + "; pathologies:" +
          (base.launch_bound ? " launch-bound" : "") + (base.sync_in_step ? " sync-in-step" : "") +
          (base.pageable_copy ? " pageable-copy" : "") + (base.interleave_prefill ? " interleave-prefill" : "") +
          (base.large_kv ? " large-kv" : "") +
          (base.launch_bound || base.sync_in_step || base.pageable_copy || base.interleave_prefill || base.large_kv
               ? ""
               : " none"),
      std::string("arrivals: ") +
          (set == "rate" ? "Poisson at each rate (open loop)"
                         : "clients = batch slots, each sending its next request when its last one is done (closed "
                           "loop)") +
          "; requests per point: " +
          (base.requests_given ? std::to_string(base.requests)
                               : set == "rate" ? "1.5 s of arrivals, at least 140" : "6 per client, at least 8") +
          "; prompt and output lengths drawn from [L/2, 3L/2] around the means",
      "warm-up: requests that arrived before the first request finished (the batch was filling), left out of "
      "every column; requests: the others",
      "TTFT: arrival to first token copied back, per request; TPOT: (last token - first token) / (output - 1), per "
      "request that also finished by the last arrival (TPOT requests; later ones decoded in the draining batch)",
      "throughput and mean decode batch: over the steps that ended in the window, from the first measured arrival "
      "to the last arrival (the drain after it is left out)",
      "kscope: scopes on, CUPTI off (a single run enables CUPTI, about 1 us more per launch)",
  };
  std::printf("\n%s: %zu points\n", results.title.c_str(), points.size());
  std::fflush(stdout);

  for (std::size_t i = 0; i < points.size(); ++i) {
    const kscope::sweep_point& p = points[i];
    const serving_options o = options_at(base, p);
    const std::string name = p.label();
    const model_shape shape = model_shape::of(o);
    std::size_t free_bytes = 0, total_bytes = 0;
    check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
    if (shape.total_bytes() > free_bytes) {
      const std::string why = "not run: needs " + two_decimals(gib(shape.total_bytes())) +
                              " GiB of GPU memory, " + two_decimals(gib(free_bytes)) + " GiB free";
      std::printf("[%zu/%zu] %s: %s\n", i + 1, points.size(), name.c_str(), why.c_str());
      results.add(p, std::vector<kscope::sweep_value>(results.metrics.size(), kscope::sweep_value::absent(why)));
      continue;
    }
    const steady::time_point start = steady::now();
    kscope::session::global().reset();  // this point's scopes only
    point_measurement m;
    long steps = 0;
    {
      engine e(o);
      e.warm_up();
      serve(o, e);
      m = measure(e);
      steps = e.steps();
    }
    const double wall_s = std::chrono::duration<double>(steady::now() - start).count();
    std::vector<std::string> notes;
    if (m.waiting_at_last_arrival > o.max_batch)
      notes.push_back(std::to_string(m.waiting_at_last_arrival) +
                      " measured requests were still waiting for a slot at the last arrival (more than the batch "
                      "of " + std::to_string(o.max_batch) +
                      "): arrivals outpace the loop, so TTFT grows with the run's length");
    std::printf("[%zu/%zu] %s: %d requests: %zu warm-up, %zu measured (%zu finished by the last arrival: TPOT); "
                "window %s s; %ld steps; %.2f s\n",
                i + 1, points.size(), name.c_str(), o.requests, m.warmup, m.ttft_ms.size(), m.tpot_ms.size(),
                m.no_window.empty() ? two_decimals(m.window_s).c_str() : "n/a", steps, wall_s);
    std::printf("      alone: %s\n", command_line(o).c_str());
    for (const std::string& n : notes) std::printf("      note: %s\n", n.c_str());
    std::fflush(stdout);
    results.add(p, point_values(m), notes);
  }

  std::printf("\n%s", results.markdown().c_str());
  kscope::sweep_plot_options plot;
  plot.title = results.title;
  plot.x_axis = set == "batch" ? "batch" : set == "seq" ? "prompt" : "rate";
  plot.panels = {{"ttft_p50_ms", "ttft_p99_ms"}, {"tpot_p50_ms", "tpot_p99_ms"}, {"output_tokens_per_s"}, {"requests_per_s"}};
  const std::string stem = "serving_sweep_" + set;
  const std::pair<std::string, std::string> files[] = {{stem + ".md", results.markdown()},
                                                       {stem + ".csv", results.csv()},
                                                       {stem + ".json", results.json()},
                                                       {stem + ".svg", kscope::sweep_svg(results, plot)}};
  int status = 0;
  std::string written;
  for (const auto& [path, text] : files) {
    std::string error;
    if (kscope::write_text_file(path, text, &error)) {
      written += (written.empty() ? "" : ", ") + path;
    } else {
      std::fprintf(stderr, "serving: %s\n", error.c_str());
      status = 1;
    }
  }
  if (!written.empty()) std::printf("\nwrote %s (plot: %s.svg)\n", written.c_str(), stem.c_str());
  std::fflush(stdout);
  return status;
}

int run_sweeps(const serving_options& base) {
  const steady::time_point start = steady::now();
  const std::string device = kscope::describe(kscope::query_device(0));
  int status = 0;
  for (const sweep_set& set : sweep_sets())
    if (base.sweep == "all" || base.sweep == set.name) status |= run_sweep_set(set.name, base, device);
  std::printf("\nsweeps done in %.1f s\n", std::chrono::duration<double>(steady::now() - start).count());
  return status;
}

}  // namespace
