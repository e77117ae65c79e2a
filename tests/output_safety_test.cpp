// Tests for what kscope writes when the input is hostile or the disk is full (issue 13,
// parts 5 and 6):
//   - JSON (report, Chrome trace, bench) stays valid whatever bytes a name holds: invalid
//     UTF-8 becomes U+FFFD, every control character is escaped, a NUL never truncates;
//     nlohmann-json, a strict reader, parses it back;
//   - the text and markdown printers (report, compare, bench) put no control character,
//     ESC sequence or invalid UTF-8 on the terminal, and a NUL does not cut them short;
//     CSV fields are quoted by RFC 4180;
//   - KSCOPE=OFF / False / no / " 0" turn recording off, an unknown value is reported;
//   - a failed write (no directory, /dev/full, the file-size limit half way) leaves the
//     previous file intact, no temporary file behind, and names the path and the reason.
#include <kscope/bench/format.hpp>
#include <kscope/core/detail/atomic_file.hpp>
#include <kscope/core/detail/env_switch.hpp>
#include <kscope/core/detail/json_writer.hpp>
#include <kscope/core/detail/text_escape.hpp>
#include <kscope/report/compare.hpp>
#include <kscope/report/merge.hpp>
#include <kscope/report/plot.hpp>
#include <kscope/report/rank.hpp>
#include <kscope/report/report.hpp>
#include <kscope/report/trace.hpp>
#include <kscope/scope/detail/switch_warnings.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

namespace output_safety_test {  // one per file: the unit tests build as one program

namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

constexpr const char* fffd = "\xEF\xBF\xBD";

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The bytes a terminal would act on: C0 controls but '\n', DEL, and the C1 controls as
// UTF-8 (U+0080-U+009F).
bool has_raw_control(const std::string& text) {
  for (std::size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if ((c < 0x20 && c != '\n') || c == 0x7F) return true;
    if (c == 0xC2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) <= 0x9F) return true;
  }
  return false;
}

std::string json_string(std::string_view s) {
  std::string out;
  kscope::detail::json_writer w(out);
  w.value(s);
  return out;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_plain(const fs::path& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
}

// A fresh empty directory, removed at the end of the test.
struct temp_dir {
  fs::path path;
  temp_dir() {
    static int counter = 0;
    path = fs::temp_directory_path() /
           ("kscope_output_safety_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~temp_dir() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(path)) names.push_back(e.path().filename().string());
    return names;
  }
};

// While alive, a write past `bytes` fails with EFBIG (the file-size limit, which binds
// root too) instead of killing the process with SIGXFSZ.
struct file_size_limit {
  rlimit previous{};
  void (*previous_handler)(int) = nullptr;
  explicit file_size_limit(rlim_t bytes) {
    REQUIRE(::getrlimit(RLIMIT_FSIZE, &previous) == 0);
    previous_handler = std::signal(SIGXFSZ, SIG_IGN);
    rlimit limited = previous;
    limited.rlim_cur = bytes;
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &limited) == 0);
  }
  ~file_size_limit() {
    ::setrlimit(RLIMIT_FSIZE, &previous);
    std::signal(SIGXFSZ, previous_handler);
  }
};

std::string system_message(int error) { return std::generic_category().message(error); }

kscope::summary some_summary(double median) {
  kscope::summary s{};
  s.n = 20;
  s.median = s.mean = s.min = s.max = s.p90 = s.p99 = median;
  s.median_ci = kscope::interval{median * 0.99, median * 1.01, 0.95};
  s.steady = true;
  return s;
}

kscope::scope_report scope_named(const std::string& name, kscope::node_id id) {
  kscope::scope_report s;
  s.id = id;
  s.name = name;
  s.path = name;
  s.depth = 1;
  s.calls = 20;
  s.host_ns = some_summary(1000);
  s.host_inclusive_ns = 20000;
  return s;
}

