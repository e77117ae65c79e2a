// kscope/cupti.hpp — moved to <kscope/cupti/collector.hpp>; this forward stays for one release.
#pragma once
#include "cupti/collector.hpp"
