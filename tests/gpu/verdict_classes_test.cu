// Issue 40's acceptance test ("Done when", first item): with every source on (the activity
// collector, per-scope hardware counters, PM sampling, declared work), five scopes whose
// kernel class Nsight Compute names each get exactly one conclusion in the text report, the
// JSON (kscope.report/2), the HTML page and the markdown `kscope report --format markdown`
// prints (the JSON read back, its text in a fenced block); that conclusion has the class and
// names the unit Nsight Compute names for the kernel class (the table `expected_classes`
// below holds them, with where each was seen), and no format says "impossible" of any of them.
//
// Why: before issue 40 a scope could get four conclusions that disagreed (roofline,
// sampled metrics, counters, the verdict per scope), and a stencil whose declared bytes (what
// it reads logically, each neighbour counted) exceed its DRAM traffic was printed
// "impossible". The scopes, each run with scope::set_work and a dtype tag:
//   vc_dram     float4 copy of 512 MiB into 512 MiB (>> L2), 4 launches a call: DRAM
//   vc_l2       8 MiB (fits L2) read 512 times per launch with ld.global.cg (L2, not L1),
//               each pass shifted by 37 blocks so no SM re-reads what it read: L2
//   vc_tensor   2 cuBLAS fp16 GEMMs 8192^3 (cublasGemmEx, fp32 compute), dtype "fp16": tensor pipe
//   vc_latency  one warp chasing dependent loads through 256 MiB (128 KiB apart), 4 launches:
//               latency-bound, no unit
//   vc_stencil  3-D 7-point stencil on 512 x 512 x 256 floats; declared bytes count every
//               neighbour (32 B a point, ~4x its DRAM traffic: the z neighbours and the
//               block edges' y neighbours come from L2, the rest from L1): memory-bound on a
//               cache level (L2 expected, L1 accepted: ncu measured only a 2-D stencil), never
//               impossible: the report reads "declared bytes exceed DRAM traffic: reused
//               through cache" where the declared rate is above DRAM's roof
//
// How: one process (the features are process-wide; one configuration, so no child), the
// collector on throughout. Phase A: per-scope counters (every call of a scope profiled,
// session::enable_counters with first_calls 64, every 0) until each scope's one-pass metric
// groups have all been measured (the SASS groups excepted: CUPTI counts them 0 while the
// collector traces), one scope after the other; then the counters are switched off. Phase
// B: PM sampling (session::enable_metric_sampling, its defaults) over 2 s of rounds of the
// five scopes; these calls are the timed ones the roofline placements rest on. The report
// then holds all four sources for each scope. The two phases do not overlap because CUPTI's
// range profiler and PM sampling share the counters: sampler.hpp says a counter pass may
// be refused as busy while the sampler runs, and the issue asks for the report's evidence
// from both, not for both at the same instant.
//
// A feature that refuses to start (or stops) where tests/gpu/expectations.hpp expects it
// (sm_90, CUPTI 13) fails the case with kscope's message; elsewhere the case is recorded
// as not run (the GPU main exits 77); without a GPU the main exits 77 with the reason.
//
// Time: NOT YET RUN ON A GPU (written without one). Estimated 40-60 s on an H100: phase A
// is one profiled call per one-pass group per scope at ~0.4 s each (CUPTI set up afresh,
// bench/RESULTS.md: 340-521 ms), about 20 groups x 5 scopes; phase B 2 s; set-up a few s.
// The test prints "VCLASS" lines (phase times, groups, each scope's verdict and sources)
// and the whole text report, for bench/RESULTS.md.
#include <kscope/kscope.hpp>
#include <kscope/device/detail/cublas_loader.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "expectations.hpp"

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace {

#define VC_CUDA(call) REQUIRE_MESSAGE((call) == cudaSuccess, #call ": " << cudaGetErrorString(cudaGetLastError()))

// ---- the kernels ---------------------------------------------------------------------------

__global__ void vc_fill_floats(float* x, std::size_t n, float v) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    x[i] = v + static_cast<float>(i % 7) * 0.125f;
}

__global__ void vc_fill_halves(__half* x, std::size_t n, float v) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    x[i] = __float2half(v * static_cast<float>(static_cast<int>(i % 5) - 2));
}

// next[i] = (i + stride) mod n: consecutive links far apart, so each load waits for memory.
__global__ void vc_fill_chain(unsigned* next, unsigned n, unsigned stride) {
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    next[i] = static_cast<unsigned>((static_cast<unsigned long long>(i) + stride) % n);
}

// DRAM: a streaming float4 copy (bench/verdict_vs_ncu.cu's "copy").
__global__ void vc_copy(const float4* __restrict__ src, float4* __restrict__ dst, std::size_t n4) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n4;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    dst[i] = src[i];
}

// L2: each thread reads 4 independent float4 per pass with ld.global.cg (cached in L2 only),
// the grid covering the buffer (n4 a power of two, `mask` = n4 - 1) once per pass; pass p is
// shifted by 37 blocks, so an SM never reads again what it read in the pass before.
constexpr int l2_loads_per_thread = 4;

__global__ void vc_l2_read(const float4* __restrict__ buffer, std::size_t mask, int passes, float* __restrict__ out) {
  const std::size_t threads = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const std::size_t tid = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  float acc = 0.0f;
  for (int p = 0; p < passes; ++p) {
    const std::size_t base = tid + static_cast<std::size_t>(p) * 37u * blockDim.x;
    float4 v[l2_loads_per_thread];
#pragma unroll
    for (int k = 0; k < l2_loads_per_thread; ++k) v[k] = __ldcg(&buffer[(base + k * threads) & mask]);
#pragma unroll
    for (int k = 0; k < l2_loads_per_thread; ++k) acc += v[k].x + v[k].y + v[k].z + v[k].w;
  }
  if (acc == 12345.0f) out[0] = acc;  // keeps the loads; never true for the zeroed buffer
}