// Names that break naive printers: ESC sequences (clear screen, set the window title),
// BEL, a NUL with text after it, a newline, invalid UTF-8, a bidi override.
const std::string evil_escape = "clear\x1b[2J\x1b]0;owned\x07";
const std::string evil_nul = std::string("before\0after", 12);
const std::string evil_newline = "line\nno scope slower: PASS";
const std::string evil_utf8 = "bad\xC0\xAF\xED\xA0\x80\xF4\x90\x80\x80\xE2\x82";
const std::string evil_bidi = "gemm\xE2\x80\xAE" "cba";

}  // namespace

// ---- UTF-8 and JSON strings ------------------------------------------------------------

TEST_CASE("decode_utf8 accepts exactly the well-formed sequences and replaces each maximal subpart once") {
  using kscope::detail::decode_utf8;
  using kscope::detail::is_valid_utf8;
  CHECK(is_valid_utf8("A\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80"));  // A é € 😀
  CHECK(is_valid_utf8("\xF4\x8F\xBF\xBF"));                        // U+10FFFF, the last code point
  CHECK(decode_utf8("\xF4\x8F\xBF\xBF", 0).code_point == 0x10FFFF);
  CHECK(decode_utf8("\xE2\x82\xAC", 0).code_point == 0x20AC);
  // Invalid: overlong, surrogate, above U+10FFFF, truncated, lone continuation, never-lead bytes.
  const char* const invalid[] = {"\xC0\xAF", "\xC1\xBF", "\xE0\x80\xAF", "\xF0\x80\x80\xAF", "\xED\xA0\x80",
                                 "\xED\xBF\xBF", "\xF4\x90\x80\x80", "\xF5\x80\x80\x80", "\xE2\x82", "\xC3",
                                 "\x80", "\xBF", "\xFE", "\xFF"};
  for (const char* s : invalid) CHECK_FALSE_MESSAGE(is_valid_utf8(s), kscope::detail::printable_name(s));
  // Maximal subparts: a cut sequence is one replacement, an impossible second byte ends it.
  CHECK(decode_utf8("\xE2\x82" "A", 0).length == 2);
  CHECK(decode_utf8("\xE2\x82" "A", 0).valid == false);
  CHECK(decode_utf8("\xF0\x9F\x98", 0).length == 3);
  CHECK(decode_utf8("\xED\xA0\x80", 0).length == 1);  // ED A0: a surrogate, ED alone is the subpart
  CHECK(decode_utf8("\xE0\x80\xAF", 0).length == 1);  // E0 80: overlong
}

TEST_CASE("json_writer: invalid UTF-8 becomes U+FFFD, every control is \\u00XX, NUL does not truncate") {
  CHECK(json_string("\xC0\xAF") == std::string("\"") + fffd + fffd + "\"");                 // overlong
  CHECK(json_string("\xE0\x80\xAF") == std::string("\"") + fffd + fffd + fffd + "\"");      // overlong, 3 bytes
  CHECK(json_string("\xED\xA0\x80") == std::string("\"") + fffd + fffd + fffd + "\"");      // surrogate
  CHECK(json_string("\xF4\x90\x80\x80") == std::string("\"") + fffd + fffd + fffd + fffd + "\"");  // > U+10FFFF
  CHECK(json_string("ab\xE2\x82") == std::string("\"ab") + fffd + "\"");                   // cut at the end
  CHECK(json_string("\xE2\x82x") == std::string("\"") + fffd + "x\"");                     // cut in the middle
  CHECK(json_string("\xFF") == std::string("\"") + fffd + "\"");
  CHECK(json_string("A\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80") == "\"A\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\"");
  CHECK(json_string(std::string("a\0b", 3)) == "\"a\\u0000b\"");
  CHECK(json_string("\x1b[31m") == "\"\\u001b[31m\"");
  CHECK(json_string("\x7f") == "\"\\u007f\"");
  CHECK(json_string("\n\t\"\\") == "\"\\u000a\\u0009\\\"\\\\\"");
  CHECK(json_string("\xE2\x80\xA8") == "\"\\u2028\"");  // valid JSON, not valid JavaScript raw
  std::string every_control;
  for (int c = 0; c < 0x20; ++c) every_control += static_cast<char>(c);
  every_control += '\x7f';
  const std::string written = json_string(every_control);
  CHECK_FALSE(has_raw_control(written));
  const json back = json::parse(written);
  CHECK(back.get<std::string>() == every_control);
  // Keys go through the same door.
  std::string doc;
  kscope::detail::json_writer w(doc);
  w.begin_object().member(evil_utf8, 1).member(evil_nul, 2).end_object();
  const json parsed = json::parse(doc);
  CHECK(parsed.contains(evil_nul));
}

