// kscope/merge.hpp — moved to <kscope/report/merge.hpp>; this forward stays for one release.
#pragma once
#include "report/merge.hpp"
