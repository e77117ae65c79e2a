// kscope/core/sweep.hpp — parameter sweeps: named axes of integers, real numbers or
// strings, expanded as a cartesian product or zipped element by element; and a table of
// what each point measured (sweep_results), printed as markdown, CSV and JSON.
//
// Pure C++ (no CUDA): a sweep is a list of points; what runs at each point is yours.
//
//   auto lengths = kscope::sweep::cartesian({kscope::axis("batch", {8}),
//                                            kscope::axis("seq_len", {512, 1024, 2048})});
//   auto requests = kscope::sweep::zip({kscope::axis("requests", {1, 2, 4}),
//                                       kscope::axis("seq_len", {4096, 2048, 1024})});
//   for (const kscope::sweep_point& p : lengths)
//     run(p.integer("batch"), p.integer("seq_len"));   // p.label(): "batch=8 seq_len=512"
//
// Bad input (zipped axes of different lengths, a name used twice, asking a point for an
// axis it does not have or for the wrong type) throws std::invalid_argument or
// std::out_of_range with a message that names the axis: sweeps are built before any
// measurement starts, so failing loudly there costs nothing.
//
// What each point measured, when the program runs a whole loop rather than one kernel
// (bench.hpp's run_sweep covers kernels): sweep_results holds, per point, one
// sweep_value per named metric (a value with its interval and sample count, or no value
// and why), and prints that one data model as a markdown table, CSV and JSON;
// report/plot.hpp's sweep_svg() draws it.
//
//   kscope::sweep_results r;
//   r.metrics = {{"ttft_p99", "ms", "TTFT p99"}, {"tokens_per_s", "tokens/s", "output tokens/s"}};
//   for (const kscope::sweep_point& p : lengths) {
//     const measured m = run(p);
//     r.add(p, {kscope::quantile_value(m.ttft_ms, 0.99), kscope::sweep_value::of(m.tokens_per_s)});
//   }
//   std::fputs(r.markdown().c_str(), stdout);   // "n/a" and the reason where p99 has too few samples
#pragma once

#include "config.hpp"
#include "config.hpp"
#include "detail/csv.hpp"
#include "detail/json_writer.hpp"
#include "detail/number_format.hpp"  // real values print with '.' whatever the C locale
#include "detail/once.hpp"
#include "detail/text_escape.hpp"
#include "stats.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace kscope {

// One typed parameter value: an integer, a real number or a string. Benchmarks carry
// their free-form parameters as param_values too, so JSON keeps numbers as numbers.
//
//   kscope::param_value v = 128;     // integer
//   v.to_string();                   // "128"
class param_value {
 public:
  enum class kind { integer, real, text };

  param_value() = default;
  template <class T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  param_value(T v) : kind_(kind::integer), integer_(static_cast<long long>(v)) {}  // NOLINT: implicit by design
  template <class T, std::enable_if_t<std::is_floating_point_v<T>, int> = 0>
  param_value(T v) : kind_(kind::real), real_(static_cast<double>(v)) {}  // NOLINT
  param_value(bool v);  // NOLINT
  param_value(const char* v);     // NOLINT
  param_value(std::string v);   // NOLINT
  param_value(std::string_view v);         // NOLINT

  [[nodiscard]] kind type() const noexcept { return kind_; }
  [[nodiscard]] bool is_integer() const noexcept { return kind_ == kind::integer; }
  [[nodiscard]] bool is_real() const noexcept { return kind_ == kind::real; }
  [[nodiscard]] bool is_text() const noexcept { return kind_ == kind::text; }

  // The integer; a real or string value throws (silently truncating 0.5 to 0 would
  // corrupt a sweep without anyone noticing).
  [[nodiscard]] long long as_integer() const;
  // The number; integers convert exactly (up to 2^53), strings throw.
  [[nodiscard]] double as_real() const;
  [[nodiscard]] const std::string& as_text() const;

  // Integers in decimal, reals in the shortest form that reads back exactly.
  [[nodiscard]] std::string to_string() const;

