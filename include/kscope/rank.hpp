// kscope/rank.hpp — moved to <kscope/report/rank.hpp>; this forward stays for one release.
#pragma once
#include "report/rank.hpp"
