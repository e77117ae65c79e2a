// Tests of kscope/core/sweep.hpp: typed values, cartesian and zipped expansion, products,
// and the errors that bad sweeps raise (before any measurement starts); what each point
// measured (sweep_value, quantile_value) and the three printers of sweep_results.
#include <kscope/core/sweep.hpp>

#include <kscope/core/detail/json_reader.hpp>  // reads the JSON back

#include <doctest/doctest.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace sweep_test {  // one per file: the unit tests build as one program

using kscope::axis;
using kscope::param_value;
using kscope::sweep;

TEST_CASE("param_value keeps integers, reals and strings apart") {
  param_value i = 128;
  param_value r = 0.1;
  param_value t = "bf16";
  param_value big = 1LL << 40;
  CHECK(i.is_integer());
  CHECK(r.is_real());
  CHECK(t.is_text());
  CHECK(i.as_integer() == 128);
  CHECK(i.as_real() == 128.0);  // integers convert to reals exactly
  CHECK(big.as_integer() == (1LL << 40));
  CHECK(r.as_real() == 0.1);
  CHECK(t.as_text() == "bf16");
  CHECK(i.to_string() == "128");
  CHECK(r.to_string() == "0.1");  // shortest form that reads back exactly
  CHECK(param_value(1.0 / 3).to_string() == "0.3333333333333333");
  CHECK(param_value(true).to_string() == "true");
  CHECK_THROWS_AS((void)r.as_integer(), std::invalid_argument);  // no silent truncation
  CHECK_THROWS_AS((void)t.as_real(), std::invalid_argument);
  CHECK_THROWS_AS((void)i.as_text(), std::invalid_argument);
  CHECK(param_value(3) == param_value(3L));
  CHECK(param_value(3) != param_value(3.0));  // different kinds are different values
}

TEST_CASE("cartesian: every combination, last axis fastest, like nested loops") {
  const sweep s = sweep::cartesian({axis("batch", {1, 8}), axis("seq_len", {128, 256, 512})});
  REQUIRE(s.size() == 6);
  CHECK(s.axis_names() == std::vector<std::string>{"batch", "seq_len"});
  const long long expected[6][2] = {{1, 128}, {1, 256}, {1, 512}, {8, 128}, {8, 256}, {8, 512}};
  for (std::size_t i = 0; i < 6; ++i) {
    CHECK(s[i].integer("batch") == expected[i][0]);
    CHECK(s[i].integer("seq_len") == expected[i][1]);
  }
  CHECK(s[4].label() == "batch=8 seq_len=256");

  SUBCASE("three typed axes") {
    const sweep t = sweep::cartesian(
        {axis("dtype", {"fp16", "bf16"}), axis("scale", {0.5, 1.0}), axis("heads", {8, 16, 32})});
    CHECK(t.size() == 12);
    CHECK(t[0].text("dtype") == "fp16");
    CHECK(t[11].text("dtype") == "bf16");
    CHECK(t[11].real("scale") == 1.0);
    CHECK(t[11].integer("heads") == 32);
    CHECK(t[11].real("heads") == 32.0);
  }
  SUBCASE("no axes is one empty point; an empty axis is no points") {
    CHECK(sweep::cartesian({}).size() == 1);
    CHECK(sweep::cartesian({}).points().front().values().empty());
    CHECK(sweep::cartesian({axis("a", {1, 2}), kscope::sweep_axis{"empty", {}}}).empty());
  }
}

TEST_CASE("zip: element i of every axis forms point i") {
  const sweep z = sweep::zip({axis("requests", {1, 2, 4, 8}), axis("seq_len", {4096, 2048, 1024, 512})});
  REQUIRE(z.size() == 4);
  for (const kscope::sweep_point& p : z) CHECK(p.integer("requests") * p.integer("seq_len") == 4096);
  CHECK(z[2].label() == "requests=4 seq_len=1024");
  CHECK(sweep::zip({}).empty());
}

TEST_CASE("zip with mismatched lengths is a clear error") {
  CHECK_THROWS_AS((void)sweep::zip({axis("requests", {1, 2, 4, 8}), axis("seq_len", {4096, 2048, 1024})}),
                  std::invalid_argument);
  CHECK_THROWS_WITH((void)sweep::zip({axis("requests", {1, 2, 4, 8}), axis("seq_len", {4096, 2048, 1024})}),
                    "kscope::sweep::zip: axis 'seq_len' has 3 values but axis 'requests' has 4; zipped axes "
                    "need the same number of values");
}

