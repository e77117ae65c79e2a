// kscope/sweep.hpp — moved to <kscope/core/sweep.hpp>; this forward stays for one release.
#pragma once
#include "core/sweep.hpp"
