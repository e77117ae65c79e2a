// kscope/attribution.hpp — moved to <kscope/cupti/attribution.hpp>; this forward stays for one release.
#pragma once
#include "cupti/attribution.hpp"
