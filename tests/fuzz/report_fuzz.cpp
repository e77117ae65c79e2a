// libFuzzer target over what `kscope report` and `kscope merge` do with a file: the JSON
// reader, parse_report, the text, JSON and folded printers, merge_reports,
// identify_document and merge_traces; the checks are in
// report_fuzz_entry.hpp (shared with mutation_test.cpp, which runs in every ctest).
// Built with clang and -DKSCOPE_FUZZ=ON; how to run it: tests/fuzz/README.md.
#include "report_fuzz_entry.hpp"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  (void)kscope_fuzz_one_input(data, size);
  return 0;  // libFuzzer: inputs are never rejected from the corpus
}
