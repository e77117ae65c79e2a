// A consumer program: includes kscope, times a host phase, summarizes samples.
#include <kscope/kscope.hpp>

#include <cstdio>
#include <vector>

int main() {
  std::vector<double> samples{5, 1, 4, 2, 3, 3, 3, 2, 4, 3};
  const kscope::summary s = kscope::summarize(samples, {0.95, false});
  std::printf("median %.1f over %zu samples\n", s.median, s.n);
  return s.median == 3.0 ? 0 : 1;
}
