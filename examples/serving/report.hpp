// What one run of examples/serving.cu prints besides kscope's own report: the run's
// configuration, the serving summary from host timestamps, and the GPU work per step
// taken from the kscope report.
#pragma once

#include "engine.hpp"

#include <kscope/kscope.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace {

// ---- configuration ------------------------------------------------------------------------

// The lines printed before the run: requests, model, GPU memory, pathologies, notes.
void print_configuration(const serving_options& o, const model_shape& shape) {
  const bool graph = o.graph && !o.launch_bound && !o.sync_in_step;
  if (o.concurrency > 0)
    std::printf("serving: %d requests from %d clients (closed loop), batch <= %d, prompt ~%d, output ~%d tokens%s\n",
                o.requests, o.concurrency, o.max_batch, o.prompt_tokens, o.output_tokens,
                o.large_kv ? (", history " + std::to_string(shape.history) + " cached tokens").c_str() : "");
  else
    std::printf("serving: %d requests at %g/s, batch <= %d, prompt ~%d, output ~%d tokens%s\n", o.requests,
                o.rate_per_s, o.max_batch, o.prompt_tokens, o.output_tokens,
                o.large_kv ? (", history " + std::to_string(shape.history) + " cached tokens").c_str() : "");
  std::printf("  model: %d layers, hidden %d (%d heads), vocab %d, fp16; decode %s\n", o.layers, o.hidden, shape.heads,
              vocab_size, graph ? "as CUDA graphs" : "eager");
  std::printf("  GPU memory %.2f GiB: weights %.2f, KV cache %.2f (%d slots x %d positions), activations %.2f\n",
              gib(shape.total_bytes()), gib(shape.layer_weight_bytes + shape.lm_head_bytes), gib(shape.kv_cache_bytes),
              o.max_batch, shape.max_context, gib(shape.activation_bytes));
  std::printf("  pathologies:%s%s%s%s%s%s\n", o.launch_bound ? " launch-bound" : "",
              o.sync_in_step ? " sync-in-step" : "", o.pageable_copy ? " pageable-copy" : "",
              o.interleave_prefill ? " interleave-prefill" : "", o.large_kv ? " large-kv" : "",
              o.launch_bound || o.sync_in_step || o.pageable_copy || o.interleave_prefill || o.large_kv ? "" : " none");
  if (o.graph && !graph)
    std::printf("  note: --graph ignored: %s\n", o.launch_bound
                                                     ? "--launch-bound decodes eagerly"
                                                     : "--sync-in-step's synchronizations cannot be captured");
  if (o.concurrency > 0 && o.rate_given) std::printf("  note: --rate unused: --concurrency runs a closed loop\n");
  if (o.trace_period_steps > 0)
    std::printf("  CUPTI traces %d step%s of every %d (paused and resumed between steps by the engine)\n",
                o.traced_steps, o.traced_steps == 1 ? "" : "s", o.trace_period_steps);
  std::fflush(stdout);
}

// ---- summary ------------------------------------------------------------------------------

// Percentile by linear interpolation between order statistics; NaNs are left out.
double percentile(std::vector<double> values, double p) {
  values.erase(std::remove_if(values.begin(), values.end(), [](double v) { return std::isnan(v); }), values.end());
  if (values.empty()) return std::nan("");
  std::sort(values.begin(), values.end());
  const double at = p / 100.0 * static_cast<double>(values.size() - 1);
  const std::size_t below = static_cast<std::size_t>(at);
  const std::size_t above = std::min(below + 1, values.size() - 1);
  return values[below] + (at - static_cast<double>(below)) * (values[above] - values[below]);
}

