// The embedding library's public header: it exposes a kscope type, so its users need
// kscope's headers too (they come through the exported target's dependency).
#pragma once
#include <kscope/core/stats.hpp>

#include <vector>

kscope::summary embedder_summarize(const std::vector<double>& samples);