TEST_CASE("a report whose scope names hold invalid UTF-8, NUL and ESC is valid JSON and reads back") {
  kscope::session_report r;
  r.scopes = {scope_named(evil_utf8, 1), scope_named(evil_nul, 2), scope_named(evil_escape, 3)};
  r.warnings.push_back("warning with \x1b[1m and \xFF");
  r.context.host_name = "host\xC3";
  kscope::tag_count tag;
  tag.key = "k\x01";
  tag.value = std::string("v\0w", 3);
  tag.count = 1;
  r.scopes[0].tags.push_back(tag);
  const std::string doc = r.json();
  CHECK_FALSE(has_raw_control(doc));
  json parsed;
  REQUIRE_NOTHROW(parsed = json::parse(doc));  // nlohmann rejects invalid UTF-8
  const auto& scopes = parsed.at("scopes");
  // C0 AF (overlong): 2; ED A0 80 (surrogate): 3; F4 90 80 80 (> U+10FFFF): 4; E2 82 (cut): 1.
  std::string repaired = "bad";
  for (int i = 0; i < 10; ++i) repaired += fffd;
  CHECK(scopes.at(0).at("name").get<std::string>() == repaired);
  CHECK(scopes.at(1).at("name") == evil_nul);  // the NUL and what follows it
  CHECK(scopes.at(2).at("name") == evil_escape);
  CHECK(scopes.at(0).at("tags").at(0).at("value") == std::string("v\0w", 3));
  std::string error;
  const auto back = kscope::parse_report(doc, &error);
  REQUIRE_MESSAGE(back.has_value(), error);
  CHECK(back->scopes.at(1).name == evil_nul);
}

TEST_CASE("a Chrome trace with hostile scope and kernel names is valid JSON") {
  const std::string kernel_name = std::string("k\0ernel\x1b\xFF", 9);
  std::vector<kscope::host_interval> host = {{evil_utf8, 1, 0, 1000, 5000}, {evil_nul, 2, 0, 6000, 9000}};
  kscope::gpu_activity_event g;
  g.kind = kscope::activity_kind::kernel;
  g.node = 1;
  g.thread_index = 0;
  g.start_ns = 2000;
  g.end_ns = 3000;
  g.name = kernel_name;
  kscope::trace_options options;
  options.process_name = "proc\x1b\xC3";
  const std::string doc = kscope::chrome_trace_json(host, {g}, options);
  CHECK_FALSE(has_raw_control(doc));
  json parsed;
  REQUIRE_NOTHROW(parsed = json::parse(doc));
  bool nul_scope = false, kernel = false;
  for (const auto& e : parsed.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    nul_scope = nul_scope || e.at("name") == evil_nul;
    // The NUL kept (no demangling of a name that holds one), the invalid byte replaced.
    kernel = kernel || e.at("name") == std::string("k\0ernel\x1b", 8) + fffd;
  }
  CHECK(nul_scope);
  CHECK(kernel);
}

