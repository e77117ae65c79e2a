// A consumer in the compiled mode: this file sees declarations only
// (KSCOPE_SEPARATE_COMPILATION comes with kscope::compiled), the definitions come from the
// library. It records a scope and prints the report, so that the scope, the session and the
// printers all link.
#include <kscope/kscope.hpp>

#include <cstdio>
#include <string>

#ifndef KSCOPE_SEPARATE_COMPILATION
#  error "kscope::compiled must define KSCOPE_SEPARATE_COMPILATION for its consumers"
#endif

int main() {
  for (int i = 0; i < 3; ++i) {
    KSCOPE_SCOPE("compiled_consumer_phase");
  }
  const std::string text = kscope::session::global().report().text();
  std::fputs(text.c_str(), stdout);
  return text.find("compiled_consumer_phase") != std::string::npos ? 0 : 1;
}
