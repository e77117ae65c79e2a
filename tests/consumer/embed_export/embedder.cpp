#include "embedder.hpp"

kscope::summary embedder_summarize(const std::vector<double>& samples) {
  return kscope::summarize(samples, {0.95, false});
}
