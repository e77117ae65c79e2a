// Tests of kscope/core/sweep.hpp: typed values, cartesian and zipped expansion, products,
// and the errors that bad sweeps raise (before any measurement starts).
#include <kscope/core/sweep.hpp>

#include <doctest/doctest.h>

#include <stdexcept>
#include <string>
#include <vector>

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