TEST_CASE("bench JSON and the merged report with hostile names are valid JSON") {
  kscope::bench_result r;
  r.name = evil_utf8 + evil_escape;
  r.metadata.dtype = evil_nul;
  r.stopped = kscope::stop_reason::error;
  r.stop_message = "error: \x1b[2J";
  const std::string doc = kscope::detail::harness::to_json(kscope::bench_context{}, {r}, true);
  CHECK_FALSE(has_raw_control(doc));
  json parsed;
  REQUIRE_NOTHROW(parsed = json::parse(doc));
  CHECK(parsed.at("benchmarks").at(0).at("dtype") == evil_nul);

  kscope::session_report rank;
  rank.scopes = {scope_named(evil_utf8, 1)};
  const auto merged = kscope::merge_reports({rank.json(), rank.json()});
  const std::string merged_doc = merged.json();
  CHECK_FALSE(has_raw_control(merged_doc));
  json merged_parsed;
  CHECK_NOTHROW(merged_parsed = json::parse(merged_doc));
}

// ---- terminal text ---------------------------------------------------------------------

TEST_CASE("printable_name shows controls, ESC, NUL, bidi overrides and invalid UTF-8 visibly") {
  using kscope::detail::printable_name;
  using kscope::detail::printable_text;
  CHECK(printable_name("\x1b[2J") == "\\x1b[2J");
  CHECK(printable_name(std::string("a\0b", 3)) == "a\\0b");
  CHECK(printable_name("a\nb\tc\rd") == "a\\x0ab\\x09c\\x0dd");
  CHECK(printable_name("\x7f") == "\\x7f");
  CHECK(printable_name("\xC2\x9B" "31m") == "\\u009b31m");  // C1 CSI
  CHECK(printable_name(evil_bidi) == "gemm\\u202ecba");
  CHECK(printable_name("\xE2\x80\xA8") == "\\u2028");
  CHECK(printable_name("x\xFFy\xE2\x82") == std::string("x") + fffd + "y" + fffd);
  CHECK(printable_name("gemm<bf16> ± 1.2 µs é €") == "gemm<bf16> ± 1.2 µs é €");  // valid text untouched
  CHECK(printable_text("a\nb\x1b") == "a\nb\\x1b");
  CHECK(printable_text(printable_text("\x1b\n\xFF")) == printable_text("\x1b\n\xFF"));  // idempotent
}

TEST_CASE("session_report::text puts no control character on the terminal and a NUL cuts nothing") {
  kscope::session_report r;
  r.scopes = {scope_named(evil_escape, 1), scope_named(evil_nul, 2), scope_named(evil_newline, 3),
              scope_named(evil_utf8, 4), scope_named(evil_bidi, 5)};
  // 28 columns of x and three é: the 30-column cell cuts between two é, never inside one.
  r.scopes.push_back(scope_named(std::string(28, 'x') + "\xC3\xA9\xC3\xA9\xC3\xA9", 6));
  r.warnings = {"bad \x1b]0;title\x07 warning", std::string("nul\0tail-of-warning", 19)};
  r.cupti_status = "status \x1b[5m";
  kscope::kernel_summary k;
  k.name = "kernel\x1b[31m\xFF";
  k.calls = 1;
  r.top_kernels.push_back(k);
  r.context.host_name = "host\x1b[8m";
  const std::string text = r.text();
  CHECK_FALSE(has_raw_control(text));
  CHECK(kscope::detail::is_valid_utf8(text));
  CHECK(contains(text, "clear\\x1b[2J"));
  CHECK(contains(text, "before\\0after"));
  CHECK(contains(text, "tail-of-warning"));  // text after a NUL is printed
  CHECK(contains(text, "line\\x0ano scope"));
  CHECK_FALSE(contains(text, "\nno scope slower"));  // no forged line
  CHECK(contains(text, "gemm\\u202ecba"));
  CHECK(contains(text, "kernel\\x1b[31m"));
  CHECK(contains(text, "host\\x1b[8m"));
  // fputs stops at a NUL: the whole text must reach the terminal.
  CHECK(std::string(text.c_str()).size() == text.size());
}

TEST_CASE("fit never cuts a UTF-8 character in two") {
  const std::string cut = kscope::detail::fit(std::string(8, 'x') + "\xC3\xA9\xC3\xA9\xC3\xA9", 10);
  CHECK(kscope::detail::is_valid_utf8(cut));
  CHECK(cut == std::string(8, 'x') + "\xC3\xA9~");
}

