// kscope/roofline.hpp — entry header: roofline placement and the bound classification
// (<kscope/core/roofline.hpp>). Its path is stable.
#pragma once
#include "core/roofline.hpp"
