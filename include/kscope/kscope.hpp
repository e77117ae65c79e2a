// kscope/kscope.hpp — the umbrella header: include this one and use everything.
//
// Each module header also stands alone (tests/headers compiles every one of them first
// in its own translation unit). gbench.hpp is not included here: it needs Google
// Benchmark, which kscope does not force on its users.
#pragma once

#include "config.hpp"