TEST_CASE("product of sweeps, and names must be unique") {
  const sweep dtypes = sweep::cartesian({axis("dtype", {"fp16", "bf16"})});
  const sweep shapes = sweep::zip({axis("requests", {1, 2}), axis("seq_len", {2048, 1024})});
  const sweep both = dtypes * shapes;
  REQUIRE(both.size() == 4);
  CHECK(both.axis_names() == std::vector<std::string>{"dtype", "requests", "seq_len"});
  CHECK(both[0].label() == "dtype=fp16 requests=1 seq_len=2048");
  CHECK(both[3].label() == "dtype=bf16 requests=2 seq_len=1024");

  CHECK_THROWS_WITH((void)(shapes * sweep::cartesian({axis("seq_len", {1})})),
                    "kscope::sweep: axis 'seq_len' appears in both sweeps of a product");
  CHECK_THROWS_WITH((void)sweep::cartesian({axis("a", {1}), axis("a", {2})}),
                    "kscope::sweep::cartesian: axis 'a' is given twice");
  CHECK_THROWS_AS((void)sweep::zip({axis("", {1})}), std::invalid_argument);
}

TEST_CASE("points: lookups by name, with messages that name the axis") {
  const sweep s = sweep::cartesian({axis("batch", {4}), axis("dtype", {"bf16"})});
  const kscope::sweep_point& p = s[0];
  CHECK(p.has("batch"));
  CHECK_FALSE(p.has("seq_len"));
  CHECK_THROWS_AS((void)p["seq_len"], std::out_of_range);
  CHECK_THROWS_WITH((void)p.integer("seq_len"), "kscope::sweep_point: no axis named 'seq_len' in point {batch=4 dtype=bf16}");
  CHECK_THROWS_AS((void)p.integer("dtype"), std::invalid_argument);
}

TEST_CASE("geometric axes and sweeps given point by point") {
  const kscope::sweep_axis g = kscope::geometric_axis("seq_len", 128, 4096);
  REQUIRE(g.values.size() == 6);
  CHECK(g.values.front().as_integer() == 128);
  CHECK(g.values.back().as_integer() == 4096);
  CHECK(kscope::geometric_axis("n", 1, 100, 10).values.size() == 3);  // 1, 10, 100
  CHECK(kscope::geometric_axis("n", 1, 99, 10).values.size() == 2);
  CHECK_THROWS_AS((void)kscope::geometric_axis("n", 0, 10), std::invalid_argument);

  const sweep s = sweep::of({kscope::sweep_point({{"m", 1}, {"n", 2}}), kscope::sweep_point({{"m", 3}, {"n", 4}})});
  CHECK(s.size() == 2);
  CHECK(s[1].integer("n") == 4);
  CHECK_THROWS_AS((void)sweep::of({kscope::sweep_point({{"m", 1}}), kscope::sweep_point({{"n", 1}})}),
                  std::invalid_argument);
}

// ---- what each point measured: sweep_value, quantile_value, sweep_results --------------

