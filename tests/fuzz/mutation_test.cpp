// A deterministic fuzz run for every compiler and every ctest: each file of the seed
// corpus (tests/fuzz/corpus) is mutated many times with a fixed-seed generator and run
// through the fuzz entry point (report_fuzz_entry.hpp: the JSON reader, parse_report,
// the text, JSON and folded printers, merge of reports, identify_document and merge of
// traces). A broken invariant of the entry point (an unclear error, a report whose JSON
// does not read back, a merged trace that does not merge again) or an escaping exception
// fails the case, with the input saved to a file to replay; a crash fails the test program.
//
// The mutations are those that found the reader's past bugs: bit flips, byte inserts and
// deletes, splices from another seed, numbers replaced by extremes (1e308, -1, NaN, 2^64,
// a depth of 1e9, clock bases and timestamps at the trace merge's bounds), duplicated
// regions (many scopes), deep nesting, truncation.
// KSCOPE_MUTATIONS=n sets the mutations per seed file (default 5000: about 95 000 inputs,
// 13 s optimized on one core; the libFuzzer target goes further, README.md).
#include "report_fuzz_entry.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace {

// splitmix64: small, fast, the same sequence on every platform.
class fixed_random {
 public:
  explicit fixed_random(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  std::size_t below(std::size_t n) { return n == 0 ? 0 : static_cast<std::size_t>(next() % n); }

 private:
  std::uint64_t state_;
};

// Values that once sized allocations or were cast without a range check, and JSON that
// is not a number where a number belongs.
const char* const extreme_values[] = {
    "1e308", "-1e308", "1e300", "-1", "-5", "1e9", "4294967296", "18446744073709551616", "18446744073709551615",
    "-9223372036854775809", "9223372036854775807", "2147483648", "65536", "65537", "0.5", "2.5", "-0", "1e-400",
    "NaN", "Infinity", "null", "true", "\"7\"", "[]", "{}", "[1e9]", "0",
    // The trace merge's clock bases (2^62 ns) and timestamps (9e15 us), either side.
    "4611686018427387904", "4611686018427387392", "-4611686018427387392", "9.1e18", "-9.1e18", "9e15", "-9e15",
    "8999999999999999", "4e18"};

const char* const json_tokens[] = {"{", "}", "[", "]", ",", ":", "\"", "\\", "\\u", "\\ud83d", "null", "\"depth\":",
                                   "\"scopes\":[", "{\"path\":\"x\",\"depth\":1e9}", "\"schema\":\"kscope.report/1\""};

void replace_a_number(std::string& doc, fixed_random& random) {
  // Find the start of a number token after a random position.
  std::size_t at = random.below(doc.size());
  while (at < doc.size() && !(doc[at] == '-' || (doc[at] >= '0' && doc[at] <= '9'))) ++at;
  if (at >= doc.size()) return;
  std::size_t end = at + 1;
  while (end < doc.size() && std::string_view("0123456789.eE+-").find(doc[end]) != std::string_view::npos) ++end;
  doc.replace(at, end - at, extreme_values[random.below(std::size(extreme_values))]);
}

void mutate(std::string& doc, const std::vector<std::string>& seeds, fixed_random& random) {
  const std::size_t steps = 1 + random.below(4);
  for (std::size_t step = 0; step < steps; ++step) {
    switch (random.below(9)) {
      case 0:  // bit flip
        if (!doc.empty()) doc[random.below(doc.size())] ^= static_cast<char>(1u << random.below(8));
        break;
      case 1:  // insert a byte, any byte
        doc.insert(doc.begin() + static_cast<std::ptrdiff_t>(random.below(doc.size() + 1)),
                   static_cast<char>(random.below(256)));
        break;
      case 2:  // delete a run of bytes
        if (!doc.empty()) {
          const std::size_t at = random.below(doc.size());
          doc.erase(at, 1 + random.below(std::min<std::size_t>(16, doc.size() - at)));
        }
        break;
      case 3: {  // splice: a piece of another seed replaces a piece of this one
        const std::string& other = seeds[random.below(seeds.size())];
        if (other.empty()) break;
        const std::size_t from = random.below(other.size());
        const std::string piece = other.substr(from, 1 + random.below(256));
        const std::size_t at = random.below(doc.size() + 1);
        doc.replace(at, random.below(std::min<std::size_t>(256, doc.size() - at) + 1), piece);
        break;
      }
      case 4:
      case 5: replace_a_number(doc, random); break;
      case 6:  // insert a JSON token
        doc.insert(random.below(doc.size() + 1), json_tokens[random.below(std::size(json_tokens))]);
        break;
      case 7: {  // duplicate a region several times (many scopes, long lists)
        if (doc.empty()) break;
        const std::size_t at = random.below(doc.size());
        const std::string region = doc.substr(at, 1 + random.below(512));
        std::string copies;
        for (std::size_t i = 1 + random.below(64); i > 0; --i) copies += region;
        doc.insert(at, copies);
        break;
      }
      default: {  // deep nesting, or truncation
        if (random.below(2) == 0)
          doc.insert(random.below(doc.size() + 1), std::string(1 + random.below(200), random.below(2) ? '[' : '{'));
        else
          doc.resize(random.below(doc.size() + 1));
        break;
      }
    }
  }
}

struct invariant_broken : std::exception {
  explicit invariant_broken(std::string m) : message(std::move(m)) {}
  const char* what() const noexcept override { return message.c_str(); }
  std::string message;
};

std::vector<std::pair<std::string, std::string>> read_corpus() {
  std::vector<std::pair<std::string, std::string>> files;
  for (const auto& entry : std::filesystem::directory_iterator(KSCOPE_FUZZ_CORPUS_DIR)) {
    if (!entry.is_regular_file()) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    files.emplace_back(entry.path().filename().string(),
                       std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()));
  }
  std::sort(files.begin(), files.end());  // directory order differs between machines
  return files;
}

}  // namespace

