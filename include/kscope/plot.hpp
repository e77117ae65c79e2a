// kscope/plot.hpp — moved to <kscope/report/plot.hpp>; this forward stays for one release.
#pragma once
#include "report/plot.hpp"