TEST_CASE("compare text and errors print names from the files safely") {
  kscope::comparable_run base, cand;
  for (kscope::comparable_run* run : {&base, &cand}) {
    run->names = {evil_newline, evil_escape, evil_nul};
    run->entries.push_back({evil_newline, "host", some_summary(1000)});
  }
  base.entries.push_back({evil_escape, "host", some_summary(1000)});  // missing in the candidate
  base.environment.gpu = "GPU\x1b[2J";
  cand.environment.gpu = "other";
  const kscope::report_comparison c = kscope::compare_runs(base, cand);
  const std::string text = c.text();
  CHECK_FALSE(has_raw_control(text));
  CHECK(contains(text, "line\\x0ano scope slower: PASS"));
  CHECK(contains(text, "clear\\x1b[2J"));
  CHECK(contains(text, "FAIL"));
  CHECK_FALSE(contains(text, "\nno scope slower: PASS"));
  for (const std::string& w : c.environment_warnings) CHECK_FALSE(has_raw_control(w));

  const kscope::comparable_load l = kscope::load_comparable(R"({"schema": "evil\u001b[2J"})");
  CHECK_FALSE(l.ok());
  CHECK_FALSE(has_raw_control(l.error));
  CHECK(contains(l.error, "evil\\x1b[2J"));
}

TEST_CASE("bench markdown: names, dtypes and notes are printable; '|' cannot break the table") {
  kscope::bench_result r;
  r.name = "b|" + evil_escape;
  r.metadata.dtype = evil_newline;
  r.stopped = kscope::stop_reason::invalid;
  r.invalid_reason = evil_nul;
  r.warnings = {"warn \x1b[1m"};
  const std::string md = kscope::detail::harness::to_markdown(kscope::bench_context{}, {r});
  CHECK_FALSE(has_raw_control(md));
  CHECK(contains(md, "| b\\|clear\\x1b[2J"));
  CHECK(contains(md, "line\\x0ano scope"));
  CHECK(contains(md, "before\\0after"));
  // Every table row has the header's number of cells: no '|' or newline got out of a cell.
  std::istringstream lines(md);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("| b", 0) != 0) continue;
    std::size_t bars = 0;
    for (std::size_t i = 0; i < line.size(); ++i) bars += line[i] == '|' && (i == 0 || line[i - 1] != '\\');
    CHECK(bars == 13);
  }
}

TEST_CASE("CSV fields are quoted by RFC 4180 and carry no raw control") {
  using kscope::detail::harness::csv_field;
  CHECK(csv_field("plain") == "plain");
  CHECK(csv_field("a,b") == "\"a,b\"");
  CHECK(csv_field("say \"hi\"") == "\"say \"\"hi\"\"\"");
  CHECK(csv_field("two\nlines") == "\"two\nlines\"");
  CHECK(csv_field("cr\rhere") == "\"cr\rhere\"");
  CHECK(csv_field(" padded") == "\" padded\"");
  CHECK(csv_field("esc\x1b[2J") == "esc\\x1b[2J");
  CHECK(csv_field(std::string("nul\0x", 5)) == "nul\\0x");
  CHECK(csv_field("bad\xFF") == std::string("bad") + fffd);
  kscope::bench_result r;
  r.name = "gemm, \"big\"\n\x1b";
  const std::string csv = kscope::detail::harness::to_csv({r});
  CHECK(contains(csv, "\n\"gemm, \"\"big\"\"\n\\x1b\","));
}

// ---- environment switches --------------------------------------------------------------