namespace {

std::vector<double> one_to(int n) {
  std::vector<double> v;
  for (int i = 1; i <= n; ++i) v.push_back(i);
  return v;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::size_t count_lines(const std::string& text) {
  std::size_t n = 0;
  for (char c : text) n += c == '\n';
  return n;
}

// Two points of a serving-like sweep: the first has too few requests for a p99.
kscope::sweep_results two_points() {
  kscope::sweep_results r;
  r.title = "serving: batch";
  r.context = {"device line"};
  r.metrics = {{"requests", "", "requests"}, {"ttft_p50_ms", "ms", "TTFT p50"}, {"ttft_p99_ms", "ms", "TTFT p99"},
               {"tokens_per_s", "tokens/s", "throughput"}};
  const sweep points = sweep::zip({axis("batch", {1, 32}), axis("clients", {1, 32})}) *
                       sweep::cartesian({axis("prompt", {256})});
  std::vector<double> few = {10, 12, 11, 13, 12, 14, 11};
  std::vector<double> many;
  for (int i = 0; i < 400; ++i) many.push_back(20 + (i * 37 % 400) * 0.1);
  r.add(points[0], {kscope::sweep_value::of(7), kscope::quantile_value(few, 0.5, 0.95, "requests"),
                    kscope::quantile_value(few, 0.99, 0.95, "requests"), kscope::sweep_value::of(777.5)});
  r.add(points[1], {kscope::sweep_value::of(400), kscope::quantile_value(many, 0.5, 0.95, "requests"),
                    kscope::quantile_value(many, 0.99, 0.95, "requests"), kscope::sweep_value::of(21000)},
        {"queue | still growing"});
  return r;
}

}  // namespace

TEST_CASE("sweep_value: a number, or no number and why") {
  const kscope::sweep_value v = kscope::sweep_value::of(12.5, 3);
  CHECK(v.known());
  CHECK(v.value == 12.5);
  CHECK(v.samples == 3);
  CHECK(v.missing.empty());
  CHECK(std::isnan(v.ci.lo));
  const kscope::sweep_value nan = kscope::sweep_value::of(std::nan(""));
  CHECK_FALSE(nan.known());
  CHECK(nan.missing == "not measured");  // never a silent blank
  const kscope::sweep_value absent = kscope::sweep_value::absent("needs 19 GiB, 12 free");
  CHECK_FALSE(absent.known());
  CHECK(absent.missing == "needs 19 GiB, 12 free");
  CHECK(kscope::sweep_value::absent("").missing == "not measured");
}

TEST_CASE("quantile_value: the quantile with its interval, or the reason there is none") {
  std::vector<double> x = one_to(400);
  x.push_back(std::nan(""));  // left out, and not counted
  const kscope::sweep_value p99 = kscope::quantile_value(x, 0.99);
  REQUIRE(p99.known());
  CHECK(p99.value == doctest::Approx(kscope::quantile(one_to(400), 0.99)));
  CHECK(p99.ci.lo == 392);  // quantile_ci's exact ranks
  CHECK(p99.ci.hi == 400);
  CHECK(p99.samples == 400);

  const kscope::sweep_value few = kscope::quantile_value(one_to(40), 0.99, 0.95, "requests");
  CHECK_FALSE(few.known());
  CHECK(few.missing == "p99 needs >= 100 requests (40 here)");
  // Enough for the value, too few for its interval: a value without an interval.
  const kscope::sweep_value no_ci = kscope::quantile_value(one_to(150), 0.99);
  CHECK(no_ci.known());
  CHECK(std::isnan(no_ci.ci.lo));
  CHECK(kscope::quantile_value({}, 0.5).missing == "no samples");
  CHECK(kscope::quantile_value(one_to(1), 0.5).missing == "p50 needs >= 2 samples (1 here)");
  CHECK(kscope::quantile_value(one_to(5000), 0.999).known());
  CHECK(kscope::quantile_value(one_to(999), 0.999).missing == "p99.9 needs >= 1000 samples (999 here)");
  CHECK_FALSE(kscope::quantile_value(one_to(10), 1.5).known());
}

TEST_CASE("sweep_results: rows must match the metrics and the first point's axes") {
  kscope::sweep_results r = two_points();
  CHECK(r.rows.size() == 2);
  CHECK(r.axis_names() == std::vector<std::string>{"batch", "clients", "prompt"});
  CHECK(r.varying_axes() == std::vector<std::string>{"batch", "clients"});
  CHECK(r.short_label(r.rows[1]) == "batch=32 clients=32");
  REQUIRE(r.find(1, "ttft_p99_ms") != nullptr);
  CHECK(r.find(1, "ttft_p99_ms")->known());
  CHECK(r.find(0, "nope") == nullptr);
  CHECK(r.find(9, "requests") == nullptr);
  CHECK_THROWS_WITH(r.add(kscope::sweep_point({{"batch", 2}, {"clients", 2}, {"prompt", 256}}),
                          {kscope::sweep_value::of(1)}),
                    "kscope::sweep_results::add: point {batch=2 clients=2 prompt=256} has 1 values for 4 metrics");
  CHECK_THROWS_AS(r.add(kscope::sweep_point({{"rate", 2}}), std::vector<kscope::sweep_value>(4)),
                  std::invalid_argument);
  CHECK(r.rows.size() == 2);  // nothing added by a refused call
}

TEST_CASE("sweep_results markdown: values with intervals, n/a with its reason, notes") {
  const std::string md = two_points().markdown();
  CHECK(contains(md, "serving: batch\ndevice line\n\n"));
  CHECK(contains(md, "| batch | clients | prompt | requests | TTFT p50 (ms) | TTFT p99 (ms) | throughput (tokens/s) |\n"
                     "|---:|---:|---:|---:|---:|---:|---:|\n"));
  // 7 requests: a median with its interval (ranks 1 and 7 at 95 %), no p99.
  CHECK(contains(md, "| 1 | 1 | 256 | 7 | 12.00 [10.00, 14.00] | n/a | 777.5 |\n"));
  CHECK(contains(md, "- batch=1 clients=1: TTFT p99: p99 needs >= 100 requests (7 here)\n"));
  CHECK(contains(md, "95 % distribution-free confidence interval"));
  CHECK(contains(md, "notes:\n- batch=32 clients=32: queue | still growing\n"));  // '|' only escaped in the table
  // The 400-request row has a p99 with an interval.
  const kscope::sweep_results r = two_points();
  const kscope::sweep_value* p99 = r.find(1, "ttft_p99_ms");
  REQUIRE(p99 != nullptr);
  REQUIRE(!std::isnan(p99->ci.lo));
  CHECK(contains(md, "| 32 | 32 | 256 | 400 | "));
}

TEST_CASE("sweep_results csv: one row per point and metric, empty fields for unknowns") {
  const std::string csv = two_points().csv();
  CHECK(csv.rfind("batch,clients,prompt,metric,unit,value,ci_lo,ci_hi,ci_level,samples,missing\n", 0) == 0);
  CHECK(count_lines(csv) == 1 + 2 * 4);
  CHECK(contains(csv, "\n1,1,256,ttft_p99_ms,ms,,,,,,p99 needs >= 100 requests (7 here)\n"));
  CHECK(contains(csv, "\n1,1,256,ttft_p50_ms,ms,12,10,14,0.95,7,\n"));
  CHECK(contains(csv, "\n1,1,256,tokens_per_s,tokens/s,777.5,,,,,\n"));
  // An interval whose level is unknown (a value filled by hand): an empty field, as JSON's null.
  kscope::sweep_results r;
  r.metrics = {{"ttft_p50", "ms", ""}};
  kscope::sweep_value v;
  v.value = 2.5;
  v.ci = kscope::interval{2.0, 3.0, std::nan("")};
  v.samples = 10;
  r.add(kscope::sweep_point({{"batch", kscope::param_value(8)}}), {v});
  CHECK(contains(r.csv(), "\n8,ttft_p50,ms,2.5,2,3,,10,\n"));
}

TEST_CASE("sweep_results json: schema kscope.sweep/1, numbers as numbers, unknowns as null") {
  const std::string text = two_points().json();
  const auto parsed = kscope::detail::parse_json(text);
  REQUIRE(parsed.ok());
  const kscope::detail::json_value& doc = parsed.value;
  CHECK(doc.member_string("schema") == "kscope.sweep/1");
  CHECK(doc.member_string("title") == "serving: batch");
  REQUIRE(doc.find("axes") != nullptr);
  CHECK(doc.find("axes")->items.size() == 3);
  REQUIRE(doc.find("metrics") != nullptr);
  CHECK(doc.find("metrics")->at(3).member_string("unit") == "tokens/s");
  const kscope::detail::json_value* points = doc.find("points");
  REQUIRE(points != nullptr);
  REQUIRE(points->items.size() == 2);
  const kscope::detail::json_value& first = points->at(0);
  CHECK(first.member_string("label") == "batch=1 clients=1 prompt=256");
  CHECK(first.find("params")->member_number("batch", 0) == 1);
  const kscope::detail::json_value* p50 = first.find("values")->find("ttft_p50_ms");
  REQUIRE(p50 != nullptr);
  CHECK(p50->member_number("value", 0) == 12);
  CHECK(p50->find("ci")->member_number("lo", 0) == 10);
  CHECK(p50->member_number("samples", 0) == 7);
  CHECK(p50->find("missing")->is_null());
  const kscope::detail::json_value* p99 = first.find("values")->find("ttft_p99_ms");
  CHECK(p99->find("value")->is_null());
  CHECK(p99->find("ci")->is_null());
  CHECK(p99->member_string("missing") == "p99 needs >= 100 requests (7 here)");
  CHECK(points->at(1).find("notes")->at(0).string == "queue | still growing");
}

TEST_CASE("sweep_results printers never read past a row pushed by hand") {
  kscope::sweep_results r = two_points();
  r.rows.push_back(kscope::sweep_row{kscope::sweep_point({{"batch", 64}}), {kscope::sweep_value::of(3)}, {}});
  const std::string md = r.markdown();
  CHECK(contains(md, "| 64 |  |  | 3 | n/a | n/a | n/a |\n"));
  CHECK(contains(md, "- batch=64 clients= prompt=: TTFT p50, TTFT p99, throughput: not measured\n"));
  CHECK(count_lines(r.csv()) == 1 + 3 * 4);
  CHECK(kscope::detail::parse_json(r.json()).ok());
}

}  // namespace sweep_test