// Latency: one warp, each thread following its own chain of dependent loads.
__global__ void vc_chase(const unsigned* __restrict__ next, int steps, unsigned* __restrict__ out) {
  unsigned i = threadIdx.x * 4099u;
  for (int s = 0; s < steps; ++s) i = next[i];
  out[threadIdx.x] = i;
}

// A cached stencil: 3-D 7-point, one point per thread, 32 x 8 blocks walking the grid plane
// by plane (blockIdx.z slowest), so the planes z - 1 and z + 1 are in L2 when read; the
// border is copied.
__global__ void vc_stencil7(const float* __restrict__ in, float* __restrict__ out, int nx, int ny, int nz) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  const int z = blockIdx.z;
  if (x >= nx || y >= ny || z >= nz) return;
  const std::size_t plane = static_cast<std::size_t>(nx) * ny;
  const std::size_t i = static_cast<std::size_t>(z) * plane + static_cast<std::size_t>(y) * nx + x;
  if (x == 0 || y == 0 || z == 0 || x == nx - 1 || y == ny - 1 || z == nz - 1) {
    out[i] = in[i];
    return;
  }
  out[i] = 0.4f * in[i] + 0.1f * (in[i - 1] + in[i + 1] + in[i - nx] + in[i + nx] + in[i - plane] + in[i + plane]);
}

// ---- what Nsight Compute names, and what kscope must say ------------------------------------

// One kernel class: the scope, the class Nsight Compute gives its kernel, and the units the
// verdict may name (kscope's finding.where spelling: "DRAM", "L2", "L1", "tensor pipe"; ""
// for none), Nsight Compute's own first.
struct kernel_class {
  std::string scope;
  kscope::bottleneck kind;
  std::vector<std::string> units;
  std::string ncu;  // what Nsight Compute says of the class, and where that was seen
};

const std::vector<kernel_class>& expected_classes() {
  static const std::vector<kernel_class> table = {
      {"vc_dram", kscope::bottleneck::memory, {"DRAM"},
       "memory-bound, DRAM the top unit: bench/verdict_vs_ncu 'copy' on an H100, ncu DRAM 84.5 %, L2 77.8 % "
       "(bench/RESULTS.md, issue 28)"},
      {"vc_l2", kscope::bottleneck::memory, {"L2"},
       "memory-bound, L2 the top unit: an L2-resident read moves no DRAM bytes after its first pass; ncu named L2 "
       "for the L2-bound transpose (L2 83.3 %, DRAM 14.3 %, bench/RESULTS.md)"},
      {"vc_tensor", kscope::bottleneck::compute, {"tensor pipe"},
       "compute-bound on the tensor pipe: cuBLAS HGEMM 8192^3, ncu SM 93.8 %, tensor pipe 93.8 % (its L1 98.2 % is "
       "the MMA operand traffic: kscope's tensor-roof rule, 'yes*' in bench/RESULTS.md)"},
      {"vc_latency", kscope::bottleneck::latency, {""},
       "latency-bound, no limiting unit: one warp chasing pointers, ncu SM 0.0 %, memory 0.1 % (bench/verdict_vs_ncu "
       "'tiny', long scoreboard 99 %)"},
      {"vc_stencil", kscope::bottleneck::memory, {"L2", "L1"},
       "memory-bound on a cache level: ncu named L2 (70.3 %, DRAM 58.0 %) for bench/verdict_vs_ncu's 2-D 5-point "
       "stencil; this 3-D one reads more neighbours from L2. L1 is accepted too (not measured by ncu for this "
       "kernel); DRAM or 'impossible' is not"},
  };
  return table;
}

// ---- what each printer printed ---------------------------------------------------------------

const char* const class_words[] = {"memory-bound", "compute-bound", "latency-bound", "launch/CPU-bound",
                                   "undetermined"};

// The distinct class words in `text`.
std::vector<std::string> class_words_in(const std::string& text) {
  std::vector<std::string> found;
  for (const char* word : class_words)
    if (text.find(word) != std::string::npos) found.emplace_back(word);
  return found;
}

std::string joined(const std::vector<std::string>& items, const char* separator = ", ") {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : separator) + s;
  return out;
}

// The lines of `text` that name a class (at most 12), for a failure message.
std::string lines_naming_a_class(const std::string& text) {
  std::string out;
  std::size_t shown = 0;
  for (std::size_t at = 0; at < text.size() && shown < 12;) {
    std::size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(at, end - at);
    if (!class_words_in(line).empty()) {
      out += "  | " + line.substr(0, 400) + "\n";
      ++shown;
    }
    at = end + 1;
  }
  return out;
}

// Wrapped lines joined again (tests/verdict_test.cpp's rule): a line break followed by the
// indent of a continuation (two spaces more than its first line, which may start an item
// with "- ") becomes one space.
std::string unwrapped(const std::string& text) {
  std::string out;
  std::size_t indent = 0;
  for (std::size_t at = 0; at < text.size();) {
    std::size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(at, end - at);
    const std::size_t spaces = line.find_first_not_of(' ');
    const bool item = spaces != std::string::npos && line.compare(spaces, 2, "- ") == 0;
    const bool continuation = !out.empty() && !item && spaces != std::string::npos && spaces == indent + 2;
    if (continuation) {
      out += " " + line.substr(spaces);
    } else {
      if (!out.empty()) out += "\n";
      out += line;
      indent = spaces == std::string::npos ? 0 : spaces;
    }
    at = end + 1;
  }
  return out;
}