TEST_CASE("parse_switch: case-insensitive, blanks trimmed, unknown values reported") {
  using kscope::detail::parse_switch;
  using kscope::detail::switch_value;
  for (const char* v : {"0", "off", "OFF", "Off", "false", "False", "FALSE", "no", "NO", " 0", "0 ", "\t0\n",
                        "disable", "Disabled", "DISABLED"})
    CHECK_MESSAGE(parse_switch(v) == switch_value::off, v);
  for (const char* v : {"1", "on", "ON", "true", "True", "yes", "YES", " yes ", "enable", "Enabled"})
    CHECK_MESSAGE(parse_switch(v) == switch_value::on, v);
  for (const char* v : {"", " ", "\t\n"}) CHECK_MESSAGE(parse_switch(v) == switch_value::unset, v);
  CHECK(parse_switch(nullptr) == switch_value::unset);
  for (const char* v : {"maybe", "2", "of", "offf", "0 0", "o n", "disabledx", "-1", "nope", "\xC3\x96N"})
    CHECK_MESSAGE(parse_switch(v) == switch_value::unrecognised, v);
}

TEST_CASE("KSCOPE=OFF, False, no and \" 0\" turn recording off; an unknown value warns and leaves it on") {
  const auto with_kscope = [](const char* value) {
    if (value) ::setenv("KSCOPE", value, 1);
    else ::unsetenv("KSCOPE");
    kscope::detail::enabled_state.store(-1);  // a fresh process: read the environment again
    return kscope::detail::enabled();
  };
  for (const char* off : {"OFF", "False", "no", " 0", "0", "disabled"}) {
    CHECK_FALSE_MESSAGE(with_kscope(off), off);
    CHECK(kscope::detail::environment_warning().empty());
  }
  for (const char* on : {"1", "On", "TRUE", ""}) {
    CHECK_MESSAGE(with_kscope(on), on);
    CHECK(kscope::detail::environment_warning().empty());
  }
  CHECK(with_kscope("maybe"));
  const std::string warning = kscope::detail::environment_warning();
  CHECK(contains(warning, "KSCOPE=\"maybe\" not understood"));
  CHECK(contains(warning, "recording is on"));
  CHECK(contains(warning, "off: 0, off, false, no"));
  CHECK(with_kscope("\x1b[2J"));
  CHECK_FALSE(has_raw_control(kscope::detail::environment_warning()));
  CHECK(with_kscope(nullptr));
  CHECK(kscope::detail::environment_warning().empty());
  kscope::detail::enabled_state.store(-1);
}

// ---- files: all or nothing -------------------------------------------------------------

