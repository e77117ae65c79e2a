// kscope/report.hpp — moved to <kscope/report/report.hpp>; this forward stays for one release.
#pragma once
#include "report/report.hpp"
