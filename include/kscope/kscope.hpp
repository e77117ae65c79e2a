// kscope/kscope.hpp — the umbrella header: include this one and use everything.
//
// The library is layered (docs/architecture.md): the base (core → device → scope → cupti →
// evidence), the features side by side on it (counters, warp_stalls, activity, pm_sampling),
// report → verdict on the base, and session → bench, which compose everything before them.
// Each public header's declarations stand alone (tests/headers compiles every one of them
// first in its own translation unit, in the compiled mode); their definitions are compiled
// header-only through this header. bench/gbench.hpp is not included here: it needs Google
// Benchmark, which kscope does not force on its users.
//
// Header-only by default; KSCOPE_SEPARATE_COMPILATION and kscope::compiled compile the
// heavy definitions once (core/config.hpp, src/kscope_compiled.cpp).
#pragma once

// Pure core: no CUDA headers, testable anywhere.
#include "core/config.hpp"
#include "core/dtype.hpp"
#include "core/roofline.hpp"
#include "core/stats.hpp"
#include "core/sweep.hpp"
#include "core/text.hpp"

// The GPU's description and peaks (CUDA edge, compiles out without CUDA).
#include "device/device.hpp"

// Scopes and ranges: what instrumented code includes.
#include "scope/scope.hpp"

// The evidence the features produce (here the GPU-time account; the rest comes with the
// features and the report), then the features: GPU activity attributed to scopes, hardware
// counters, warp stalls, GPU metrics sampled while running.
#include "evidence/gpu_time.hpp"
#include "activity/attribution.hpp"
#include "activity/collector.hpp"
#include "counters/collect.hpp"
#include "counters/scope_counters.hpp"
#include "warp_stalls/collect.hpp"
#include "pm_sampling/sampler.hpp"

// Report data and its printers: text, JSON, CSV, Chrome trace, SVG, merge across ranks,
// compare; the conclusions drawn from a report.
#include "report/compare.hpp"
#include "report/folded.hpp"
#include "report/merge.hpp"
#include "report/plot.hpp"
#include "report/rank.hpp"
#include "report/report.hpp"
#include "report/trace.hpp"
#include "report/trace_merge.hpp"
#include "verdict/diagnose.hpp"
#include "verdict/diagnosis_page.hpp"
#include "verdict/scope_verdict.hpp"

#include "session/live_metric_sampling.hpp"
#include "session/session.hpp"

// Micro-benchmark harness.
#include "bench/bench.hpp"