// One scope's conclusion as a printer printed it: the headline ("path: class (unit), from
// ..."), the lines under it, and (HTML) the span's data-kind.
struct verdict_block {
  std::string headline;
  std::vector<std::string> items;
  std::string kind_attribute;
};

// A printer's verdict section, split by scope, and everything of the document outside the
// five scopes' blocks.
struct verdict_section {
  bool found = false;
  std::string outside;
  std::map<std::string, std::vector<verdict_block>> blocks;  // by scope path
};

bool starts_with(const std::string& text, const std::string& prefix) { return text.rfind(prefix, 0) == 0; }

std::string lowercase(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The scope (of `paths`) whose headline `line` is, or "".
std::string headline_scope(const std::string& line, const std::vector<std::string>& paths) {
  for (const std::string& p : paths)
    if (starts_with(line, p + ": ")) return p;
  return {};
}

// The text report (and the markdown's fenced text): the "verdict per scope" section, one
// headline per scope at column 0, its evidence as "  - " items under it.
verdict_section text_section(const std::string& text, const std::vector<std::string>& paths) {
  verdict_section out;
  const std::string flat = unwrapped(text);
  const std::size_t at = flat.find("\nverdict per scope");
  if (at == std::string::npos) {
    out.outside = flat;
    return out;
  }
  out.found = true;
  out.outside = flat.substr(0, at + 1);
  verdict_block* current = nullptr;
  bool header_done = false;
  for (std::size_t from = at + 1; from < flat.size();) {
    std::size_t end = flat.find('\n', from);
    if (end == std::string::npos) end = flat.size();
    const std::string line = flat.substr(from, end - from);
    from = end + 1;
    if (!header_done) {  // the section's title and its rule
      out.outside += line + "\n";
      header_done = starts_with(line, "---");
      continue;
    }
    if (current != nullptr && starts_with(line, "  - ")) {
      current->items.push_back(line.substr(4));
      continue;
    }
    const std::string scope = headline_scope(line, paths);
    if (scope.empty()) {
      out.outside += line + "\n";  // the CUPTI line, warnings, anything else
      current = nullptr;
      continue;
    }
    std::vector<verdict_block>& list = out.blocks[scope];
    list.push_back({line, {}, {}});
    current = &list.back();
  }
  return out;
}

std::string html_unescaped(const std::string& s) {
  static const std::pair<const char*, const char*> entities[] = {
      {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&#39;", "'"}, {"&amp;", "&"}};
  std::string out;
  for (std::size_t i = 0; i < s.size();) {
    bool replaced = false;
    for (const auto& [entity, text] : entities) {
      if (s.compare(i, std::char_traits<char>::length(entity), entity) == 0) {
        out += text;
        i += std::char_traits<char>::length(entity);
        replaced = true;
        break;
      }
    }
    if (!replaced) out += s[i++];
  }
  return out;
}

// The text between the tags of an HTML fragment, one piece each, trimmed, empty ones left out.
std::vector<std::string> html_texts(const std::string& html) {
  std::vector<std::string> pieces;
  std::string piece;
  const auto flush = [&] {
    const std::size_t a = piece.find_first_not_of(" \n\t");
    const std::size_t b = piece.find_last_not_of(" \n\t");
    if (a != std::string::npos) pieces.push_back(html_unescaped(piece.substr(a, b - a + 1)));
    piece.clear();
  };
  for (std::size_t i = 0; i < html.size(); ++i) {
    if (html[i] == '<') {
      flush();
      const std::size_t close = html.find('>', i);
      if (close == std::string::npos) break;
      i = close;
    } else {
      piece += html[i];
    }
  }
  flush();
  return pieces;
}

// The HTML page: the "verdicts" section, one <li><span class="verdict" data-kind="..."> per
// scope, its evidence as a list under it.
verdict_section html_section(const std::string& html, const std::vector<std::string>& paths) {
  verdict_section out;
  const std::size_t start = html.find("<section id=\"verdicts\"");
  if (start == std::string::npos) {
    out.outside = html;
    return out;
  }
  std::size_t end = html.find("</section>", start);
  if (end == std::string::npos) end = html.size();
  out.found = true;
  out.outside = html.substr(0, start) + html.substr(end);
  const std::string section = html.substr(start, end - start);
  const std::string marker = "<li><span class=\"verdict\" data-kind=\"";
  std::size_t at = section.find(marker);
  out.outside += section.substr(0, at == std::string::npos ? section.size() : at);  // heading and legend
  while (at != std::string::npos) {
    const std::size_t next = section.find(marker, at + marker.size());
    const std::string item =
        section.substr(at + marker.size(), (next == std::string::npos ? section.size() : next) - at - marker.size());
    at = next;
    verdict_block b;
    b.kind_attribute = html_unescaped(item.substr(0, item.find('"')));
    const std::size_t tag_end = item.find('>');
    const std::vector<std::string> pieces =
        html_texts(tag_end == std::string::npos ? std::string() : item.substr(tag_end + 1));
    const std::string scope = pieces.empty() ? std::string() : headline_scope(pieces.front(), paths);
    if (scope.empty()) {
      out.outside += "<li data-kind=\"" + b.kind_attribute + "\">" + joined(pieces, "\n") + "\n";
      continue;
    }
    b.headline = pieces.front();
    b.items.assign(pieces.begin() + 1, pieces.end());
    out.blocks[scope].push_back(std::move(b));
  }
  return out;
}

// What a printer must show for one scope.
struct printed_verdict {
  std::string path;
  std::string class_word;
  std::string unit;  // the verdict's finding.where ("" for none)
};

// The items under a verdict that say what did not decide (and may name the class that source
// would have concluded, "hardware counters did not decide: undetermined: ..."): not a
// conclusion.
constexpr const char* not_decided = "not decided or not collected: ";

// Exactly one conclusion per scope: one headline with the class and unit, every class word
// of it and of the lines under it the verdict's (what did not decide apart), and no class
// named anywhere else in the document.
void check_one_conclusion_each(const std::string& format, const verdict_section& sec,
                               const std::vector<printed_verdict>& want) {
  CAPTURE(format);
  CHECK_MESSAGE(sec.found, format << ": no verdict section");
  if (!sec.found) return;
  CHECK_MESSAGE(class_words_in(sec.outside).empty(),
                format << ": a class named outside the scopes' verdicts (" << joined(class_words_in(sec.outside))
                       << "):\n"
                       << lines_naming_a_class(sec.outside));
  for (const printed_verdict& v : want) {
    CAPTURE(v.path);
    const auto it = sec.blocks.find(v.path);
    const std::size_t n = it == sec.blocks.end() ? 0 : it->second.size();
    CHECK_MESSAGE(n == 1, format << ": " << v.path << " has " << n << " conclusions, not one");
    if (n != 1) continue;
    const verdict_block& b = it->second.front();
    const std::string head = v.path + ": " + v.class_word + (v.unit.empty() ? ", from " : " (" + v.unit + "), from ");
    CHECK_MESSAGE(starts_with(b.headline, head), format << ": headline \"" << b.headline << "\", want it to start \""
                                                        << head << "\"");
    if (format == "HTML") CHECK(b.kind_attribute == v.class_word);
    std::vector<std::string> lines{b.headline};
    for (const std::string& item : b.items)
      if (!starts_with(item, not_decided)) lines.push_back(item);
    for (const std::string& line : lines)
      for (const std::string& word : class_words_in(line))
        CHECK_MESSAGE(word == v.class_word, format << ": " << v.path << " (" << v.class_word << ") also reads \""
                                                   << word << "\" in: " << line);
  }
}

// "impossible" (a placement above every roof) and "cannot be true" (the verdict's note of
// one) nowhere in a printed document.
const std::string impossible_phrases[] = {"impossible", "cannot be true"};

void check_nothing_impossible(const std::string& format, const std::string& document) {
  const std::string lower = lowercase(document);
  for (const std::string& phrase : impossible_phrases) {
    const std::size_t at = lower.find(phrase);
    CHECK_MESSAGE(at == std::string::npos, format << " says \"" << phrase << "\": ..."
                                                  << document.substr(at < 200 ? 0 : at - 200, 400) << "...");
  }
}

// Every string of a JSON document that names a class (tests/verdict_test.cpp), with its key path.
void json_class_strings(const nlohmann::json& j, const std::string& path, std::vector<std::string>& out) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) json_class_strings(it.value(), path + "." + it.key(), out);
  } else if (j.is_array()) {
    for (const auto& item : j) json_class_strings(item, path + "[]", out);
  } else if (j.is_string()) {
    if (!class_words_in(j.get<std::string>()).empty()) out.push_back(path + ": " + j.get<std::string>().substr(0, 200));
  }
}

