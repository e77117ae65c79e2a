// kscope/stats.hpp — entry header: summaries, median intervals, warm-up and run-to-run
// comparison (<kscope/core/stats.hpp>). Its path is stable.
#pragma once
#include "core/stats.hpp"
