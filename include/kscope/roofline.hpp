// kscope/roofline.hpp — moved to <kscope/core/roofline.hpp>; this forward stays for one release.
#pragma once
#include "core/roofline.hpp"
