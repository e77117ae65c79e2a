// The serving example's command line (examples/serving.cu): its options, --help, and the
// checks of the values and of the sweep sets.
#pragma once

#include "engine_kernels.cuh"  // head_dim: --hidden must be a multiple of it

#include <kscope/kscope.hpp>  // kscope::param_value, to write a sweep point in a message

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace {

// ---- command line ---------------------------------------------------------------------

struct serving_options {
  int requests = 320;
  double rate_per_s = 100;  // 0: every request arrives at once
  int max_batch = 32;
  int prompt_tokens = 256;  // mean; each request draws from [P/2, 3P/2]
  int output_tokens = 128;  // mean; each request draws from [T/2, 3T/2]
  int layers = 8;
  int hidden = 4096;
  bool prompt_given = false;
  bool hidden_given = false;
  bool launch_bound = false;
  bool sync_in_step = false;
  bool pageable_copy = false;
  bool interleave_prefill = false;
  bool large_kv = false;
  bool graph = false;
  // --trace-steps W/P: CUPTI traces W steps of every P, paused and resumed by the engine
  // between steps (0/0: every step traced).
  int traced_steps = 0, trace_period_steps = 0;
  bool metric_sampling = false;
  bool quiet = false;
  std::string json_path;
  std::string trace_path;
  // Closed loop: this many clients, each sending its next request when its last one is
  // done (0: open loop, Poisson arrivals at rate_per_s).
  int concurrency = 0;
  bool requests_given = false;
  bool rate_given = false;
  // --sweep: "batch", "seq", "rate" or "all" ("" for one run), and its points.
  std::string sweep;
  std::vector<double> sweep_points;
};

void print_usage(std::FILE* out) {
  std::fputs(
      "usage: serving [options]   (each takes --opt=value or --opt value)\n"
      "  --requests N          requests to serve (default 320)\n"
      "  --rate R              arrivals per second, Poisson; 0 = all at once (default 100)\n"
      "  --batch B             most requests decoded together (default 32)\n"
      "  --prompt P            mean prompt tokens, drawn from [P/2, 3P/2] (default 256;\n"
      "                        1024 with --interleave-prefill)\n"
      "  --output T            mean output tokens, drawn from [T/2, 3T/2] (default 128)\n"
      "  --layers L            decoder layers (default 8)\n"
      "  --hidden H            hidden size, a multiple of 128 (default 4096; 1024 with\n"
      "                        --launch-bound)\n"
      "  --graph               replay decode as a CUDA graph, captured once per batch size\n"
      "  --trace-steps W/P     CUPTI traces W steps of every P: the engine pauses and resumes\n"
      "                        tracing between steps, on its own thread (default: every step)\n"
      "  --concurrency C       closed loop: C clients, each sending its next request as soon\n"
      "                        as its last one is done (--rate unused; default 0: open loop,\n"
      "                        Poisson arrivals at --rate)\n"
      "pathologies (off by default; the defaults give a healthy run):\n"
      "  --launch-bound        eager decode: 8 tiny elementwise kernels per layer, 1 ms of\n"
      "                        host work per step, no graph\n"
      "  --sync-in-step        cudaDeviceSynchronize after every layer and a blocking copy of\n"
      "                        the logits to pageable memory inside decode\n"
      "  --pageable-copy       after each decode, the logits copied device-to-host into\n"
      "                        pageable memory (cudaMemcpyAsync on the step's stream, no\n"
      "                        synchronize): only the copy is wrong\n"
      "  --interleave-prefill  no prefill chunking: whole prompts of every newly arrived\n"
      "                        request are prefilled inside the decode step\n"
      "  --large-kv            every request continues a 4096-token cached history: decode\n"
      "                        attention reads a large KV cache (about 19 GiB in all)\n"
      "output:\n"
      "  --metric-sampling     sample GPU metrics while running (per step scope \"step\")\n"
      "  --json FILE           write the kscope session report as JSON\n"
      "  --trace FILE          write a Chrome / Perfetto trace\n"
      "  --quiet               print the serving summary only, not the kscope report\n"
      "sweeps (one run of the loop per point; a table on stdout, serving_sweep_<set>.md,\n"
      ".csv, .json and .svg in the working directory):\n"
      "  --sweep SET           batch: --batch over the points, one client per slot (closed\n"
      "                        loop) at --prompt and --output; seq: --prompt over the points,\n"
      "                        closed loop at --batch; rate: --rate over the points (Poisson)\n"
      "                        at --batch, --prompt, --output; all: the three in turn\n"
      "  --sweep-points LIST   the points of one set, comma-separated (defaults: batch\n"
      "                        1,2,4,8,16,32,64; seq 128,256,512,1024,2048; rate\n"
      "                        50,100,150,200). --requests N fixes the requests per point\n"
      "                        (default: 6 per client, at least 8, closed loop; 1.5 s\n"
      "                        of arrivals, at least 140, rate)\n"
      "  --help                this text\n",
      out);
}

bool parse_int(const std::string& text, long lo, long hi, int& out) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || v < lo || v > hi) return false;
  out = static_cast<int>(v);
  return true;
}

