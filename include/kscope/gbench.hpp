// kscope/gbench.hpp — moved to <kscope/bench/gbench.hpp>; this forward stays for one release.
#pragma once
#include "bench/gbench.hpp"
