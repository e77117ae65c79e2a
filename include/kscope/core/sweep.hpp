// kscope/core/sweep.hpp — parameter sweeps for micro-benchmarks: named axes of integers,
// real numbers or strings, expanded as a cartesian product or zipped element by element.
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
#pragma once

#include "detail/number_format.hpp"  // real values print with '.' whatever the C locale

#include <cstddef>
#include <cstdint>
#include <initializer_list>
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
  param_value(bool v) : kind_(kind::text), text_(v ? "true" : "false") {}  // NOLINT
  param_value(const char* v) : kind_(kind::text), text_(v ? v : "") {}     // NOLINT
  param_value(std::string v) : kind_(kind::text), text_(std::move(v)) {}   // NOLINT
  param_value(std::string_view v) : kind_(kind::text), text_(v) {}         // NOLINT

  [[nodiscard]] kind type() const noexcept { return kind_; }
  [[nodiscard]] bool is_integer() const noexcept { return kind_ == kind::integer; }
  [[nodiscard]] bool is_real() const noexcept { return kind_ == kind::real; }
  [[nodiscard]] bool is_text() const noexcept { return kind_ == kind::text; }

  // The integer; a real or string value throws (silently truncating 0.5 to 0 would
  // corrupt a sweep without anyone noticing).
  [[nodiscard]] long long as_integer() const {
    if (kind_ != kind::integer)
      throw std::invalid_argument("kscope::param_value: '" + to_string() + "' is not an integer");
    return integer_;
  }
  // The number; integers convert exactly (up to 2^53), strings throw.
  [[nodiscard]] double as_real() const {
    if (kind_ == kind::integer) return static_cast<double>(integer_);
    if (kind_ != kind::real)
      throw std::invalid_argument("kscope::param_value: '" + text_ + "' is a string, not a number");
    return real_;
  }
  [[nodiscard]] const std::string& as_text() const {
    if (kind_ != kind::text)
      throw std::invalid_argument("kscope::param_value: " + to_string() + " is a number, not a string");
    return text_;
  }

  // Integers in decimal, reals in the shortest form that reads back exactly.
  [[nodiscard]] std::string to_string() const {
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
[[nodiscard]] inline sweep_axis geometric_axis(std::string name, long long first, long long last,
                                               long long factor = 2) {
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

// One point of a sweep: the value of every axis, in axis order.
//
//   p.integer("seq_len"); p.real("scale"); p.text("dtype"); p.label();  // "seq_len=512 dtype=bf16"
class sweep_point {
 public:
  sweep_point() = default;
  explicit sweep_point(std::vector<std::pair<std::string, param_value>> values)
      : values_(std::move(values)) {}

  [[nodiscard]] bool has(std::string_view name) const noexcept { return find(name) != nullptr; }
  [[nodiscard]] const param_value& operator[](std::string_view name) const {
    if (const param_value* v = find(name)) return *v;
    throw std::out_of_range("kscope::sweep_point: no axis named '" + std::string(name) +
                            "' in point {" + label() + "}");
  }
  [[nodiscard]] long long integer(std::string_view name) const { return (*this)[name].as_integer(); }
  [[nodiscard]] double real(std::string_view name) const { return (*this)[name].as_real(); }
  [[nodiscard]] const std::string& text(std::string_view name) const { return (*this)[name].as_text(); }

  // "name=value" pairs joined by spaces, in axis order: a readable benchmark suffix.
  [[nodiscard]] std::string label() const {
    std::string s;
    for (const auto& [name, value] : values_) {
      if (!s.empty()) s += ' ';
      s += name;
      s += '=';
      s += value.to_string();
    }
    return s;
  }
  [[nodiscard]] const std::vector<std::pair<std::string, param_value>>& values() const noexcept {
    return values_;
  }

  friend bool operator==(const sweep_point& a, const sweep_point& b) { return a.values_ == b.values_; }
  friend bool operator!=(const sweep_point& a, const sweep_point& b) { return !(a == b); }

 private:
  const param_value* find(std::string_view name) const noexcept {
    for (const auto& [n, v] : values_)
      if (n == name) return &v;
    return nullptr;
  }
  std::vector<std::pair<std::string, param_value>> values_;
};

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
  [[nodiscard]] static sweep cartesian(std::vector<sweep_axis> axes) {
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

  // Element i of every axis forms point i; all axes must have the same length, because
  // silently truncating to the shortest would drop experiments without a trace.
  [[nodiscard]] static sweep zip(std::vector<sweep_axis> axes) {
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

  // The points given one by one (each must have the same axes in the same order).
  [[nodiscard]] static sweep of(std::vector<sweep_point> points) {
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

  // Cartesian product of two sweeps: each point of *this followed by each point of
  // `inner`. Axis names must not repeat.
  [[nodiscard]] sweep operator*(const sweep& inner) const {
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

  [[nodiscard]] std::size_t size() const noexcept { return points_.size(); }
  [[nodiscard]] bool empty() const noexcept { return points_.empty(); }
  [[nodiscard]] const sweep_point& operator[](std::size_t i) const { return points_.at(i); }
  [[nodiscard]] const std::vector<sweep_point>& points() const noexcept { return points_; }
  [[nodiscard]] const std::vector<std::string>& axis_names() const noexcept { return names_; }
  [[nodiscard]] auto begin() const noexcept { return points_.begin(); }
  [[nodiscard]] auto end() const noexcept { return points_.end(); }

 private:
  static std::vector<std::string> checked_names(const std::vector<sweep_axis>& axes, const char* what) {
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

  std::vector<std::string> names_;
  std::vector<sweep_point> points_;
};

}  // namespace kscope
