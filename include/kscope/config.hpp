// kscope/config.hpp — moved to <kscope/core/config.hpp>; this forward stays for one release.
#pragma once
#include "core/config.hpp"