TEST_CASE("mutation fuzz: every seed and thousands of fixed-seed mutations of each pass the entry point's checks") {
  const auto corpus = read_corpus();
  REQUIRE(corpus.size() >= 10);
  std::vector<std::string> seeds;
  for (const auto& file : corpus) seeds.push_back(file.second);
  std::size_t per_seed = 5000;
  if (const char* n = std::getenv("KSCOPE_MUTATIONS")) per_seed = static_cast<std::size_t>(std::strtoull(n, nullptr, 10));

  kscope_fuzz_violation_handler = [](const std::string& message) { throw invariant_broken(message); };
  const auto start = std::chrono::steady_clock::now();
  std::size_t runs = 0, reports = 0;
  for (std::size_t s = 0; s < corpus.size(); ++s) {
    fixed_random random(0x6B73636F70650000ull + s);  // "kscope" + the seed's index
    for (std::size_t i = 0; i <= per_seed; ++i) {
      std::string input = seeds[s];
      if (i > 0) mutate(input, seeds, random);  // run 0: the seed itself
      try {
        reports += kscope_fuzz_one_input(reinterpret_cast<const std::uint8_t*>(input.data()), input.size());
      } catch (const std::exception& e) {
        // Keep the input, so that it can be replayed and added to the corpus.
        const std::string saved = "mutation_failure_" + corpus[s].first;
        std::ofstream(saved, std::ios::binary) << input;
        kscope_fuzz_violation_handler = nullptr;
        FAIL("mutation ", i, " of ", corpus[s].first, " (saved to ", saved, "): ", std::string(e.what()));
      }
      ++runs;
    }
  }
  kscope_fuzz_violation_handler = nullptr;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  MESSAGE(runs, " inputs (", corpus.size(), " seeds x ", per_seed, " mutations) in ", seconds, " s; ", reports,
          " read as reports");
  // Some mutations must stay readable reports, or the run tests only the error paths.
  CHECK(reports > runs / 50);
}