TEST_CASE("write_file_atomically writes, replaces, and leaves no temporary file") {
  temp_dir dir;
  const fs::path target = dir.path / "out.json";
  std::string error;
  REQUIRE(kscope::detail::write_file_atomically(target.string(), "first\n", &error));
  CHECK(error.empty());
  CHECK(read_file(target) == "first\n");
  REQUIRE(kscope::detail::write_file_atomically(target.string(), "second\n", &error));
  CHECK(read_file(target) == "second\n");
  CHECK(dir.entries() == std::vector<std::string>{"out.json"});
  // A replaced file keeps its permissions.
  ::chmod(target.c_str(), 0640);
  REQUIRE(kscope::detail::write_file_atomically(target.string(), "third\n", &error));
  struct stat st {};
  REQUIRE(::stat(target.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0640);
  // Through a symbolic link: the file it names is replaced, the link stays.
  const fs::path link = dir.path / "link.json";
  fs::create_symlink(target, link);
  REQUIRE(kscope::detail::write_file_atomically(link.string(), "through the link\n", &error));
  CHECK(fs::is_symlink(link));
  CHECK(read_file(target) == "through the link\n");
}

TEST_CASE("a write into a directory that does not exist names the path and the reason") {
  const std::string path = "/nonexistent-kscope-dir/sub/report.json";
  const std::string expected = "cannot write " + path + ": " + system_message(ENOENT);
  std::string error;
  CHECK_FALSE(kscope::detail::write_file_atomically(path, "x", &error));
  CHECK(error == expected);
  error.clear();
  CHECK_FALSE(kscope::write_text_file(path, "x", &error));
  CHECK(error == expected);
  error.clear();
  CHECK_FALSE(kscope::write_chrome_trace(path, {}, {}, {}, &error));
  CHECK(error == expected);
  error.clear();
  kscope::session_report r;
  CHECK_FALSE(r.write_json(path, &error));
  CHECK(error == expected);
  error.clear();
  CHECK_FALSE(r.write_html(path, &error));
  CHECK(error == expected);
  error.clear();
  kscope::clear_rank();
  CHECK(kscope::write_json_for_rank(r, path, &error).empty());
  CHECK(contains(error, "cannot write /nonexistent-kscope-dir/sub/report"));
  error.clear();
  CHECK_FALSE(kscope::detail::harness::write_output_file(path, "x", &error));
  CHECK(error == expected);
}

TEST_CASE("a full device: /dev/full reports 'No space left on device'") {
  if (!fs::exists("/dev/full")) {
    MESSAGE("no /dev/full on this system: the short-write case is covered by the file-size limit below");
    return;
  }
  const int fd = ::open("/dev/full", O_WRONLY);
  REQUIRE(fd >= 0);
  CHECK(kscope::detail::write_all(fd, "some bytes") == ENOSPC);
  ::close(fd);
  std::string error;
  CHECK_FALSE(kscope::write_text_file("/dev/full", "x", &error));
  CHECK(error == "cannot write /dev/full: " + system_message(ENOSPC));
  kscope::session_report r;
  CHECK_FALSE(r.write_json("/dev/full", &error));
  CHECK(error == "cannot write /dev/full: " + system_message(ENOSPC));
  CHECK(fs::is_character_file("/dev/full"));  // written in place, never replaced
}

TEST_CASE("a write that fails half way leaves the previous file intact and no temporary behind") {
  temp_dir dir;
  const std::string previous = "previous content, complete\n";
  kscope::session_report big;
  for (kscope::node_id i = 1; i <= 200; ++i) big.scopes.push_back(scope_named("scope_" + std::to_string(i), i));
  std::vector<kscope::host_interval> host;
  for (int i = 0; i < 2000; ++i) host.push_back({"step", 1, 0, i * 1000LL, i * 1000LL + 500});
  const std::string large(256 * 1024, 'x');
  REQUIRE(big.json().size() > 16 * 1024);

  const std::string expected_reason = ": " + system_message(EFBIG);
  struct writer {
    const char* what;
    std::function<bool(const std::string&, std::string*)> write;
  };
  const std::vector<writer> writers = {
      {"write_file_atomically",
       [&](const std::string& p, std::string* e) { return kscope::detail::write_file_atomically(p, large, e); }},
      {"write_text_file", [&](const std::string& p, std::string* e) { return kscope::write_text_file(p, large, e); }},
      {"session_report::write_json", [&](const std::string& p, std::string* e) { return big.write_json(p, e); }},
      {"session_report::write_html", [&](const std::string& p, std::string* e) { return big.write_html(p, e); }},
      {"write_chrome_trace",
       [&](const std::string& p, std::string* e) { return kscope::write_chrome_trace(p, host, {}, {}, e); }},
      {"bench write_output_file",
       [&](const std::string& p, std::string* e) { return kscope::detail::harness::write_output_file(p, large, e); }},
  };
  for (const writer& w : writers) {
    const std::string what = w.what;
    CAPTURE(what);
    const fs::path target = dir.path / "result.json";
    write_plain(target, previous);
    std::string error;
    {
      file_size_limit limit(16 * 1024);  // the new content is larger: the write fails part way
      CHECK_FALSE(w.write(target.string(), &error));
    }
    const std::string after = read_file(target);
    CAPTURE(after.size());
    const bool previous_intact = after == previous;  // not a truncated new file (bool: no 16 KiB dump)
    CHECK(previous_intact);
    CHECK(dir.entries() == std::vector<std::string>{"result.json"});
    CHECK(contains(error, "cannot write "));
    CHECK(contains(error, "result.json" + expected_reason));
    // And without the limit the same call succeeds: the failure was the limit's.
    CHECK(w.write(target.string(), &error));
    CHECK(read_file(target) != previous);
  }
}

}  // namespace output_safety_test