bool parse_rate(const std::string& text, double& out) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(v) || v < 0) return false;
  out = v;
  return true;
}

// "1,2,4,8": numbers > 0, at least one.
bool parse_points(const std::string& text, std::vector<double>& out) {
  out.clear();
  std::stringstream list(text);
  std::string item;
  while (std::getline(list, item, ',')) {
    double v = 0;
    if (!parse_rate(item, v) || v <= 0) return false;
    out.push_back(v);
  }
  return !out.empty() && text.back() != ',';
}

// The defaults of each sweep set, and the range its points must lie in (the knob's).
struct sweep_set {
  const char* name;
  const char* axis;  // the option it sweeps
  std::vector<double> default_points;
  double lo, hi;
  bool integers;
};
const std::vector<sweep_set>& sweep_sets() {
  static const std::vector<sweep_set> sets = {
      {"batch", "--batch", {1, 2, 4, 8, 16, 32, 64}, 1, 1024, true},
      {"seq", "--prompt", {128, 256, 512, 1024, 2048}, 1, 65536, true},
      {"rate", "--rate", {50, 100, 150, 200}, 0, 1e9, false},
  };
  return sets;
}

// The options a sweep decides itself, and the points' range. -1 to go on, else 2.
int check_sweep_options(const serving_options& o) {
  const auto refuse = [](const std::string& why) {
    std::fprintf(stderr, "serving: %s\n", why.c_str());
    return 2;
  };
  if (o.sweep.empty()) {
    if (!o.sweep_points.empty()) return refuse("--sweep-points needs --sweep batch, seq or rate");
    return -1;
  }
  if (!o.json_path.empty() || !o.trace_path.empty() || o.metric_sampling)
    return refuse("--json, --trace and --metric-sampling are for one run; a sweep writes serving_sweep_<set>.*");
  if (o.concurrency > 0)
    return refuse("--concurrency: the sweep sets choose the arrivals (batch and seq: one client per batch slot; "
                  "rate: Poisson)");
  if (o.rate_given)
    return refuse("--rate: --sweep rate sweeps it (its points: --sweep-points), and batch and seq run closed loop");
  if (o.sweep == "all" && !o.sweep_points.empty())
    return refuse("--sweep-points needs one set (--sweep batch, seq or rate), not all");
  for (const sweep_set& set : sweep_sets()) {
    if (o.sweep != set.name) continue;
    for (double v : o.sweep_points) {
      if (v < set.lo || v > set.hi || (set.integers && v != std::floor(v)))
        return refuse(std::string("--sweep-points for ") + set.name + ": '" + kscope::param_value(v).to_string() +
                      "' is not a valid " + set.axis + (set.integers ? " (an integer in [" : " (a number in (") +
                      kscope::param_value(static_cast<long long>(set.lo)).to_string() + ", " +
                      kscope::param_value(set.hi).to_string() + "])");
    }
  }
  return -1;
}

