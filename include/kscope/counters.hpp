// kscope/counters.hpp — forwards to <kscope/cupti/counters.hpp>: hardware counters (maths in core/counters.hpp).
#pragma once
#include "cupti/counters.hpp"