// Every string value of a JSON document that says `phrase` (keys such as "impossible" are not values).
void json_strings_saying(const nlohmann::json& j, const std::string& path, const std::string& phrase,
                         std::vector<std::string>& out) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) json_strings_saying(it.value(), path + "." + it.key(), phrase, out);
  } else if (j.is_array()) {
    for (const auto& item : j) json_strings_saying(item, path + "[]", phrase, out);
  } else if (j.is_string()) {
    const std::string& value = j.get_ref<const std::string&>();
    if (lowercase(value).find(phrase) != std::string::npos) out.push_back(path + ": " + value.substr(0, 300));
  }
}

// The JSON (kscope.report/2): a class only in the scopes' verdict objects (their class, text
// and what did not decide or was not collected), each scope's verdict its class and unit, and no
// placement impossible.
void check_json(const std::string& json, const std::vector<printed_verdict>& want) {
  nlohmann::json doc = nlohmann::json::parse(json, nullptr, false);
  CHECK_MESSAGE(!doc.is_discarded(), "JSON: the report does not parse");
  if (doc.is_discarded()) return;
  CHECK(doc["schema"] == "kscope.report/2");
  std::vector<std::string> named;
  json_class_strings(doc, "", named);
  for (const std::string& at : named) {
    const bool in_a_verdict =
        starts_with(at, ".scopes[].verdict.class: ") || starts_with(at, ".scopes[].verdict.text: ");
    // What did not decide or was not collected may name the class it would have needed or
    // read ("hardware counters did not decide: undetermined: ..."): the printers' "not decided
    // or not collected" lines, not a conclusion.
    const bool not_deciding = starts_with(at, ".scopes[].verdict.missing[]: ");
    CHECK_MESSAGE((in_a_verdict || not_deciding), "JSON: a class named outside the verdicts: " << at);
  }
  for (const std::string& phrase : impossible_phrases) {
    std::vector<std::string> saying;
    json_strings_saying(doc, "", phrase, saying);
    CHECK_MESSAGE(saying.empty(), "JSON says \"" << phrase << "\": " << joined(saying, "\n"));
  }
  for (const printed_verdict& v : want) {
    CAPTURE(v.path);
    nlohmann::json* scope = nullptr;
    std::size_t found = 0;
    for (nlohmann::json& s : doc["scopes"])
      if (s["path"] == v.path) {
        scope = &s;
        ++found;
      }
    CHECK_MESSAGE(found == 1, "JSON: " << found << " scopes with the path");
    if (scope == nullptr) continue;
    nlohmann::json& j = (*scope)["verdict"];
    CHECK_MESSAGE(j.is_object(), "JSON: no verdict object");
    if (!j.is_object()) continue;
    CHECK(j["class"] == v.class_word);
    CHECK(j["unit"] == v.unit);
    CHECK((j["source"] == "hardware counters" || j["source"] == "sampled metrics" || j["source"] == "declared work"));
    const std::string verdict_text = j["text"].is_string() ? j["text"].get<std::string>() : std::string();
    for (const std::string& word : class_words_in(verdict_text))
      CHECK_MESSAGE(word == v.class_word, "JSON verdict.text also reads \"" << word << "\": " << verdict_text);
    nlohmann::json& roofline = (*scope)["roofline"];
    if (roofline.is_object()) CHECK(roofline["impossible"] == false);
  }
}

