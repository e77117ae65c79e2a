// kscope/bench.hpp — entry header: the micro-benchmark harness (<kscope/bench/bench.hpp>).
// Its path is stable.
#pragma once
#include "bench/bench.hpp"