// Returns -1 to go on, else the exit status (0 after --help, 2 on a bad command line).
int parse_command_line(int argc, char** argv, serving_options& o) {
  struct value_option {
    const char* name;
    const char* expects;
    std::function<bool(const std::string&)> set;
  };
  const std::vector<value_option> value_options = {
      {"--requests", "an integer in [1, 10000000]",
       [&](const std::string& v) { return o.requests_given = parse_int(v, 1, 10000000, o.requests); }},
      {"--rate", "a number >= 0", [&](const std::string& v) { return o.rate_given = parse_rate(v, o.rate_per_s); }},
      {"--batch", "an integer in [1, 1024]", [&](const std::string& v) { return parse_int(v, 1, 1024, o.max_batch); }},
      {"--prompt", "an integer in [1, 65536]",
       [&](const std::string& v) { return o.prompt_given = parse_int(v, 1, 65536, o.prompt_tokens); }},
      {"--output", "an integer in [1, 65536]",
       [&](const std::string& v) { return parse_int(v, 1, 65536, o.output_tokens); }},
      {"--layers", "an integer in [1, 256]", [&](const std::string& v) { return parse_int(v, 1, 256, o.layers); }},
      {"--hidden", "a multiple of 128 in [128, 16384]",
       [&](const std::string& v) {
         return o.hidden_given = parse_int(v, head_dim, 16384, o.hidden) && o.hidden % head_dim == 0;
       }},
      {"--json", "a file name",
       [&](const std::string& v) {
         o.json_path = v;
         return !v.empty();
       }},
      {"--trace", "a file name",
       [&](const std::string& v) {
         o.trace_path = v;
         return !v.empty();
       }},
      {"--concurrency", "an integer in [0, 1024]",
       [&](const std::string& v) { return parse_int(v, 0, 1024, o.concurrency); }},
      {"--sweep", "batch, seq, rate or all",
       [&](const std::string& v) {
         o.sweep = v;
         return v == "batch" || v == "seq" || v == "rate" || v == "all";
       }},
      {"--trace-steps", "W/P, two integers with 0 < W < P <= 1000000",
       [&](const std::string& v) {
         const std::size_t slash = v.find('/');
         return slash != std::string::npos && parse_int(v.substr(0, slash), 1, 999999, o.traced_steps) &&
                parse_int(v.substr(slash + 1), 2, 1000000, o.trace_period_steps) && o.traced_steps < o.trace_period_steps;
       }},
      {"--sweep-points", "a comma-separated list of numbers > 0",
       [&](const std::string& v) { return parse_points(v, o.sweep_points); }},
  };
  const std::vector<std::pair<const char*, bool*>> flags = {
      {"--launch-bound", &o.launch_bound},
      {"--sync-in-step", &o.sync_in_step},
      {"--pageable-copy", &o.pageable_copy},
      {"--interleave-prefill", &o.interleave_prefill},
      {"--large-kv", &o.large_kv},
      {"--graph", &o.graph},
      {"--metric-sampling", &o.metric_sampling},
      {"--quiet", &o.quiet},
  };
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      print_usage(stdout);
      return 0;
    }
    const std::size_t eq = arg.find('=');
    const std::string name = arg.substr(0, eq);
    bool known = false;
    for (const auto& [flag, target] : flags) {
      if (name != flag) continue;
      if (eq != std::string::npos) {
        std::fprintf(stderr, "serving: %s takes no value\n", flag);
        return 2;
      }
      *target = known = true;
    }
    for (const value_option& option : value_options) {
      if (name != option.name) continue;
      known = true;
      std::string value;
      if (eq != std::string::npos) {
        value = arg.substr(eq + 1);
      } else if (i + 1 < argc) {
        value = argv[++i];
      } else {
        std::fprintf(stderr, "serving: %s needs a value (%s)\n", option.name, option.expects);
        return 2;
      }
      if (!option.set(value)) {
        std::fprintf(stderr, "serving: %s expects %s, not '%s'\n", option.name, option.expects, value.c_str());
        return 2;
      }
    }
    if (!known) {
      std::fprintf(stderr, "serving: unknown option '%s' (--help lists them)\n", arg.c_str());
      return 2;
    }
  }
  // Each pathology is strongest at its own sizes; a size given explicitly wins, so the
  // healthy run can be compared at the same sizes (e.g. --prompt 1024 without the knob).
  if (o.interleave_prefill && !o.prompt_given) o.prompt_tokens = 1024;  // long prompts
  if (o.launch_bound && !o.hidden_given) o.hidden = 1024;               // a small model
  return check_sweep_options(o);
}

}  // namespace
