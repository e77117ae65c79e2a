// kscope/trace.hpp — moved to <kscope/report/trace.hpp>; this forward stays for one release.
#pragma once
#include "report/trace.hpp"