  friend bool operator==(const param_value& a, const param_value& b) {
    if (a.kind_ != b.kind_) return false;
    switch (a.kind_) {
      case kind::integer: return a.integer_ == b.integer_;
      case kind::real: return a.real_ == b.real_;
      case kind::text: return a.text_ == b.text_;
    }
    return false;
  }
  friend bool operator!=(const param_value& a, const param_value& b) { return !(a == b); }

 private:
  kind kind_ = kind::integer;
  long long integer_ = 0;
  double real_ = 0;
  std::string text_;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL param_value::param_value(bool v) : kind_(kind::text), text_(v ? "true" : "false") {}

KSCOPE_DECL param_value::param_value(const char* v) : kind_(kind::text), text_(v ? v : "") {}

KSCOPE_DECL param_value::param_value(std::string v) : kind_(kind::text), text_(std::move(v)) {}

KSCOPE_DECL param_value::param_value(std::string_view v) : kind_(kind::text), text_(v) {}

KSCOPE_DECL long long param_value::as_integer() const {
  if (kind_ != kind::integer)
    throw std::invalid_argument("kscope::param_value: '" + to_string() + "' is not an integer");
  return integer_;
}

KSCOPE_DECL double param_value::as_real() const {
  if (kind_ == kind::integer) return static_cast<double>(integer_);
  if (kind_ != kind::real)
    throw std::invalid_argument("kscope::param_value: '" + text_ + "' is a string, not a number");
  return real_;
}

KSCOPE_DECL const std::string& param_value::as_text() const {
  if (kind_ != kind::text)
    throw std::invalid_argument("kscope::param_value: " + to_string() + " is a number, not a string");
  return text_;
}

KSCOPE_DECL std::string param_value::to_string() const {
  switch (kind_) {
    case kind::integer: return std::to_string(integer_);
    case kind::real: {
      // The first of "%.6g" ... "%.17g" that reads back exactly; '.' whatever the locale.
      std::string text;
      for (int digits = 6; digits <= 17; ++digits) {
        text = detail::format_general(real_, digits);
        double back = 0;
        if (detail::parse_double(text, back) && back == real_) break;
      }
      return text;
    }
    case kind::text: return text_;
  }
  return {};
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// A named list of values.
//
//   kscope::sweep_axis seq = kscope::axis("seq_len", {128, 256, 512});
//   kscope::sweep_axis dt  = kscope::axis("dtype", {"fp16", "bf16"});
struct sweep_axis {
  std::string name;
  std::vector<param_value> values;
};

// Builds an axis from a braced list of ints, doubles or strings.
template <class T>
[[nodiscard]] sweep_axis axis(std::string name, std::initializer_list<T> values) {
  sweep_axis a{std::move(name), {}};
  a.values.reserve(values.size());
  for (const T& v : values) a.values.emplace_back(v);
  return a;
}
template <class T>
[[nodiscard]] sweep_axis axis(std::string name, const std::vector<T>& values) {
  sweep_axis a{std::move(name), {}};
  a.values.reserve(values.size());
  for (const T& v : values) a.values.emplace_back(v);
  return a;
}

// Integers from `first` to `last` inclusive, each `factor` times the previous one:
// geometric_axis("seq_len", 128, 4096) is 128, 256, ..., 4096.
[[nodiscard]] KSCOPE_DECL sweep_axis geometric_axis(std::string name, long long first, long long last,
                                               long long factor = 2);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL sweep_axis geometric_axis(std::string name, long long first, long long last,
                                               long long factor) {
  if (first <= 0 || factor < 2)
    throw std::invalid_argument("kscope::geometric_axis '" + name +
                                "': needs first > 0 and factor >= 2");
  sweep_axis a{std::move(name), {}};
  for (long long v = first; v <= last; v *= factor) {
    a.values.emplace_back(v);
    if (v > last / factor) break;  // the next product would overflow or pass `last`
  }
  return a;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// One point of a sweep: the value of every axis, in axis order.
//
//   p.integer("seq_len"); p.real("scale"); p.text("dtype"); p.label();  // "seq_len=512 dtype=bf16"
class sweep_point {
 public:
  sweep_point() = default;
  explicit sweep_point(std::vector<std::pair<std::string, param_value>> values);

  [[nodiscard]] bool has(std::string_view name) const noexcept { return find(name) != nullptr; }
  [[nodiscard]] const param_value& operator[](std::string_view name) const;
  [[nodiscard]] long long integer(std::string_view name) const;
  [[nodiscard]] double real(std::string_view name) const;
  [[nodiscard]] const std::string& text(std::string_view name) const;

  // "name=value" pairs joined by spaces, in axis order: a readable benchmark suffix.
  [[nodiscard]] std::string label() const;
  [[nodiscard]] const std::vector<std::pair<std::string, param_value>>& values() const noexcept {
    return values_;
  }

  friend bool operator==(const sweep_point& a, const sweep_point& b) { return a.values_ == b.values_; }
  friend bool operator!=(const sweep_point& a, const sweep_point& b) { return !(a == b); }

 private:
  const param_value* find(std::string_view name) const noexcept;
  std::vector<std::pair<std::string, param_value>> values_;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL long long sweep_point::integer(std::string_view name) const { return (*this)[name].as_integer(); }

KSCOPE_DECL double sweep_point::real(std::string_view name) const { return (*this)[name].as_real(); }

KSCOPE_DECL const std::string& sweep_point::text(std::string_view name) const { return (*this)[name].as_text(); }
#endif  // KSCOPE_DETAIL_DEFINITIONS

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL sweep_point::sweep_point(std::vector<std::pair<std::string, param_value>> values) : values_(std::move(values)) {}

KSCOPE_DECL const param_value& sweep_point::operator[](std::string_view name) const {
  if (const param_value* v = find(name)) return *v;
  throw std::out_of_range("kscope::sweep_point: no axis named '" + std::string(name) +
          "' in point {" + label() + "}");
}

KSCOPE_DECL std::string sweep_point::label() const {
  std::string s;
  for (const auto& [name, value] : values_) {
    if (!s.empty()) s += ' ';
    s += name;
    s += '=';
    s += value.to_string();
  }
  return s;
}

KSCOPE_DECL const param_value* sweep_point::find(std::string_view name) const noexcept {
  for (const auto& [n, v] : values_)
    if (n == name) return &v;
  return nullptr;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// An expanded list of points over named axes.
//
//   auto s = kscope::sweep::cartesian({kscope::axis("batch", {1, 8}), kscope::axis("dtype", {"fp16", "bf16"})});
//   s.size();        // 4: (1,fp16) (1,bf16) (8,fp16) (8,bf16) — the last axis varies fastest
//   auto z = kscope::sweep::zip({kscope::axis("requests", {1, 2}), kscope::axis("seq_len", {2048, 1024})});
//   auto both = s * z;   // every point of s combined with every point of z: 8 points
class sweep {
 public:
  sweep() = default;

  // Every combination; the first axis varies slowest, as in nested for-loops written in
  // axis order. No axes: one empty point (the identity of operator*). An empty axis:
  // no points.
  [[nodiscard]] static sweep cartesian(std::vector<sweep_axis> axes);

  // Element i of every axis forms point i; all axes must have the same length, because
  // silently truncating to the shortest would drop experiments without a trace.
  [[nodiscard]] static sweep zip(std::vector<sweep_axis> axes);

  // The points given one by one (each must have the same axes in the same order).
  [[nodiscard]] static sweep of(std::vector<sweep_point> points);

  // Cartesian product of two sweeps: each point of *this followed by each point of
  // `inner`. Axis names must not repeat.
  [[nodiscard]] sweep operator*(const sweep& inner) const;

  [[nodiscard]] std::size_t size() const noexcept { return points_.size(); }
  [[nodiscard]] bool empty() const noexcept { return points_.empty(); }
  [[nodiscard]] const sweep_point& operator[](std::size_t i) const { return points_.at(i); }
  [[nodiscard]] const std::vector<sweep_point>& points() const noexcept { return points_; }
  [[nodiscard]] const std::vector<std::string>& axis_names() const noexcept { return names_; }
  [[nodiscard]] auto begin() const noexcept { return points_.begin(); }
  [[nodiscard]] auto end() const noexcept { return points_.end(); }

 private:
  static std::vector<std::string> checked_names(const std::vector<sweep_axis>& axes, const char* what);

  std::vector<std::string> names_;
  std::vector<sweep_point> points_;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL sweep sweep::cartesian(std::vector<sweep_axis> axes) {
  sweep s;
  s.names_ = checked_names(axes, "cartesian");
  s.points_.emplace_back();
  for (const sweep_axis& a : axes) {
    std::vector<sweep_point> next;
    next.reserve(s.points_.size() * a.values.size());
    for (const sweep_point& p : s.points_) {
      for (const param_value& v : a.values) {
        auto values = p.values();
        values.emplace_back(a.name, v);
        next.emplace_back(std::move(values));
      }
    }
    s.points_ = std::move(next);
  }
  return s;
}

KSCOPE_DECL sweep sweep::zip(std::vector<sweep_axis> axes) {
  sweep s;
  s.names_ = checked_names(axes, "zip");
  if (axes.empty()) return s;
  const std::size_t n = axes.front().values.size();
  for (const sweep_axis& a : axes) {
    if (a.values.size() != n) {
      throw std::invalid_argument(
          "kscope::sweep::zip: axis '" + a.name + "' has " + std::to_string(a.values.size()) +
          " values but axis '" + axes.front().name + "' has " + std::to_string(n) +
          "; zipped axes need the same number of values");
    }
  }
  s.points_.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    std::vector<std::pair<std::string, param_value>> values;
    values.reserve(axes.size());
    for (const sweep_axis& a : axes) values.emplace_back(a.name, a.values[i]);
    s.points_.emplace_back(std::move(values));
  }
  return s;
}

KSCOPE_DECL sweep sweep::of(std::vector<sweep_point> points) {
  sweep s;
  if (points.empty()) return s;
  for (const auto& [name, value] : points.front().values()) s.names_.push_back(name);
  for (const sweep_point& p : points) {
    bool same = p.values().size() == s.names_.size();
    for (std::size_t i = 0; same && i < s.names_.size(); ++i) same = p.values()[i].first == s.names_[i];
    if (!same)
      throw std::invalid_argument("kscope::sweep::of: point {" + p.label() +
                  "} does not have the axes of the first point");
  }
  s.points_ = std::move(points);
  return s;
}

KSCOPE_DECL sweep sweep::operator*(const sweep& inner) const {
  for (const std::string& n : inner.names_)
    for (const std::string& m : names_)
      if (n == m)
        throw std::invalid_argument("kscope::sweep: axis '" + n + "' appears in both sweeps of a product");
  sweep s;
  s.names_ = names_;
  s.names_.insert(s.names_.end(), inner.names_.begin(), inner.names_.end());
  s.points_.reserve(points_.size() * inner.points_.size());
  for (const sweep_point& a : points_) {
    for (const sweep_point& b : inner.points_) {
      auto values = a.values();
      values.insert(values.end(), b.values().begin(), b.values().end());
      s.points_.emplace_back(std::move(values));
    }
  }
  return s;
}

KSCOPE_DECL std::vector<std::string> sweep::checked_names(const std::vector<sweep_axis>& axes, const char* what) {
  std::vector<std::string> names;
  for (const sweep_axis& a : axes) {
    if (a.name.empty())
      throw std::invalid_argument(std::string("kscope::sweep::") + what + ": an axis has no name");
    for (const std::string& n : names)
      if (n == a.name)
        throw std::invalid_argument(std::string("kscope::sweep::") + what + ": axis '" + a.name +
                                    "' is given twice");
    names.push_back(a.name);
  }
  return names;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// ---- what each point of a sweep measured --------------------------------------------

// A quantity measured at every point: its key in CSV and JSON, its unit ("" for a count)
// and the text of its column and legend (the name when empty).
//   kscope::sweep_metric m{"ttft_p99", "ms", "TTFT p99"};
struct sweep_metric {
  std::string name;
  std::string unit;
  std::string label;

  [[nodiscard]] const std::string& display() const noexcept;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL const std::string& sweep_metric::display() const noexcept { return label.empty() ? name : label; }
#endif  // KSCOPE_DETAIL_DEFINITIONS

// One measured value at one point: a number, the confidence interval when it is a
// statistic that has one, and how many samples it rests on — or no number (NaN) and the
// reason, which every printer shows instead of a made-up value.
//   kscope::sweep_value::of(12800.0);                  // a rate over the run: no interval
//   kscope::quantile_value(ttft_ms, 0.99);             // p99 with its interval, or why not
//   kscope::sweep_value::absent("needs 19 GiB, 12 free");
struct sweep_value {
  double value = std::numeric_limits<double>::quiet_NaN();
  interval ci{};             // lo = hi = NaN: no interval
  std::size_t samples = 0;   // samples behind a statistic; 0 for a plain number or count
  std::string missing;       // why there is no value; "" when there is one

  [[nodiscard]] bool known() const noexcept { return std::isfinite(value); }

  // A plain number (a count, a rate over a window); a non-finite one is "not measured".
  [[nodiscard]] static sweep_value of(double v, std::size_t samples = 0);
  [[nodiscard]] static sweep_value absent(std::string why);
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL sweep_value sweep_value::of(double v, std::size_t samples) {
  sweep_value out;
  out.samples = samples;
  if (std::isfinite(v)) out.value = v;
  else out.missing = "not measured";
  return out;
}

KSCOPE_DECL sweep_value sweep_value::absent(std::string why) {
  sweep_value out;
  out.missing = why.empty() ? std::string("not measured") : std::move(why);
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// The p-quantile of the finite samples (quantile(), type 7) with its distribution-free
// interval (quantile_ci(); none when the samples are too few for one at `level`), or no
// value when there are fewer samples than quantile_min_samples(p): "p99 needs >= 100
// requests (40 here)". `noun` names the samples in that message.
//   r.add(p, {kscope::quantile_value(ttft_ms, 0.5, 0.95, "requests"), ...});
[[nodiscard]] KSCOPE_DECL sweep_value quantile_value(const std::vector<double>& samples, double p, double level = 0.95,
                                                std::string_view noun = "samples");

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL sweep_value quantile_value(const std::vector<double>& samples, double p, double level,
                                                std::string_view noun) {
  const std::string name = "p" + detail::format_general(p * 100, 6);
  if (!(p >= 0 && p <= 1)) return sweep_value::absent(name + " is not a quantile (p must be in [0, 1])");
  const std::size_t n = samples.size() - count_non_finite(samples);
  if (n == 0) return sweep_value::absent("no " + std::string(noun));
  const std::size_t need = quantile_min_samples(p);
  if (n < need)
    return sweep_value::absent(name + " needs >= " + std::to_string(need) + " " + std::string(noun) + " (" +
                               std::to_string(n) + " here)");
  sweep_value out;
  out.value = quantile(samples, p);
  out.ci = quantile_ci(samples, p, level);
  out.samples = n;
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// One point's row: its parameters, one value per metric (in metric order), and notes
// ("queue still growing at the last arrival").
struct sweep_row {
  sweep_point point;
  std::vector<sweep_value> values;
  std::vector<std::string> notes;
};

namespace detail {

// 4 significant digits in fixed notation ("1.234", "12.34", "1234", "12345"), a whole
// plain number (a count) as an integer, a statistic's interval with the value's decimals;
// "n/a" for NaN.
KSCOPE_DECL int sweep_decimals(double v, bool statistic);
KSCOPE_DECL std::string sweep_number(double v, int decimals);
KSCOPE_DECL std::string sweep_cell(const sweep_value& v);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL int sweep_decimals(double v, bool statistic) {
  const double a = std::fabs(v);
  if (a == 0 || (!statistic && a == std::floor(a) && a < 1e15)) return 0;
  return std::clamp(3 - static_cast<int>(std::floor(std::log10(a))), 0, 9);
}

KSCOPE_DECL std::string sweep_number(double v, int decimals) {
  if (!std::isfinite(v)) return "n/a";
  const double a = std::fabs(v);
  if (a >= 1e15 || (a > 0 && a < 1e-6)) return format_general(v, 4);
  return format_fixed(v, decimals);
}

KSCOPE_DECL std::string sweep_cell(const sweep_value& v) {
  if (!v.known()) return "n/a";
  const int decimals = sweep_decimals(v.value, v.samples > 0);
  std::string s = sweep_number(v.value, decimals);
  if (std::isfinite(v.ci.lo) && std::isfinite(v.ci.hi))
    s += " [" + sweep_number(v.ci.lo, decimals) + ", " + sweep_number(v.ci.hi, decimals) + "]";
  return s;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail

// Everything a sweep measured, in point order, and its three printers.
//
//   kscope::sweep_results r;
//   r.title = "serving: batch size";
//   r.context = {"NVIDIA H200 ...", "prompt ~256 tokens, output ~128"};
//   r.metrics = {{"requests", "", "requests"}, {"ttft_p50", "ms", "TTFT p50"}};
//   r.add(point, {kscope::sweep_value::of(120), kscope::quantile_value(ttft_ms, 0.5)});
//   r.markdown();   // the table, the interval legend, every missing value with its reason, the notes
//   r.csv();        // one row per point and metric (axis columns, metric, unit, value, ci_lo, ...)
//   r.json();       // schema "kscope.sweep/1"
struct sweep_results {
  std::string title;
  std::vector<std::string> context;  // lines above the table: device, fixed settings
  std::vector<sweep_metric> metrics;
  std::vector<sweep_row> rows;

  // Appends a point. One value per metric, and every point with the axes of the first, or
  // std::invalid_argument: a value under the wrong column would be a wrong number.
  void add(sweep_point point, std::vector<sweep_value> values, std::vector<std::string> notes = {});

  // Value i of a row; a "not measured" value past the row's end (a row pushed onto `rows`
  // by hand, without add()'s checks), so that no printer reads out of bounds.
  [[nodiscard]] static const sweep_value& value_of(const sweep_row& r, std::size_t i) noexcept;

  // The value of `metric` at row `row`; nullptr when either does not exist.
  [[nodiscard]] const sweep_value* find(std::size_t row, std::string_view metric) const noexcept;

  // The axis names, from the first point.
  [[nodiscard]] std::vector<std::string> axis_names() const;

  // The axes whose value differs between points (all of them when none does): what
  // tells the points apart in the lists below the table.
  [[nodiscard]] std::vector<std::string> varying_axes() const;

  // The text of a point's value on an axis; "" when the point has no such axis.
  [[nodiscard]] static std::string param_text(const sweep_point& p, const std::string& axis);

  // "batch=8": the varying axes of a row's point.
  [[nodiscard]] std::string short_label(const sweep_row& r) const;

  // Title and context lines, the table (one column per axis, then per metric: value
  // [interval]), the legend, every missing value with its reason, every note.
  [[nodiscard]] std::string markdown() const;

  // One row per point and metric ("tidy" data: every column has one meaning): the axis
  // values, then metric, unit, value, ci_lo, ci_hi, ci_level, samples, missing. Unknown
  // numbers are empty fields; full precision.
  [[nodiscard]] std::string csv() const;

  // {"schema": "kscope.sweep/1", "kscope_version", "title", "context": [...], "axes": [...],
  //  "metrics": [{"name", "unit", "label"}], "points": [{"label", "params": {axis: value},
  //  "values": {metric: {"value", "ci": {"lo", "hi", "level"} | null, "samples",
  //  "missing"}}, "notes": [...]}]}. Unknown numbers are null; "samples" is 0 for a plain
  //  number; "missing" is null when there is a value.
  [[nodiscard]] std::string json() const;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string sweep_results::param_text(const sweep_point& p, const std::string& axis) {
  return p.has(axis) ? p[axis].to_string() : std::string();
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL void sweep_results::add(sweep_point point, std::vector<sweep_value> values, std::vector<std::string> notes) {
  if (values.size() != metrics.size())
    throw std::invalid_argument("kscope::sweep_results::add: point {" + point.label() + "} has " +
                                std::to_string(values.size()) + " values for " + std::to_string(metrics.size()) +
                                " metrics");
  if (!rows.empty()) {
    const auto& first = rows.front().point.values();
    bool same = first.size() == point.values().size();
    for (std::size_t i = 0; same && i < first.size(); ++i) same = first[i].first == point.values()[i].first;
    if (!same)
      throw std::invalid_argument("kscope::sweep_results::add: point {" + point.label() +
                                  "} does not have the axes of the first point {" + rows.front().point.label() +
                                  "}");
  }
  rows.push_back(sweep_row{std::move(point), std::move(values), std::move(notes)});
}

KSCOPE_DECL const sweep_value& sweep_results::value_of(const sweep_row& r, std::size_t i) noexcept {
  if (i < r.values.size()) return r.values[i];
  // Not a function-local static, whose guard a fork could catch held (core/detail/once.hpp).
  static detail::lazy_global<const sweep_value> none{detail::lock_rank::init};
  return none.get([] {
    auto* built = new sweep_value;
    *built = sweep_value{std::numeric_limits<double>::quiet_NaN(), interval{}, 0, "not measured"};
    return built;
  });
}

KSCOPE_DECL const sweep_value* sweep_results::find(std::size_t row, std::string_view metric) const noexcept {
  if (row >= rows.size()) return nullptr;
  for (std::size_t i = 0; i < metrics.size() && i < rows[row].values.size(); ++i)
    if (metrics[i].name == metric) return &rows[row].values[i];
  return nullptr;
}

KSCOPE_DECL std::vector<std::string> sweep_results::axis_names() const {
  std::vector<std::string> names;
  if (!rows.empty())
    for (const auto& [name, value] : rows.front().point.values()) names.push_back(name);
  return names;
}

KSCOPE_DECL std::vector<std::string> sweep_results::varying_axes() const {
  std::vector<std::string> names;
  for (const std::string& name : axis_names()) {
    for (const sweep_row& r : rows) {
      if (!r.point.has(name) || r.point[name] != rows.front().point[name]) {
        names.push_back(name);
        break;
      }
    }
  }
  return names.empty() ? axis_names() : names;
}

KSCOPE_DECL std::string sweep_results::short_label(const sweep_row& r) const {
  std::string s;
  for (const std::string& name : varying_axes()) {
    if (!s.empty()) s += ' ';
    s += name + "=" + param_text(r.point, name);
  }
  return s;
}

KSCOPE_DECL std::string sweep_results::markdown() const {
    std::string out;
    if (!title.empty()) out += detail::printable_name(title) + "\n";
    for (const std::string& line : context) out += detail::printable_name(line) + "\n";
    if (!out.empty()) out += "\n";
    const std::vector<std::string> axes = axis_names();
    std::string header = "|", rule = "|";
    for (const std::string& a : axes) {
      bool numeric = true;
      for (const sweep_row& r : rows) numeric = numeric && r.point.has(a) && !r.point[a].is_text();
      header += " " + detail::markdown_table_cell(a) + " |";
      rule += numeric ? "---:|" : "---|";
    }
    for (const sweep_metric& m : metrics) {
      header += " " + detail::markdown_table_cell(m.display() + (m.unit.empty() ? "" : " (" + m.unit + ")")) + " |";
      rule += "---:|";
    }
    out += header + "\n" + rule + "\n";
    bool any_interval = false, any_statistic = false, any_missing = false, any_note = false;
    double level = 0.95;
    for (const sweep_row& r : rows) {
      std::string line = "|";
      for (const std::string& a : axes) line += " " + detail::markdown_table_cell(param_text(r.point, a)) + " |";
      for (std::size_t i = 0; i < metrics.size(); ++i) {
        const sweep_value& v = value_of(r, i);
        line += " " + detail::sweep_cell(v) + " |";
        if (std::isfinite(v.ci.lo) && std::isfinite(v.ci.hi)) {
          any_interval = true;
          level = v.ci.level;
        }
        any_statistic = any_statistic || v.samples > 0;
        any_missing = any_missing || !v.known();
      }
      any_note = any_note || !r.notes.empty();
      out += line + "\n";
    }
    if (any_interval || any_statistic) {
      out += "\n[lo, hi]: " + detail::format_general(level * 100, 6) +
             " % distribution-free confidence interval of the quantile (order statistics); none where the "
             "samples are too few for one at that level.\n";
    }
    if (any_missing) {
      out += "\nn/a:\n";
      for (const sweep_row& r : rows) {
        // Metrics with the same reason share a line.
        std::vector<std::pair<std::string, std::string>> reasons;  // reason, metrics
        for (std::size_t i = 0; i < metrics.size(); ++i) {
          const sweep_value& v = value_of(r, i);
          if (v.known()) continue;
          auto it = std::find_if(reasons.begin(), reasons.end(), [&](const auto& x) { return x.first == v.missing; });
          if (it == reasons.end()) reasons.emplace_back(v.missing, metrics[i].display());
          else it->second += ", " + metrics[i].display();
        }
        for (const auto& [why, which] : reasons)
          out += "- " + detail::printable_name(short_label(r)) + ": " + detail::printable_name(which) + ": " +
 detail::printable_name(why) + "\n";
      }
    }
    if (any_note) {
      out += "\nnotes:\n";
      for (const sweep_row& r : rows)
        for (const std::string& n : r.notes)
          out += "- " + detail::printable_name(short_label(r)) + ": " + detail::printable_name(n) + "\n";
    }
    return detail::printable_text(out);
  }

KSCOPE_DECL std::string sweep_results::csv() const {
  using detail::csv_field;
  using detail::csv_number;
  std::string out;
  const std::vector<std::string> axes = axis_names();
  for (const std::string& a : axes) out += csv_field(a) + ",";
  out += "metric,unit,value,ci_lo,ci_hi,ci_level,samples,missing\n";
  for (const sweep_row& r : rows) {
    std::string prefix;
    for (const std::string& a : axes) {
      if (r.point.has(a) && r.point[a].is_real()) prefix += csv_number(r.point[a].as_real()) + ",";
      else prefix += csv_field(param_text(r.point, a)) + ",";
    }
    for (std::size_t i = 0; i < metrics.size(); ++i) {
      const sweep_value& v = value_of(r, i);
      const bool has_ci = std::isfinite(v.ci.lo) && std::isfinite(v.ci.hi);
      out += prefix + csv_field(metrics[i].name) + "," + csv_field(metrics[i].unit) + "," + csv_number(v.value) +
             "," + (has_ci ? csv_number(v.ci.lo) : "") + "," + (has_ci ? csv_number(v.ci.hi) : "") + "," +
             (has_ci && std::isfinite(v.ci.level) ? detail::format_round_trip(v.ci.level) : "") + "," + (v.samples > 0 ? std::to_string(v.samples) : "") +
             "," + csv_field(v.missing) + "\n";
    }
  }
  return out;
}

KSCOPE_DECL std::string sweep_results::json() const {
  std::string out;
  detail::json_writer w(out);
  w.begin_object().member("schema", "kscope.sweep/1").member("kscope_version", KSCOPE_VERSION_STRING);
  w.member("title", title);
  w.key("context").begin_array();
  for (const std::string& line : context) w.value(line);
  w.end_array();
  w.key("axes").begin_array();
  for (const std::string& a : axis_names()) w.value(a);
  w.end_array();
  w.key("metrics").begin_array();
  for (const sweep_metric& m : metrics)
    w.begin_object().member("name", m.name).member("unit", m.unit).member("label", m.display()).end_object();
  w.end_array();
  w.key("points").begin_array();
  for (const sweep_row& r : rows) {
    w.begin_object().member("label", r.point.label());
    w.key("params").begin_object();
    for (const auto& [name, value] : r.point.values()) {
      w.key(name);
      switch (value.type()) {
        case param_value::kind::integer: w.value(value.as_integer()); break;
        case param_value::kind::real: w.value(value.as_real()); break;
        case param_value::kind::text: w.value(value.as_text()); break;
      }
    }
    w.end_object();
    w.key("values").begin_object();
    for (std::size_t i = 0; i < metrics.size(); ++i) {
      const sweep_value& v = value_of(r, i);
      w.key(metrics[i].name).begin_object().member("value", v.value);
      w.key("ci");
      if (std::isfinite(v.ci.lo) && std::isfinite(v.ci.hi))
        w.begin_object().member("lo", v.ci.lo).member("hi", v.ci.hi).member("level", v.ci.level).end_object();
      else
        w.value(nullptr);
      w.member("samples", static_cast<unsigned long long>(v.samples));
      w.key("missing");
      if (v.known()) w.value(nullptr);
      else w.value(v.missing);
      w.end_object();
    }
    w.end_object();
    w.key("notes").begin_array();
    for (const std::string& n : r.notes) w.value(n);
    w.end_array();
    w.end_object();
  }
  w.end_array();
  w.end_object();
  out += '\n';
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace kscope