// The markdown `kscope report --format markdown` prints (tools/kscope_cli.cpp, run_report):
// the JSON read back with parse_report, its text report in a fenced block.
void check_markdown(const std::string& json, const std::vector<std::string>& paths,
                    const std::vector<printed_verdict>& want) {
  std::string error;
  const std::optional<kscope::session_report> back = kscope::parse_report(json, &error);
  CHECK_MESSAGE(back.has_value(), "markdown: the JSON does not read back: " << error);
  if (!back) return;
  const std::string body = back->text();
  const std::string markdown = "```text\n" + body + "```\n";
  check_one_conclusion_each("markdown", text_section(body, paths), want);
  check_nothing_impossible("markdown", markdown);
  for (const printed_verdict& v : want) {
    CAPTURE(v.path);
    const kscope::scope_report* s = back->find(v.path);
    CHECK_MESSAGE((s != nullptr && s->verdict.has_value()), "markdown: no verdict read back");
    if (s == nullptr || !s->verdict) continue;
    CHECK(kscope::to_string(s->verdict->verdict.kind) == v.class_word);
    CHECK(s->verdict->verdict.where == v.unit);
  }
}

// ---- the program -----------------------------------------------------------------------------

// Device memory freed at the end of the case, whichever way it ends.
class device_buffer {
 public:
  explicit device_buffer(std::size_t bytes) : bytes_(bytes) {
    if (cudaMalloc(&p_, bytes) != cudaSuccess) p_ = nullptr;
  }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  ~device_buffer() {
    if (p_ != nullptr) (void)cudaFree(p_);
  }
  template <class T>
  [[nodiscard]] T* as() const noexcept {
    return static_cast<T*>(p_);
  }
  [[nodiscard]] bool ok() const noexcept { return p_ != nullptr; }
  [[nodiscard]] std::size_t bytes() const noexcept { return bytes_; }

 private:
  void* p_ = nullptr;
  std::size_t bytes_ = 0;
};

// One scope of the program: its kernels for one call, on the case's stream, and the work
// they do (declared on every call).
struct workload {
  const char* scope;
  const char* dtype;
  kscope::work per_call;
  std::function<void()> launch;
};

// One call: the scope opened on the stream, its work declared, its kernels launched and
// waited for. Returns the scope's node.
kscope::node_id run_call(const workload& w, cudaStream_t stream) {
  kscope::scope s{w.scope, stream};
  s.set_work(w.per_call);
  s.tag("dtype", w.dtype);
  const kscope::node_id node = kscope::detail::this_thread_state().current;
  w.launch();
  (void)cudaStreamSynchronize(stream);
  return node;
}

// Whether the scope's profiled calls have gone once round the one-pass groups (a call profiles
// the group of its rank among the scope's profiled calls; the groups with SASS instruction
// counters, which CUPTI counts as 0 while the activity collector traces, come last and are
// passed over for the first group, so one round measures every other group), or have
// already measured every metric but the SASS counters.
bool counters_rotation_done(kscope::node_id node) {
  const kscope::scope_counters_snapshot snap = kscope::scope_counter_sampler::global().snapshot();
  const kscope::scope_counter_totals* t = snap.find(node);
  if (t == nullptr || snap.metrics.empty()) return false;
  if (t->profiled_calls + t->failed_calls >= t->groups + t->partial_calls) return true;
  for (const std::string& m : snap.metrics) {
    if (kscope::detail::has_sass_instruction_metric({m})) continue;
    const auto a = t->aggregate.find(m);
    if (!a || a->calls == 0) return false;
  }
  return true;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Switches the features off however the case ends (they are process-wide).
struct features_off {
  features_off() = default;
  features_off(const features_off&) = delete;
  features_off& operator=(const features_off&) = delete;
  ~features_off() {
    try {
      kscope::session::global().disable_counters();
      kscope::session::global().disable_metric_sampling();
    } catch (...) {
    }
  }
};

constexpr int phase_a_calls_per_scope = 64;  // the most profiled calls a scope gets
constexpr double phase_b_seconds = 2.0;       // PM sampling over rounds of the five scopes
constexpr int phase_b_min_rounds = 20;
constexpr std::uint64_t min_samples_per_scope = 20;

}  // namespace

