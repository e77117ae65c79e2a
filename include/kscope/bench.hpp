// kscope/bench.hpp — moved to <kscope/bench/bench.hpp>; this forward stays for one release.
#pragma once
#include "bench/bench.hpp"
