// kscope/kscope.hpp — the umbrella header: include this one and use everything.
//
// The library is layered (docs/architecture.md): core → device → scope → cupti → report →
// session → bench, each folder including only the folders before it. Each module header
// also stands alone (tests/headers compiles every one of them first in its own translation
// unit). bench/gbench.hpp is not included here: it needs Google Benchmark, which kscope
// does not force on its users.
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

// CUPTI activity collection and attribution of GPU work to scopes.
#include "cupti/attribution.hpp"
#include "cupti/collector.hpp"
#include "cupti/counters.hpp"
#include "cupti/live_metrics.hpp"
#include "cupti/metric_sampler.hpp"
#include "cupti/scope_counters.hpp"
#include "cupti/warp_stalls.hpp"

// Report data and its printers: text, JSON, CSV, Chrome trace, SVG, merge across ranks.
#include "report/compare.hpp"
#include "report/diagnose.hpp"
#include "report/merge.hpp"
#include "report/plot.hpp"
#include "report/rank.hpp"
#include "report/report.hpp"
#include "report/trace.hpp"

// The session: turns what scopes and the collector recorded into a report.
#include "session/session.hpp"

// Micro-benchmark harness.
#include "bench/bench.hpp"
