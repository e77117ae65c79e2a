// A consumer that includes only the headers it uses, header-only: a scope around a host
// phase and the statistics of some samples. The packaging cases that check a way of finding
// kscope (add_subdirectory, FetchContent, pkg-config) build this one, which compiles in
// seconds; the whole umbrella header-only is the find_package case's (main.cpp), and a .cu
// file against kscope::compiled the find_package CUDA case's (main.cu).
#include <kscope/core/stats.hpp>
#include <kscope/scope/scope.hpp>

#include <cstdio>
#include <vector>

int main() {
  std::vector<double> samples{5, 1, 4, 2, 3, 3, 3, 2, 4, 3};
  kscope::summary s;
  {
    KSCOPE_SCOPE("consumer_phase");
    s = kscope::summarize(samples, {0.95, false});
  }
  std::printf("median %.1f over %zu samples\n", s.median, s.n);
  return s.median == 3.0 ? 0 : 1;
}
