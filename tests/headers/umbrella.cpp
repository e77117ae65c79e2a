// Compiles the umbrella header on its own (see tests/headers/CMakeLists.txt).
#include <kscope/kscope.hpp>
#include <kscope/kscope.hpp>

int kscope_header_check_anchor() { return KSCOPE_VERSION_MAJOR; }
