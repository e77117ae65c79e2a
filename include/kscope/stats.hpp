// kscope/stats.hpp — moved to <kscope/core/stats.hpp>; this forward stays for one release.
#pragma once
#include "core/stats.hpp"
