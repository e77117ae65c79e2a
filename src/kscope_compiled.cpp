// src/kscope_compiled.cpp — the one translation unit of kscope's compiled mode.
//
// Built as the CMake target kscope::compiled. A program that links it gets
// KSCOPE_SEPARATE_COMPILATION on each of its files, so the heavy headers give it
// declarations only (include/kscope/core/config.hpp); this file defines
// KSCOPE_IMPLEMENTATION and compiles every definition once. A build without CMake does the
// same by hand: -DKSCOPE_SEPARATE_COMPILATION everywhere, and one file with these lines.
#define KSCOPE_IMPLEMENTATION 1
#include <kscope/kscope.hpp>
