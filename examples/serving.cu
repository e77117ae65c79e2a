// A small LLM-serving loop instrumented with kscope, with one knob per classic pathology.
//
// A producer thread plays the clients: requests (prompt length, output length) arrive at a
// Poisson rate into a queue. The main thread is the engine: each step it schedules
// (admits requests into free batch slots, builds the batch metadata on the host and copies
// it to the GPU), prefills newly admitted prompts, decodes one token for every running
// request, samples (argmax over the vocabulary), and copies the sampled token ids back.
// The model is a decoder of `--layers` identical layers, fp16, hidden `--hidden`, with a
// per-layer KV cache; GEMMs go to cuBLAS (linked: CUDA::cublas), the rest are the small
// kernels of serving/engine_kernels.cuh. Every request carries cross-thread kscope ranges
// ("request", "queue", "ttft"); every step is a KSCOPE_SCOPE("step") with its phases inside.
//
//   ./serving                          healthy: about 4 s and 3 GiB on an H100/H200
//   ./serving --launch-bound           GPU idles between tiny launches and host work
//   ./serving --sync-in-step           blocking syncs and a pageable copy inside decode
//   ./serving --interleave-prefill     whole long prompts prefilled inside decode steps
//   ./serving --large-kv               4096-token histories: attention is DRAM-bound
//   ./serving --graph --json run.json  decode replayed as CUDA graphs; report as JSON
//   ./serving --sweep all              the three sweep sets (batch size, prompt length,
//                                      request rate): a table, CSV, JSON and an SVG per set
//
// docs/serving.md describes the loop, the knobs and what each one does to the kernels.
//
// ---- how kscope instruments the engine ------------------------------------------------
//
// 1. Markers in the engine, inline where its phases run (serving/engine.hpp): they are the
//    only kscope code there. With -DKSCOPE_DISABLE (target serving_uninstrumented) they
//    compile to nothing. The report's tree, and where each node is opened:
//
//      step               KSCOPE_SCOPE("step")                  engine::step_body()
//        schedule         KSCOPE_SCOPE("schedule")              engine::schedule()
//          h2d            kscope::scope s{"h2d", stream_}       engine::schedule()
//        prefill          kscope::scope s{"prefill", stream_}   engine::prefill(); tag, set_work
//        decode           kscope::scope s{"decode", stream_}    engine::decode(); tag, set_work
//          attention      attention.emplace("attention")        engine::run_layers(); not in a
//                                                               graph's capture
//        sampling         kscope::scope s{"sampling", stream_}  engine::step_body()
//        d2h              kscope::scope s{"d2h", stream_}       engine::step_body()
//        retire           KSCOPE_SCOPE("retire")                engine::retire()
//      load_model         KSCOPE_SCOPE("load_model")            engine::allocate()
//      warmup             KSCOPE_SCOPE("warmup")                engine::warm_up()
//      wait_for_requests  KSCOPE_SCOPE("wait_for_requests")     serve()
//      tokenize           KSCOPE_SCOPE("tokenize")              produce_requests() (producer thread)
//      ~request, ~queue,  kscope::start_range(...)              produce_requests(); .end() in
//      ~ttft                                                    engine::schedule() (queue) and
//                                                               engine::retire() (ttft, request)
//
// 2. The session and the report: the ten lines of main() below marked [1] to [10].
//      [1]  kscope::session::global()            the process's session
//      [2]  session.enable_cupti()               attributes every kernel and copy to the scope
//                                                that launched it (KSCOPE_CUPTI=0: off)
//      [3]  session.enable_metric_sampling(...)  --metric-sampling: GPU metrics per "step"
//      [4]  session.disable_metric_sampling()
//      [5]  session.report()                     the kscope::session_report
//      [6]  report.text()                        printed unless --quiet
//      [7]  print_gpu_work_per_step(report)      kernels and copies per step (serving/report.hpp)
//      [8]  kscope::diagnose(report)             the findings, printed with their numbers
//      [9]  report.write_json(...)               --json
//      [10] session.write_trace(...)             --trace
//    --sweep runs the loop once per point instead (serving/sweep.hpp, run_sweep_set()): a
//    session reset before each point, kscope::sweep for the points, kscope::sweep_results
//    for the table, CSV and JSON, kscope::sweep_svg for the plot, kscope::write_text_file.
//
// The files:
//   serving/engine_kernels.cuh  the GPU kernels
//   serving/options.hpp         the command line (--help)
//   serving/engine.hpp          clients, request queue, model, scheduler, step loop, serve()
//   serving/report.hpp          the configuration lines, the serving summary, GPU work per step
//   serving/sweep.hpp           --sweep: the points, their measurements, tables and plots
//   serving.cu                  main(): the session and the report
#include "serving/engine.hpp"
#include "serving/options.hpp"
#include "serving/report.hpp"
#include "serving/sweep.hpp"

#include <kscope/kscope.hpp>

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <string>

int main(int argc, char** argv) {
  serving_options o;
  if (const int status = parse_command_line(argc, argv, o); status >= 0) return status;

  // Without a GPU there is nothing to serve; exit 0 so that a CI machine can run this.
  // (In kscope's words: no driver, no device or a driver too old, not the runtime's error.)
  if (const kscope::gpu_availability& gpu = kscope::probe_gpu(); !gpu.available()) {
    std::printf("serving: no CUDA device (%s); this example needs a GPU, nothing to do.\n", gpu.message.c_str());
    return 0;
  }
  if (!o.sweep.empty()) return run_sweeps(o);

  const steady::time_point start = steady::now();
  const model_shape shape = model_shape::of(o);
  std::size_t free_bytes = 0, total_bytes = 0;
  check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
  if (shape.total_bytes() > free_bytes)
    fail("needs " + std::to_string(gib(shape.total_bytes())) + " GiB of GPU memory, " +
         std::to_string(gib(free_bytes)) + " GiB free: lower --batch, --layers, --hidden, --prompt or --output");
  print_configuration(o, shape);

  kscope::session& session = kscope::session::global();  // [1]
  // Every kernel and copy is then attributed to the scope that launched it.
  session.enable_cupti();  // [2]
  engine e(o);
  e.warm_up();
  if (o.metric_sampling && !session.enable_metric_sampling({}, {"step"}))  // [3]
    std::printf("  note: metric sampling did not start (the report's warnings say why)\n");

  serve(o, e);
  if (o.metric_sampling) session.disable_metric_sampling();  // [4]
  const double wall_s = std::chrono::duration<double>(steady::now() - start).count();

  const kscope::session_report report = session.report();  // [5]
  if (!o.quiet) std::fputs(report.text().c_str(), stdout);  // [6]
  print_summary(e, wall_s);
  print_gpu_work_per_step(report);  // [7]
  if (e.graphs_captured() > 0)
    std::printf("  decode graphs      %d captured (one per batch size seen)\n", e.graphs_captured());
  // What kscope concludes from the report alone, each finding with its numbers.
  std::printf("\n%s", kscope::diagnosis_text(kscope::diagnose(report), report).c_str());  // [8]
  int status = 0;
  std::string error;
  if (!o.json_path.empty() && !report.write_json(o.json_path, &error)) {  // [9]
    std::fprintf(stderr, "serving: %s\n", error.c_str());
    status = 1;
  }
  if (!o.trace_path.empty() && !session.write_trace(o.trace_path, &error)) {  // [10]
    std::fprintf(stderr, "serving: %s\n", error.c_str());
    status = 1;
  }
  return status;
}
