// Links the embedder and calls kscope directly too: both resolve to the installed copies.
#include <embedder.hpp>
#include <kscope/core/config.hpp>

#include <cstdio>
#include <cstring>

int main() {
  const kscope::summary s = embedder_summarize({5, 1, 4, 2, 3, 3, 3, 2, 4, 3});
  std::printf("kscope %s through the embedder: median %.1f\n", KSCOPE_VERSION_STRING, s.median);
  return s.median == 3.0 && std::strlen(KSCOPE_VERSION_STRING) > 0 ? 0 : 1;
}