void print_summary(const engine& e, double wall_s) {
  const std::vector<request_timing>& done = e.finished();
  std::vector<double> queue, ttft, tpot, latency;
  long long tokens = 0;
  steady::time_point first_arrival = steady::time_point::max(), last_finish = steady::time_point::min();
  for (const request_timing& t : done) {
    queue.push_back(t.queue_ms);
    ttft.push_back(t.ttft_ms);
    tpot.push_back(t.tpot_ms);
    latency.push_back(t.latency_ms);
    tokens += t.output_tokens;
    first_arrival = std::min(first_arrival, t.arrival);
    last_finish = std::max(last_finish, t.finished);
  }
  const double span_s = done.empty() ? 0 : std::chrono::duration<double>(last_finish - first_arrival).count();
  std::printf("\nserving summary (host timestamps)\n");
  std::printf("  requests done      %zu in %.2f s (first arrival to last token; %.2f s with start-up)\n", done.size(),
              span_s, wall_s);
  std::printf("  throughput         %.0f output tokens/s, %.1f requests/s\n", span_s > 0 ? tokens / span_s : 0.0,
              span_s > 0 ? done.size() / span_s : 0.0);
  std::printf("  steps              %ld, mean decode batch %.1f\n", e.steps(), e.mean_decode_batch());
  // p50 and p99 in ms; "-" when no request has the value (TPOT needs two output tokens).
  const auto line = [](const char* name, const std::vector<double>& values) {
    const double p50 = percentile(values, 50), p99 = percentile(values, 99);
    if (std::isnan(p50))
      std::printf("  %-18s -\n", name);
    else
      std::printf("  %-18s p50 %8.3f ms   p99 %8.3f ms\n", name, p50, p99);
  };
  line("TTFT", ttft);
  line("TPOT", tpot);
  line("queue", queue);
  line("request latency", latency);
  // The steady steps: the first and last tenth (batch filling, draining) left out.
  const std::vector<double>& all = e.step_us();
  if (all.size() >= 10) {
    const std::vector<double> steady_steps(all.begin() + all.size() / 10, all.end() - all.size() / 10);
    double sum = 0;
    for (double v : steady_steps) sum += v;
    std::printf("  step time          mean %.1f us   p50 %.1f us   p99 %.1f us   max %.1f us   (%zu steady steps of %zu)\n",
                sum / steady_steps.size(), percentile(steady_steps, 50), percentile(steady_steps, 99),
                *std::max_element(steady_steps.begin(), steady_steps.end()), steady_steps.size(), all.size());
  }
}

// What the GPU ran per step, from kscope's attribution (CUPTI collecting): kernels of
// every scope under "step", and how many of them were replayed from graphs.
void print_gpu_work_per_step(const kscope::session_report& report) {
  std::uint64_t steps = 0, kernels = 0, copies = 0;
  for (const kscope::scope_report& s : report.scopes) {
    if (s.path == "step") steps = s.calls;
    if (s.path != "step" && s.path.rfind("step/", 0) != 0) continue;
    if (!s.gpu_activity) continue;
    kernels += s.gpu_activity->kernel_count;
    for (const kscope::copy_totals& c : s.gpu_activity->memcpy) copies += c.count;
  }
  if (!report.cupti_status.empty()) std::printf("  CUPTI              %s\n", report.cupti_status.c_str());
  // Traced in windows (--trace-steps): the CUPTI totals hold the windows' steps
  // only, so per step comes from the GPU-time account's steps whole inside a window.
  if (report.gpu_time && report.gpu_time->windowed) {
    const kscope::scope_report* step = report.find("step");
    const kscope::scope_gpu_time* t = step ? report.gpu_time->find(step->id) : nullptr;
    if (t != nullptr && t->calls_seen > 0)
      std::printf("  GPU work per step  %.1f kernels, %.1f device-to-host copies (CUPTI, %llu steps in traced windows)\n",
                  t->kernels_per_call, t->d2h_per_call, static_cast<unsigned long long>(t->calls_seen));
    else
      std::printf("  GPU work per step  unknown: no step lay whole inside a traced window\n");
    return;
  }
  if (steps == 0 || kernels == 0) return;
  std::printf("  GPU work per step  %.1f kernels, %.1f copies (CUPTI, %llu steps)\n", double(kernels) / steps,
              double(copies) / steps, static_cast<unsigned long long>(steps));
}

}  // namespace