TEST_CASE("five kernel classes, every source on: one conclusion per scope in text, JSON, HTML and markdown, "
          "naming Nsight Compute's unit, none impossible") {
  KSCOPE_TEST_NEEDS(kscope_test::feature::activity);
  KSCOPE_TEST_NEEDS(kscope_test::feature::counters);
  KSCOPE_TEST_NEEDS(kscope_test::feature::pm_sampling);
  const kscope::detail::cublas_api& blas = kscope::detail::cublas();
  if (!blas.ok())
    KSCOPE_TEST_REFUSED(kscope_test::feature::cublas, "kscope::detail::cublas()", "not loaded", blas.error);
  namespace abi = kscope::detail::cublas_abi;
  const auto started = std::chrono::steady_clock::now();

  int device = 0, sms = 0;
  VC_CUDA(cudaGetDevice(&device));
  VC_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  cudaStream_t stream = nullptr;
  VC_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  struct stream_guard {
    cudaStream_t s;
    ~stream_guard() { (void)cudaStreamDestroy(s); }
  } stream_owner{stream};

  // vc_dram: 512 MiB copied into 512 MiB.
  const std::size_t copy_bytes = std::size_t{512} << 20;
  device_buffer copy_src(copy_bytes), copy_dst(copy_bytes);
  // vc_l2: 8 MiB, read `l2_passes` times per launch.
  const std::size_t l2_bytes = std::size_t{8} << 20;
  const std::size_t l2_n4 = l2_bytes / sizeof(float4);  // 2^19: a power of two
  constexpr int l2_passes = 512;
  device_buffer l2_buffer(l2_bytes), l2_out(sizeof(float));
  // vc_tensor: fp16 8192 x 8192 matrices.
  constexpr int gemm_n = 8192;
  const std::size_t gemm_elements = static_cast<std::size_t>(gemm_n) * gemm_n;
  device_buffer gemm_a(gemm_elements * sizeof(__half)), gemm_b(gemm_elements * sizeof(__half)),
      gemm_c(gemm_elements * sizeof(__half));
  // vc_latency: 256 MiB of links.
  constexpr unsigned chain_links = 64u << 20;
  constexpr int chase_steps = 2048;
  device_buffer chain(static_cast<std::size_t>(chain_links) * sizeof(unsigned)), chase_out(32 * sizeof(unsigned));
  // vc_stencil: 512 x 512 x 256 floats in, as many out.
  constexpr int snx = 512, sny = 512, snz = 256;
  const std::size_t stencil_points = static_cast<std::size_t>(snx) * sny * snz;
  device_buffer stencil_in(stencil_points * sizeof(float)), stencil_out(stencil_points * sizeof(float));
  for (const device_buffer* b : {&copy_src, &copy_dst, &l2_buffer, &l2_out, &gemm_a, &gemm_b, &gemm_c, &chain,
                                 &chase_out, &stencil_in, &stencil_out})
    REQUIRE_MESSAGE(b->ok(), "cudaMalloc of " << b->bytes() << " bytes failed");

  const int fill_blocks = sms * 8;
  vc_fill_floats<<<fill_blocks, 256, 0, stream>>>(copy_src.as<float>(), copy_bytes / sizeof(float), 1.0f);
  VC_CUDA(cudaMemsetAsync(l2_buffer.as<void>(), 0, l2_bytes, stream));
  vc_fill_halves<<<fill_blocks, 256, 0, stream>>>(gemm_a.as<__half>(), gemm_elements, 0.25f);
  vc_fill_halves<<<fill_blocks, 256, 0, stream>>>(gemm_b.as<__half>(), gemm_elements, 0.5f);
  vc_fill_chain<<<fill_blocks, 256, 0, stream>>>(chain.as<unsigned>(), chain_links, 32771u);  // 128 KiB apart
  vc_fill_floats<<<fill_blocks, 256, 0, stream>>>(stencil_in.as<float>(), stencil_points, 0.5f);
  VC_CUDA(cudaStreamSynchronize(stream));

  void* handle = nullptr;
  REQUIRE(blas.create(&handle) == abi::status_success);
  struct blas_guard {
    const kscope::detail::cublas_api& api;
    void* h;
    ~blas_guard() { (void)api.destroy(h); }
  } blas_owner{blas, handle};
  REQUIRE(blas.set_stream(handle, stream) == abi::status_success);
  int gemm_status = abi::status_success;

  const double gemm_flops = 2.0 * gemm_n * gemm_n * static_cast<double>(gemm_n);
  const double copy_launch_bytes = 2.0 * static_cast<double>(copy_bytes);
  const double l2_launch_bytes = static_cast<double>(l2_bytes) * l2_passes;
  const std::vector<workload> workloads = {
      {"vc_dram", "fp32", {0, 4 * copy_launch_bytes},
       [&] {
         for (int i = 0; i < 4; ++i)
           vc_copy<<<sms * 8, 256, 0, stream>>>(copy_src.as<const float4>(), copy_dst.as<float4>(),
                                                copy_bytes / sizeof(float4));
       }},
      {"vc_l2", "fp32", {4 * (l2_launch_bytes / sizeof(float)), 4 * l2_launch_bytes},  // one add per float read
       [&] {
         const unsigned blocks = static_cast<unsigned>(l2_n4 / l2_loads_per_thread / 256);
         for (int i = 0; i < 4; ++i)
           vc_l2_read<<<blocks, 256, 0, stream>>>(l2_buffer.as<const float4>(), l2_n4 - 1, l2_passes,
                                                  l2_out.as<float>());
       }},
      {"vc_tensor", "fp16", {2 * gemm_flops, 2 * 3.0 * static_cast<double>(gemm_elements) * sizeof(__half)},
       [&] {
         const float alpha = 1.0f, beta = 0.0f;
         for (int i = 0; i < 2; ++i) {
           const int st = blas.gemm_ex(handle, abi::op_n, abi::op_n, gemm_n, gemm_n, gemm_n, &alpha, gemm_a.as<void>(),
                                       abi::r_16f, gemm_n, gemm_b.as<void>(), abi::r_16f, gemm_n, &beta,
                                       gemm_c.as<void>(), abi::r_16f, gemm_n, abi::compute_32f, abi::gemm_default);
           if (st != abi::status_success) gemm_status = st;
         }
       }},
      {"vc_latency", "fp32", {0, 4.0 * 32 * chase_steps * sizeof(unsigned)},  // the loads it makes, 4 bytes each
       [&] {
         for (int i = 0; i < 4; ++i)
           vc_chase<<<1, 32, 0, stream>>>(chain.as<const unsigned>(), chase_steps, chase_out.as<unsigned>());
       }},
      // Per point: 7 reads and 1 write of 4 bytes, every neighbour counted; 6 adds, 1 mul, 1 FMA.
      {"vc_stencil", "fp32",
       {4 * 8.0 * static_cast<double>(stencil_points), 4 * 32.0 * static_cast<double>(stencil_points)},
       [&] {
         const dim3 block(32, 8), grid(snx / 32, sny / 8, snz);
         for (int i = 0; i < 4; ++i)
           vc_stencil7<<<grid, block, 0, stream>>>(stencil_in.as<const float>(), stencil_out.as<float>(), snx, sny,
                                                   snz);
       }},
  };
  REQUIRE(workloads.size() == expected_classes().size());

  // Every kernel once outside any scope: modules loaded, cuBLAS's kernel chosen.
  for (const workload& w : workloads) w.launch();
  VC_CUDA(cudaStreamSynchronize(stream));
  VC_CUDA(cudaGetLastError());
  REQUIRE(gemm_status == abi::status_success);

  auto& session = kscope::session::global();
  const features_off switch_off_at_the_end;
  if (!session.enable_cupti())
    KSCOPE_TEST_REFUSED(kscope_test::feature::activity, "session::enable_cupti", "not started",
                        kscope::cupti_collector::global().status().message);
  session.reset();
  kscope::scope_counter_sampler::global().reset();

  // ---- phase A: per-scope counters, every call profiled until the groups went round -------
  kscope::scope_counter_options counter_options;
  counter_options.first_calls = phase_a_calls_per_scope;
  counter_options.every = 0;
  counter_options.max_calls_per_scope = phase_a_calls_per_scope;
  if (!session.enable_counters(counter_options))
    KSCOPE_TEST_REFUSED(kscope_test::feature::counters, "session::enable_counters", "not started",
                        kscope::scope_counter_sampler::global().snapshot().status);
  const auto phase_a = std::chrono::steady_clock::now();
  for (const workload& w : workloads) {
    const auto t0 = std::chrono::steady_clock::now();
    int calls = 0;
    kscope::node_id node = 0;
    while (calls < phase_a_calls_per_scope) {
      node = run_call(w, stream);
      ++calls;
      if (!kscope::scope_counter_sampler::global().snapshot().enabled) break;
      if (counters_rotation_done(node)) break;
    }
    const kscope::scope_counters_snapshot snap = kscope::scope_counter_sampler::global().snapshot();
    const kscope::scope_counter_totals* t = snap.find(node);
    std::printf("VCLASS phase A %s: %d calls in %.1f s; %llu profiled, %llu failed, %llu partial, %zu groups\n",
                w.scope, calls, seconds_since(t0), t ? static_cast<unsigned long long>(t->profiled_calls) : 0ull,
                t ? static_cast<unsigned long long>(t->failed_calls) : 0ull,
                t ? static_cast<unsigned long long>(t->partial_calls) : 0ull, t ? t->groups : std::size_t{0});
    std::fflush(stdout);
    if (!snap.enabled) break;
  }
  const kscope::scope_counters_snapshot after_a = kscope::scope_counter_sampler::global().snapshot();
  for (const std::string& note : after_a.notes) std::printf("VCLASS counters note: %s\n", note.c_str());
  if (!after_a.enabled)  // a permanent refusal switched the hook off (no permission, unknown metric, ...)
    KSCOPE_TEST_REFUSED(kscope_test::feature::counters, "per-scope counters (a profiled call)", "stopped",
                        after_a.status);
  session.disable_counters();
  const double phase_a_s = seconds_since(phase_a);

  // ---- phase B: PM sampling over rounds of the five scopes (the timed calls) --------------
  if (!session.enable_metric_sampling()) {
    const kscope::session_report r = session.report();
    KSCOPE_TEST_REFUSED(kscope_test::feature::pm_sampling, "session::enable_metric_sampling", "not started",
                        r.sampled_metrics ? r.sampled_metrics->status : std::string("(no sampled-metrics section)"));
  }
  const auto phase_b = std::chrono::steady_clock::now();
  int rounds = 0;
  while (rounds < phase_b_min_rounds || seconds_since(phase_b) < phase_b_seconds) {
    for (const workload& w : workloads) (void)run_call(w, stream);
    ++rounds;
  }
  session.disable_metric_sampling();
  const double phase_b_s = seconds_since(phase_b);
  VC_CUDA(cudaGetLastError());
  CHECK(gemm_status == abi::status_success);

  const kscope::session_report r = session.report();
  const std::string text = r.text();
  std::printf("VCLASS report:\n%s\n", text.c_str());
  std::printf("VCLASS phase A %.1f s (counters, %llu passes), phase B %.1f s (%d rounds, sampling), %.1f s in all\n",
              phase_a_s, static_cast<unsigned long long>(after_a.passes), phase_b_s, rounds, seconds_since(started));
  if (!r.sampled_metrics || !r.sampled_metrics->running)
    KSCOPE_TEST_REFUSED(kscope_test::feature::pm_sampling, "session::enable_metric_sampling", "did not run",
                        r.sampled_metrics ? r.sampled_metrics->status : std::string("(no sampled-metrics section)"));
  CHECK(r.counters.has_value());
  CHECK(r.sampled_metrics->attributed);

  // ---- every source on, and the one verdict of each scope ---------------------------------
  std::vector<printed_verdict> want;
  std::vector<std::string> paths;
  for (const kernel_class& e : expected_classes()) {
    CAPTURE(e.scope);
    INFO("Nsight Compute: " << e.ncu);
    const kscope::scope_report* s = r.find(e.scope);
    CHECK_MESSAGE(s != nullptr, e.scope << " is not in the report");
    if (s == nullptr) continue;
    const kscope::node_sampled_metrics* sampled =
        r.sampled_metrics->data.find(static_cast<kscope::sampled_node>(s->id));
    // The sources: counters, sampled metrics, the collector's kernels, declared work.
    CHECK_MESSAGE((s->counters.has_value() && s->counters->profiled_calls > 0), "no profiled call counted");
    CHECK_MESSAGE((sampled != nullptr && sampled->samples >= min_samples_per_scope),
                  (sampled ? sampled->samples : 0) << " samples");
    CHECK_MESSAGE((s->gpu_activity.has_value() && s->gpu_activity->kernel_count > 0), "no kernel attributed");
    CHECK(s->work_calls > 0);
    CHECK_MESSAGE(s->verdict.has_value(), e.scope << " has no verdict");
    if (!s->verdict) continue;
    const kscope::scope_verdict& v = *s->verdict;
    std::printf("VCLASS %s: %s (%s) from %s; want %s (%s)\n", e.scope.c_str(), kscope::to_string(v.verdict.kind),
                v.verdict.where.c_str(), v.basis.c_str(), kscope::to_string(e.kind), joined(e.units, " or ").c_str());
    for (const kscope::verdict_evidence& ev : v.evidence)
      std::printf("VCLASS %s   %s: %s at %.1f%% (%llu %s)%s\n", e.scope.c_str(), ev.source.c_str(), ev.metric.c_str(),
                  ev.percent_of_peak, static_cast<unsigned long long>(ev.count), ev.count_of.c_str(),
                  ev.agrees ? "" : ", outweighed");
    for (const std::string& m : v.missing)
      std::printf("VCLASS %s   not decided or not collected: %s\n", e.scope.c_str(), m.c_str());
    if (!s->roofline_roof_unknown.empty())
      std::printf("VCLASS %s   roofline: %s\n", e.scope.c_str(), s->roofline_roof_unknown.c_str());
    INFO("verdict: " << kscope::detail::verdict_headline(v) << " -- " << v.verdict.text);
    CHECK(v.verdict.kind == e.kind);
    CHECK_MESSAGE(std::find(e.units.begin(), e.units.end(), v.verdict.where) != e.units.end(),
                  "unit \"" << v.verdict.where << "\", want " << joined(e.units, " or "));
    // A unit is a measurement: memory and compute verdicts rest on counters or sampled metrics.
    if (e.kind != kscope::bottleneck::latency)
      CHECK_MESSAGE((v.basis == "hardware counters" || v.basis == "sampled metrics"), "decided by " << v.basis);
    CHECK_FALSE(kscope::detail::placement_impossible(*s));
    // The premise of the cached kernels: declared bytes above what DRAM moved.
    if (e.scope == "vc_stencil" || e.scope == "vc_l2") {
      const bool compared = s->counters.has_value() && s->counters->declared_vs_measured.has_value();
      CHECK_MESSAGE(compared, "no declared-vs-measured figures from the counters");
      if (compared) {
        const kscope::work_check& w = *s->counters->declared_vs_measured;
        std::printf("VCLASS %s   declared %.4g B per call, DRAM moved %.4g B\n", e.scope.c_str(), w.declared_bytes,
                    w.measured_dram_bytes);
        CHECK_MESSAGE(w.declared_bytes > 1.5 * w.measured_dram_bytes, "precondition: the reads are served by cache");
      }
    }
    want.push_back({e.scope, kscope::to_string(v.verdict.kind), v.verdict.where});
    paths.emplace_back(e.scope);
  }
  std::fflush(stdout);

  // The four printed forms; each check goes on to the next form whatever it found.
  const std::string json = r.json();
  check_one_conclusion_each("text", text_section(text, paths), want);
  check_nothing_impossible("text", text);
  check_json(json, want);
  const std::string html = r.html();
  check_one_conclusion_each("HTML", html_section(html, paths), want);
  check_nothing_impossible("HTML", html);
  check_markdown(json, paths, want);
}
