// kscope/kscope.hpp — the umbrella header: include this one and use everything.
//
// Each module header also stands alone (tests/headers compiles every one of them first
// in its own translation unit). gbench.hpp is not included here: it needs Google
// Benchmark, which kscope does not force on its users.
#pragma once

#include "config.hpp"

// Pure core: no CUDA headers, testable anywhere.
#include "attribution.hpp"
#include "merge.hpp"
#include "rank.hpp"
#include "report.hpp"
#include "roofline.hpp"
#include "stats.hpp"
#include "sweep.hpp"
#include "plot.hpp"
#include "trace.hpp"

// CUDA edge: compiles out cleanly when CUDA is absent (KSCOPE_HAS_CUDA=0).
#include "bench.hpp"
#include "cupti.hpp"
#include "device.hpp"
#include "scope.hpp"
#include "session.hpp"
