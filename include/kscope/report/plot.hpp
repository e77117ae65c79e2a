// kscope/report/plot.hpp — the roofline picture: a self-contained SVG, and a single-file HTML
// page that shows it beside tables; the chart of a sweep's results (sweep_svg, below); and
// the report page's other pictures (bar_chart_svg, latency_svg, step_timeline_svg, below)
// with the style sheet every kscope page shares (detail::html_page_style).
//
// Pure string building, no CUDA, no I/O except write_text_file() (all or nothing, through
// core/detail/atomic_file.hpp). Inputs are the plain structs of roofline.hpp, so the
// session report and the bench harness feed it alike:
//
//   std::vector<kscope::roof_line> roofs = kscope::roof_lines(kscope::measure_peaks());
//   std::vector<kscope::roof_point> points = {
//       kscope::to_roof_point("decode", kscope::place(w, s, pf, pb))};
//   kscope::html_report page;
//   page.title = "decode step";
//   page.svg = kscope::roofline_svg(roofs, points);
//   (void)kscope::write_text_file("roofline.html", kscope::render_html(page));
//
// The SVG: log-log axes with a tick, grid line and label per decade; per roof_line the
// bandwidth slant up to its ridge and the flat compute roof after it (theoretical roofs
// solid, measured ones dashed, one colour per roof label, the "(measured)" suffix
// ignored, so a type's theoretical and measured roofs share a colour); one marker per
// point coloured by its limiter, labelled, with an SVG <title> tooltip; a legend on the
// right. Every point becomes exactly one <g class="kscope-point"> element. A point that
// cannot sit on log axes (intensity 0 or infinite, zero flop/s) is drawn hollow at the
// edge of the plot and its tooltip says "off scale"; a point with a NaN coordinate is
// not drawn and is listed under the legend instead. All text is escaped for XML (and
// invalid UTF-8 replaced), so labels such as "gemm<bf16> & bias" are safe.
//
// The HTML page embeds the SVG inline and the given tables; it has no JavaScript and
// no external resources, so it opens offline and renders the same in any browser.
// docs/render_html.sh turns it into a PNG with headless chromium. Every number is written
// with '.' whatever the C locale (core/detail/number_format.hpp): SVG has no decimal comma.
#pragma once

#include "../core/text.hpp"  // write_text_file
#include "../core/detail/number_format.hpp"
#include "../core/detail/text_escape.hpp"
#include "../core/roofline.hpp"
#include "../core/sweep.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kscope {

// Size, title and (optionally) fixed axis ranges of roofline_svg(). NaN ranges are
// chosen from the data: whole decades covering every point and every ridge, with one
// decade of slant below the lowest ridge and one decade of flat roof after the highest.
//   kscope::plot_options o;
//   o.title = "H200 roofline";
//   o.min_intensity = 0.01;
struct plot_options {
  std::string title = "Roofline";
  int width_px = 960;
  int height_px = 600;
  double min_intensity = std::numeric_limits<double>::quiet_NaN();  // flop/byte
  double max_intensity = std::numeric_limits<double>::quiet_NaN();
  double min_flops_per_s = std::numeric_limits<double>::quiet_NaN();
  double max_flops_per_s = std::numeric_limits<double>::quiet_NaN();
  // Colour each point by its limiter and name it in the point's tooltip. A session report's
  // page turns it off: what limits a scope is its one verdict, printed beside the picture,
  // and the points show where the scope ran, nothing more.
  bool point_limiters = true;
};

// A table for the HTML page; every cell is plain text (escaped when rendered).
//   kscope::html_table t{"Kernels", {"kernel", "time", "% of roof"}, {{"gemm", "1.2 ms", "71 %"}}};
struct html_table {
  std::string caption;
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows;
};

// What render_html() puts on the page, top to bottom: title, context lines (e.g. the
// device line of kscope::describe), the SVG, the tables, then trusted HTML fragments
// (inserted as they are: pass only markup you produced).
//   kscope::html_report page{"decode", {kscope::describe(gpu)}, svg, {table}, {}};
struct html_report {
  std::string title = "kscope report";
  std::vector<std::string> context_lines;
  std::string svg;
  std::vector<html_table> tables;
  std::vector<std::string> html_fragments;
};

namespace detail {

// Appends text escaped for XML/HTML element content and attribute values. Characters
// XML 1.0 forbids (control characters other than tab, LF, CR) and bytes that are not
// valid UTF-8 become U+FFFD, so any label yields a well-formed document.
KSCOPE_DECL void append_xml_escaped(std::string& out, std::string_view text);

KSCOPE_DECL std::string xml_escaped(std::string_view text);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL void append_xml_escaped(std::string& out, std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    const utf8_char c = decode_utf8(text, i);  // the one UTF-8 decoder (text_escape.hpp)
    switch (c.valid ? c.code_point : 0xFFFD) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: {
        const char32_t cp = c.code_point;
        const bool forbidden = !c.valid || (cp < 0x20 && cp != '\t' && cp != '\n' && cp != '\r') || cp == 0xFFFE ||
                               cp == 0xFFFF;
        if (forbidden) out += utf8_replacement_character;
        else out.append(text.data() + i, c.length);
      }
    }
    i += c.length;
  }
}

KSCOPE_DECL std::string xml_escaped(std::string_view text) {
  std::string out;
  append_xml_escaped(out, text);
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

inline std::string svg_number(double value) { return format_fixed(value, 2); }

// The label of the decade 10^exponent: "0.01", "1", "100", "1k", "10 T" + unit...
// Whole numbers with an SI prefix from 10^3 up, plain decimals below.
KSCOPE_DECL std::string decade_label(int exponent, const char* unit = "");

// Colours that stay apart for colour-blind readers (Okabe & Ito, 2008).
KSCOPE_DECL const char* roof_colour(std::size_t index);

KSCOPE_DECL const char* limiter_colour(bound b);

// The roof label without the " (measured)" suffix, so both roofs of a type share a colour.
KSCOPE_DECL std::string_view roof_family(std::string_view label);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string decade_label(int exponent, const char* unit) {
  static const char* const prefixes[] = {"", "k", "M", "G", "T", "P", "E"};
  const std::string space = *unit != '\0' ? " " : "";
  if (exponent >= 0) {
    const int group = std::min(exponent / 3, 6);
    const double mantissa = std::pow(10.0, exponent - 3 * group);
    return format_general(mantissa, 6) + space + prefixes[group] + unit;  // printf "%g"
  }
  return format_general(std::pow(10.0, exponent), 6) + space + unit;
}

KSCOPE_DECL const char* roof_colour(std::size_t index) {
  static const char* const palette[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000"};
  return palette[index % (sizeof palette / sizeof palette[0])];
}

KSCOPE_DECL const char* limiter_colour(bound b) {
  switch (b) {
    case bound::memory: return "#0072B2";
    case bound::compute: return "#D55E00";
    case bound::latency: return "#7F7F7F";
  }
  return "#7F7F7F";
}

KSCOPE_DECL std::string_view roof_family(std::string_view label) {
  constexpr std::string_view suffix = " (measured)";
  if (label.size() >= suffix.size() && label.substr(label.size() - suffix.size()) == suffix) {
    label.remove_suffix(suffix.size());
  }
  return label;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

KSCOPE_DECL bool positive_finite(double v);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL bool positive_finite(double v) { return v > 0 && std::isfinite(v); }
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail

// A standalone SVG document (no XML declaration, so it can also be inlined in HTML)
// drawing the roofs and the points. See the top of this header for what is drawn.
//   std::string svg = kscope::roofline_svg(roofs, points);
[[nodiscard]] KSCOPE_DECL std::string roofline_svg(const std::vector<roof_line>& roofs,
                                              const std::vector<roof_point>& points,
                                              const plot_options& options = {});

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string roofline_svg(const std::vector<roof_line>& roofs,
                                              const std::vector<roof_point>& points,
                                              const plot_options& options) {
  using detail::append_xml_escaped;
  using detail::positive_finite;
  using detail::svg_number;

  // Usable roofs: both peaks positive and finite.
  std::vector<const roof_line*> drawn_roofs;
  for (const roof_line& r : roofs) {
    if (positive_finite(r.peak_flops_per_s) && positive_finite(r.peak_bytes_per_s)) drawn_roofs.push_back(&r);
  }

  // ---- axis ranges, in whole decades ----
  double x_lo = std::numeric_limits<double>::infinity(), x_hi = 0;
  double y_lo = std::numeric_limits<double>::infinity(), y_hi = 0;
  for (const roof_line* r : drawn_roofs) {
    const double ridge = r->peak_flops_per_s / r->peak_bytes_per_s;
    x_lo = std::min(x_lo, ridge / 100);
    x_hi = std::max(x_hi, ridge * 10);
    y_hi = std::max(y_hi, r->peak_flops_per_s);
  }
  for (const roof_point& p : points) {
    if (positive_finite(p.intensity)) {
      x_lo = std::min(x_lo, p.intensity);
      x_hi = std::max(x_hi, p.intensity);
    }
    if (positive_finite(p.flops_per_s)) {
      y_lo = std::min(y_lo, p.flops_per_s);
      y_hi = std::max(y_hi, p.flops_per_s);
    }
  }
  if (!(x_hi > 0)) { x_lo = 0.01; x_hi = 1000; }
  if (x_hi <= x_lo) { x_lo /= 10; x_hi *= 10; }
  for (const roof_line* r : drawn_roofs) y_lo = std::min(y_lo, x_lo * r->peak_bytes_per_s);  // slant's start
  if (!(y_hi > 0)) { y_lo = 1e9; y_hi = 1e15; }
  if (!std::isfinite(y_lo) || y_lo <= 0) y_lo = y_hi / 1e6;
  if (y_hi <= y_lo) { y_lo /= 10; y_hi *= 10; }
  int x_lo_decade = static_cast<int>(std::floor(std::log10(x_lo) + 1e-9));
  int x_hi_decade = static_cast<int>(std::ceil(std::log10(x_hi) - 1e-9));
  int y_hi_decade = static_cast<int>(std::ceil(std::log10(y_hi) - 1e-9));
  int y_lo_decade = static_cast<int>(std::floor(std::log10(y_lo) + 1e-9));
  y_lo_decade = std::max(y_lo_decade, y_hi_decade - 8);  // keep decades readable; lower points clamp
  if (positive_finite(options.min_intensity)) x_lo_decade = static_cast<int>(std::floor(std::log10(options.min_intensity)));
  if (positive_finite(options.max_intensity)) x_hi_decade = static_cast<int>(std::ceil(std::log10(options.max_intensity)));
  if (positive_finite(options.min_flops_per_s)) y_lo_decade = static_cast<int>(std::floor(std::log10(options.min_flops_per_s)));
  if (positive_finite(options.max_flops_per_s)) y_hi_decade = static_cast<int>(std::ceil(std::log10(options.max_flops_per_s)));
  if (x_hi_decade <= x_lo_decade) x_hi_decade = x_lo_decade + 1;
  if (y_hi_decade <= y_lo_decade) y_hi_decade = y_lo_decade + 1;

  // ---- geometry ----
  const double width = std::max(480, options.width_px);
  const double height = std::max(320, options.height_px);
  const double left = 120, top = 48, right = 270, bottom = 64;  // right margin holds the legend
  const double plot_w = width - left - right, plot_h = height - top - bottom;
  const double lx0 = x_lo_decade, lx1 = x_hi_decade, ly0 = y_lo_decade, ly1 = y_hi_decade;
  const auto px = [&](double intensity) { return left + (std::log10(intensity) - lx0) / (lx1 - lx0) * plot_w; };
  const auto py = [&](double flops) { return top + (ly1 - std::log10(flops)) / (ly1 - ly0) * plot_h; };
  const double x_min = std::pow(10.0, lx0), x_max = std::pow(10.0, lx1);
  const double y_min = std::pow(10.0, ly0), y_max = std::pow(10.0, ly1);

  std::string s;
  s.reserve(8192);
  s += "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"kscope-roofline\" width=\"" + svg_number(width) +
       "\" height=\"" + svg_number(height) + "\" viewBox=\"0 0 " + svg_number(width) + " " + svg_number(height) +
       "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"12\">\n";
  s += "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n";
  s += "<text x=\"" + svg_number(left) + "\" y=\"28\" font-size=\"16\" font-weight=\"bold\">";
  append_xml_escaped(s, options.title);
  s += "</text>\n";

  // ---- grid, ticks, labels ----
  s += "<g class=\"kscope-axes\" stroke=\"#dddddd\" stroke-width=\"1\">\n";
  for (int d = x_lo_decade; d <= x_hi_decade; ++d) {
    const double x = px(std::pow(10.0, d));
    s += "<line x1=\"" + svg_number(x) + "\" y1=\"" + svg_number(top) + "\" x2=\"" + svg_number(x) + "\" y2=\"" +
         svg_number(top + plot_h) + "\"/>\n";
  }
  for (int d = y_lo_decade; d <= y_hi_decade; ++d) {
    const double y = py(std::pow(10.0, d));
    s += "<line x1=\"" + svg_number(left) + "\" y1=\"" + svg_number(y) + "\" x2=\"" + svg_number(left + plot_w) +
         "\" y2=\"" + svg_number(y) + "\"/>\n";
  }
  s += "</g>\n<g class=\"kscope-ticks\" fill=\"#333333\">\n";
  for (int d = x_lo_decade; d <= x_hi_decade; ++d) {
    const double x = px(std::pow(10.0, d));
    s += "<line x1=\"" + svg_number(x) + "\" y1=\"" + svg_number(top + plot_h) + "\" x2=\"" + svg_number(x) +
         "\" y2=\"" + svg_number(top + plot_h + 5) + "\" stroke=\"#333333\"/>\n";
    s += "<text x=\"" + svg_number(x) + "\" y=\"" + svg_number(top + plot_h + 19) + "\" text-anchor=\"middle\">" +
         detail::decade_label(d) + "</text>\n";
  }
  for (int d = y_lo_decade; d <= y_hi_decade; ++d) {
    const double y = py(std::pow(10.0, d));
    s += "<line x1=\"" + svg_number(left - 5) + "\" y1=\"" + svg_number(y) + "\" x2=\"" + svg_number(left) +
         "\" y2=\"" + svg_number(y) + "\" stroke=\"#333333\"/>\n";
    s += "<text x=\"" + svg_number(left - 8) + "\" y=\"" + svg_number(y + 4) + "\" text-anchor=\"end\">";
    append_xml_escaped(s, detail::decade_label(d, "FLOP/s"));
    s += "</text>\n";
  }
  s += "</g>\n";
  s += "<rect x=\"" + svg_number(left) + "\" y=\"" + svg_number(top) + "\" width=\"" + svg_number(plot_w) +
       "\" height=\"" + svg_number(plot_h) + "\" fill=\"none\" stroke=\"#333333\"/>\n";
  s += "<text x=\"" + svg_number(left + plot_w / 2) + "\" y=\"" + svg_number(height - 18) +
       "\" text-anchor=\"middle\">arithmetic intensity (FLOP/byte)</text>\n";
  s += "<text transform=\"translate(16 " + svg_number(top + plot_h / 2) +
       ") rotate(-90)\" text-anchor=\"middle\">performance (FLOP/s)</text>\n";

  // ---- roofs ----
  std::vector<std::string> families;  // colour index = first appearance of a roof family
  const auto colour_of = [&](const roof_line& r) {
    const std::string family(detail::roof_family(r.label));
    auto it = std::find(families.begin(), families.end(), family);
    if (it == families.end()) { families.push_back(family); it = families.end() - 1; }
    return detail::roof_colour(static_cast<std::size_t>(it - families.begin()));
  };
  s += "<g class=\"kscope-roofs\" fill=\"none\" stroke-width=\"2\">\n";
  for (const roof_line* r : drawn_roofs) {
    const double ridge = r->peak_flops_per_s / r->peak_bytes_per_s;
    // The slant from where it enters the plot (left edge or bottom edge) to the ridge,
    // then the flat roof to the right edge; each clipped to the plot.
    const double x_start = std::max(x_min, y_min / r->peak_bytes_per_s);
    std::string path;
    if (x_start < std::min(ridge, x_max)) {
      const double x_end = std::min(ridge, x_max);
      path += "M" + svg_number(px(x_start)) + " " + svg_number(py(std::min(y_max, x_start * r->peak_bytes_per_s))) +
              " L" + svg_number(px(x_end)) + " " + svg_number(py(std::min(y_max, x_end * r->peak_bytes_per_s)));
    }
    if (ridge < x_max && r->peak_flops_per_s <= y_max && r->peak_flops_per_s >= y_min) {
      const double x_flat = std::max(ridge, x_min);
      path += (path.empty() ? "M" : " L") + svg_number(px(x_flat)) + " " + svg_number(py(r->peak_flops_per_s)) +
              " L" + svg_number(px(x_max)) + " " + svg_number(py(r->peak_flops_per_s));
    }
    const char* colour = colour_of(*r);
    s += "<path class=\"kscope-roof\" d=\"" + path + "\" stroke=\"" + colour + "\"" +
         (r->measured ? " stroke-dasharray=\"7 4\"" : "") + "><title>";
    append_xml_escaped(s, r->label + ": " + detail::format_si(r->peak_flops_per_s, "FLOP/s") + ", " +
                              detail::format_si(r->peak_bytes_per_s, "B/s") + ", ridge " +
                              detail::format_si(ridge, "FLOP/B"));
    s += "</title></path>\n";
  }
  s += "</g>\n";

  // ---- points ----
  std::vector<const roof_point*> not_drawn;
  std::vector<std::array<double, 4>> label_boxes;  // x0, y0, x1, y1 of the labels placed
  s += "<g class=\"kscope-points\">\n";
  for (const roof_point& p : points) {
    if (std::isnan(p.intensity) || std::isnan(p.flops_per_s) || p.intensity < 0 || p.flops_per_s < 0) {
      not_drawn.push_back(&p);
      continue;
    }
    // Clamp what log axes cannot show to the plot's edge and say so.
    const bool off_scale = !(p.intensity >= x_min && p.intensity <= x_max && p.flops_per_s >= y_min &&
                             p.flops_per_s <= y_max);
    const double intensity = std::clamp(p.intensity, x_min, x_max);
    const double flops = std::clamp(p.flops_per_s, y_min, y_max);
    const double x = px(intensity), y = py(flops);
    const char* colour = options.point_limiters ? detail::limiter_colour(p.limiter) : "#333333";
    s += "<g class=\"kscope-point\"";
    if (options.point_limiters) s += std::string(" data-limiter=\"") + to_string(p.limiter) + "\"";
    s += "><title>";
    append_xml_escaped(s, p.label + ": " + detail::format_si(p.intensity, "FLOP/B") + ", " +
                              detail::format_si(p.flops_per_s, "FLOP/s") +
                              (options.point_limiters ? ", " + std::string(to_string(p.limiter)) + "-bound" : "") +
                              (off_scale ? " (off scale: drawn at the plot edge)" : ""));
    s += "</title><circle cx=\"" + svg_number(x) + "\" cy=\"" + svg_number(y) + "\" r=\"5\" fill=\"" +
         (off_scale ? std::string("#ffffff") : std::string(colour)) + "\" stroke=\"" + colour +
         "\" stroke-width=\"2\"/>";
    // Label below the point (points sit under their roof, so below is usually free),
    // above it at the bottom edge; to the left near the right edge.
    const bool flip = x > left + plot_w * 0.8;
    double label_y = y + 17 > top + plot_h - 2 ? y - 8 : y + 17;
    // Points close together (a scope's declared and measured points, its DRAM and L2
    // levels) would print their labels over each other: a label that overlaps one placed
    // before moves down a line, or up near the bottom edge (about 7 px a character).
    const double label_w = 7.0 * static_cast<double>(p.label.size());
    const double label_x0 = flip ? x - 8 - label_w : x + 8, label_x1 = label_x0 + label_w;
    const double line_step = label_y < y ? -14 : 14;
    for (int attempt = 0; attempt < 8; ++attempt) {
      const bool overlaps = std::any_of(label_boxes.begin(), label_boxes.end(), [&](const std::array<double, 4>& b) {
        return label_x0 < b[2] && b[0] < label_x1 && label_y - 11 < b[3] && b[1] < label_y + 2;
      });
      if (!overlaps) break;
      label_y += line_step;
    }
    label_boxes.push_back({label_x0, label_y - 11, label_x1, label_y + 2});
    s += "<text x=\"" + svg_number(flip ? x - 8 : x + 8) + "\" y=\"" + svg_number(label_y) + "\" text-anchor=\"" +
         (flip ? "end" : "start") + "\" fill=\"#222222\">";
    append_xml_escaped(s, p.label);
    s += "</text></g>\n";
  }
  s += "</g>\n";

  // ---- legend ----
  double ly = top + 6;
  const double lx = left + plot_w + 18;
  s += "<g class=\"kscope-legend\">\n";
  s += "<text x=\"" + svg_number(lx) + "\" y=\"" + svg_number(ly + 6) + "\" font-weight=\"bold\">roofs</text>\n";
  ly += 22;
  for (const roof_line* r : drawn_roofs) {
    const char* colour = colour_of(*r);
    s += "<line x1=\"" + svg_number(lx) + "\" y1=\"" + svg_number(ly) + "\" x2=\"" + svg_number(lx + 26) + "\" y2=\"" +
         svg_number(ly) + "\" stroke=\"" + colour + "\" stroke-width=\"2\"" +
         (r->measured ? " stroke-dasharray=\"7 4\"" : "") + "/>";
    s += "<text x=\"" + svg_number(lx + 32) + "\" y=\"" + svg_number(ly + 4) + "\">";
    append_xml_escaped(s, r->label);
    s += "</text>\n<text x=\"" + svg_number(lx + 32) + "\" y=\"" + svg_number(ly + 18) +
         "\" font-size=\"11\" fill=\"#555555\">";
    append_xml_escaped(s, detail::format_si(r->peak_flops_per_s, "FLOP/s") + ", " +
                              detail::format_si(r->peak_bytes_per_s, "B/s"));
    s += "</text>\n";
    ly += 36;
  }
  if (drawn_roofs.empty()) {
    s += "<text x=\"" + svg_number(lx) + "\" y=\"" + svg_number(ly + 4) + "\" fill=\"#7F7F7F\">none known</text>\n";
    ly += 18;
  }
  s += "<text x=\"" + svg_number(lx) + "\" y=\"" + svg_number(ly + 4) +
       "\" fill=\"#555555\" font-size=\"11\">solid: theoretical, dashed: measured</text>\n";
  ly += 30;
  s += "<text x=\"" + svg_number(lx) + "\" y=\"" + svg_number(ly) + "\" font-weight=\"bold\">points</text>\n";
  ly += 18;
  for (bound b : {bound::memory, bound::compute, bound::latency}) {
    if (!options.point_limiters) break;
    s += "<circle cx=\"" + svg_number(lx + 13) + "\" cy=\"" + svg_number(ly) + "\" r=\"5\" fill=\"" +
         detail::limiter_colour(b) + "\"/>";
    s += "<text x=\"" + svg_number(lx + 32) + "\" y=\"" + svg_number(ly + 4) + "\">" + to_string(b) + "-bound</text>\n";
    ly += 18;
  }
  if (!options.point_limiters) {
    s += "<circle cx=\"" + svg_number(lx + 13) + "\" cy=\"" + svg_number(ly) + "\" r=\"5\" fill=\"#333333\"/>";
    s += "<text x=\"" + svg_number(lx + 32) + "\" y=\"" + svg_number(ly + 4) + "\">a scope's median call</text>\n";
    ly += 18;
  }
  s += "<circle cx=\"" + svg_number(lx + 13) + "\" cy=\"" + svg_number(ly) +
       "\" r=\"5\" fill=\"#ffffff\" stroke=\"#7F7F7F\" stroke-width=\"2\"/>";
  s += "<text x=\"" + svg_number(lx + 32) + "\" y=\"" + svg_number(ly + 4) + "\">off scale (at the edge)</text>\n";
  ly += 18;
  if (!not_drawn.empty()) {
    ly += 12;
    s += "<text class=\"kscope-note\" x=\"" + svg_number(lx) + "\" y=\"" + svg_number(ly) +
         "\" fill=\"#7F7F7F\">not drawn (NaN):</text>\n";
    for (const roof_point* p : not_drawn) {
      ly += 16;
      s += "<text class=\"kscope-note\" x=\"" + svg_number(lx + 8) + "\" y=\"" + svg_number(ly) +
           "\" fill=\"#7F7F7F\">";
      append_xml_escaped(s, p->label);
      s += "</text>\n";
    }
  }
  s += "</g>\n</svg>\n";
  return s;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// ---- sweeps: what each point measured, against the swept parameter ----------------------

// What sweep_svg() draws: which axis runs along x, and which metrics share a panel (a
// panel has one y axis, so put metrics of one unit and scale together).
//   kscope::sweep_plot_options o;
//   o.title = "serving: batch size";
//   o.panels = {{"ttft_p50", "ttft_p99"}, {"tpot_p50", "tpot_p99"}, {"tokens_per_s"}, {"requests_per_s"}};
struct sweep_plot_options {
  std::string title = "Sweep";
  std::string x_axis;                            // "": the first axis whose value changes
  std::vector<std::vector<std::string>> panels;  // metric names; empty: one panel per unit
  int columns = 2;                               // panels per row
  int width_px = 1100;
  int panel_height_px = 260;
};

namespace detail {

// A step of 1, 2, 2.5 or 5 x 10^k giving about `ticks` intervals over `range`.
KSCOPE_DECL double sweep_nice_step(double range, int ticks);

// A linear tick label with just the decimals its step needs: "7.5", "0.25", "12.5k", "3M";
// the prefix follows the axis' largest tick, so every tick of an axis has the same one.
KSCOPE_DECL std::string sweep_tick_text(double v, double step, double largest);

KSCOPE_DECL std::string sweep_value_text(const sweep_value& v, const std::string& unit);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL double sweep_nice_step(double range, int ticks) {
  const double raw = range / ticks;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 2.5, 5.0})
    if (m * magnitude >= raw * (1 - 1e-9)) return m * magnitude;
  return 10 * magnitude;
}

KSCOPE_DECL std::string sweep_tick_text(double v, double step, double largest) {
  double scale = 1;
  const char* suffix = "";
  if (largest >= 1e6 && step >= 1e5) scale = 1e6, suffix = "M";
  else if (largest >= 1e4 && step >= 100) scale = 1e3, suffix = "k";
  const double s = step / scale;
  const int exponent = static_cast<int>(std::floor(std::log10(s) + 1e-9));
  const double mantissa = s / std::pow(10.0, exponent);
  const int decimals = std::clamp(-exponent + (std::fabs(mantissa - 2.5) < 1e-6 ? 1 : 0), 0, 9);
  if (std::fabs(v) < step * 1e-9) return "0";  // not "-0" or "0k"
  return format_fixed(v / scale, decimals) + suffix;
}

KSCOPE_DECL std::string sweep_value_text(const sweep_value& v, const std::string& unit) {
  std::string s = sweep_cell(v);
  if (!unit.empty()) s += " " + unit;
  if (v.samples > 0) s += ", " + std::to_string(v.samples) + " samples";
  return s;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail

// A standalone SVG of a sweep's results: one panel per group of metrics, the swept axis
// along x, one line per metric with a marker per point and the confidence interval as a
// whisker. A value the results do not have (sweep_value::missing) is never drawn as a
// number: a hollow square sits on the x axis at its point, its tooltip gives the reason,
// and a note under the panels lists the points without a value. The x axis is logarithmic
// when every value is positive and they span 8x or more (a geometric sweep), linear for
// other numbers, and categorical for strings; its ticks are the swept values. The y axis
// starts at 0 unless the panel's values span 50x or more, then it is logarithmic (queueing
// latencies). Every drawn value is exactly one <g class="kscope-sweep-point">, every
// missing one a <g class="kscope-sweep-missing">; all text is escaped for XML.
//   std::string svg = kscope::sweep_svg(results, options);
//   (void)kscope::write_text_file("sweep.svg", svg);
[[nodiscard]] KSCOPE_DECL std::string sweep_svg(const sweep_results& results, const sweep_plot_options& options = {});

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string sweep_svg(const sweep_results& results, const sweep_plot_options& options) {
  using detail::append_xml_escaped;
  using detail::svg_number;
  std::vector<std::string> notes;

  // ---- x: which axis, and where each row sits ----
  const std::vector<std::string> axes = results.axis_names();
  std::string x_axis = options.x_axis;
  if (!x_axis.empty() && std::find(axes.begin(), axes.end(), x_axis) == axes.end()) {
    notes.push_back("no axis '" + x_axis + "' in these results");
    x_axis.clear();
  }
  if (x_axis.empty() && !axes.empty()) x_axis = results.varying_axes().front();
  bool numeric = !x_axis.empty();
  for (const sweep_row& r : results.rows)
    numeric = numeric && r.point.has(x_axis) && !r.point[x_axis].is_text() && std::isfinite(r.point[x_axis].as_real());
  bool log_x = false;
  double x_lo = 0, x_hi = 1;
  std::vector<double> x_of_row;  // axis coordinate (log10 of the value on a log axis)
  std::vector<std::pair<double, std::string>> x_ticks;
  if (numeric && !results.rows.empty()) {
    double lo = std::numeric_limits<double>::infinity(), hi = -lo;
    for (const sweep_row& r : results.rows) {
      lo = std::min(lo, r.point[x_axis].as_real());
      hi = std::max(hi, r.point[x_axis].as_real());
    }
    log_x = lo > 0 && hi / lo >= 8;
    for (const sweep_row& r : results.rows) {
      const double v = r.point[x_axis].as_real();
      x_of_row.push_back(log_x ? std::log10(v) : v);
      if (std::none_of(x_ticks.begin(), x_ticks.end(), [&](const auto& t) { return t.first == x_of_row.back(); }))
        x_ticks.emplace_back(x_of_row.back(), r.point[x_axis].to_string());
    }
    x_lo = log_x ? std::log10(lo) : lo;
    x_hi = log_x ? std::log10(hi) : hi;
  } else {
    std::vector<std::string> categories;
    for (const sweep_row& r : results.rows) {
      const std::string text = x_axis.empty() ? r.point.label() : sweep_results::param_text(r.point, x_axis);
      auto it = std::find(categories.begin(), categories.end(), text);
      if (it == categories.end()) {
        categories.push_back(text);
        it = categories.end() - 1;
        x_ticks.emplace_back(static_cast<double>(categories.size() - 1), text);
      }
      x_of_row.push_back(static_cast<double>(it - categories.begin()));
    }
    x_lo = 0;
    x_hi = categories.empty() ? 1 : static_cast<double>(categories.size() - 1);
  }
  if (x_hi <= x_lo) x_lo -= 1, x_hi += 1;
  std::sort(x_ticks.begin(), x_ticks.end());
  const std::size_t tick_every = x_ticks.size() > 12 ? (x_ticks.size() + 11) / 12 : 1;

  // ---- panels ----
  std::vector<std::vector<std::size_t>> panels;  // metric indices
  const auto metric_index = [&](const std::string& name) -> std::size_t {
    for (std::size_t i = 0; i < results.metrics.size(); ++i)
      if (results.metrics[i].name == name) return i;
    return results.metrics.size();
  };
  if (!options.panels.empty()) {
    for (const std::vector<std::string>& names : options.panels) {
      std::vector<std::size_t> panel;
      for (const std::string& name : names) {
        const std::size_t i = metric_index(name);
        if (i < results.metrics.size()) panel.push_back(i);
        else notes.push_back("no metric '" + name + "' in these results");
      }
      if (!panel.empty()) panels.push_back(std::move(panel));
    }
  } else {
    std::vector<std::string> units;
    for (std::size_t i = 0; i < results.metrics.size(); ++i) {
      auto it = std::find(units.begin(), units.end(), results.metrics[i].unit);
      if (it == units.end()) {
        units.push_back(results.metrics[i].unit);
        panels.emplace_back();
        it = units.end() - 1;
      }
      panels[static_cast<std::size_t>(it - units.begin())].push_back(i);
    }
  }

  // Points without a value, per metric: the note under the panels.
  for (const std::vector<std::size_t>& panel : panels) {
    for (std::size_t m : panel) {
      std::string where;
      for (std::size_t r = 0; r < results.rows.size(); ++r) {
        if (sweep_results::value_of(results.rows[r], m).known()) continue;
        where += (where.empty() ? "" : ", ") + (x_axis.empty() ? results.rows[r].point.label()
                                                               : sweep_results::param_text(results.rows[r].point, x_axis));
      }
      if (!where.empty())
        notes.push_back(results.metrics[m].display() + ": no value at " + (x_axis.empty() ? "" : x_axis + " = ") +
                        where + " (the table says why)");
    }
  }

  // ---- geometry ----
  const int columns = std::max(1, std::min<int>(options.columns, static_cast<int>(std::max<std::size_t>(panels.size(), 1))));
  const std::size_t panel_rows = (std::max<std::size_t>(panels.size(), 1) + columns - 1) / columns;
  const double width = std::max(480, options.width_px);
  const double cell_w = width / columns, cell_h = std::max(180, options.panel_height_px);
  const double top = 44, note_h = 16;
  const double height = top + cell_h * static_cast<double>(panel_rows) + 12 + note_h * static_cast<double>(notes.size());
  const double pad_left = 76, pad_right = 22, pad_top = 40, pad_bottom = 48;

  std::string s;
  s.reserve(16384);
  s += "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"kscope-sweep\" width=\"" + svg_number(width) +
       "\" height=\"" + svg_number(height) + "\" viewBox=\"0 0 " + svg_number(width) + " " + svg_number(height) +
       "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"12\">\n";
  s += "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n";
  s += "<text x=\"16\" y=\"28\" font-size=\"16\" font-weight=\"bold\">";
  append_xml_escaped(s, options.title);
  s += "</text>\n";
  if (panels.empty() || results.rows.empty()) {
    s += "<text class=\"kscope-note\" x=\"16\" y=\"" + svg_number(top + 20) + "\" fill=\"#7F7F7F\">no data</text>\n";
  }

  for (std::size_t p = 0; p < panels.size(); ++p) {
    const std::vector<std::size_t>& panel = panels[p];
    const double cx = cell_w * static_cast<double>(p % static_cast<std::size_t>(columns));
    const double cy = top + cell_h * static_cast<double>(p / static_cast<std::size_t>(columns));
    const double left = cx + pad_left, right = cx + cell_w - pad_right;
    const double plot_top = cy + pad_top, bottom = cy + cell_h - pad_bottom;

    // y range over the values and their intervals.
    double lo = std::numeric_limits<double>::infinity(), hi = -lo;
    for (std::size_t m : panel) {
      for (const sweep_row& r : results.rows) {
        const sweep_value& v = sweep_results::value_of(r, m);
        if (!v.known()) continue;
        for (double y : {v.value, v.ci.lo, v.ci.hi}) {
          if (!std::isfinite(y)) continue;
          lo = std::min(lo, y);
          hi = std::max(hi, y);
        }
      }
    }
    const bool any = std::isfinite(lo);
    const bool log_y = any && lo > 0 && hi / lo >= 50;
    double y0 = 0, y1 = 1, step = 0.25;
    if (log_y) {
      y0 = std::floor(std::log10(lo) + 1e-9);
      y1 = std::ceil(std::log10(hi) - 1e-9);
      if (y1 <= y0) y1 = y0 + 1;
    } else if (any) {
      y0 = std::min(0.0, lo);
      y1 = std::max(0.0, hi);
      if (y1 <= y0) y1 = y0 + 1;
      step = detail::sweep_nice_step(y1 - y0, 4);
      y0 = std::floor(y0 / step + 1e-9) * step;
      y1 = std::ceil(y1 / step - 1e-9) * step;
      if (y1 <= y0) y1 = y0 + step;
    }
    const double inset = 0.05 * (right - left);  // keeps the first and last markers off the frame
    const auto px = [&](double x) { return left + inset + (x - x_lo) / (x_hi - x_lo) * (right - left - 2 * inset); };
    const auto py = [&](double y) {
      const double t = log_y ? std::log10(y) : y;
      return bottom - (t - y0) / (y1 - y0) * (bottom - plot_top);
    };

    s += "<g class=\"kscope-sweep-panel\">\n";
    // Frame, grid and y ticks.
    s += "<rect x=\"" + svg_number(left) + "\" y=\"" + svg_number(plot_top) + "\" width=\"" + svg_number(right - left) +
         "\" height=\"" + svg_number(bottom - plot_top) + "\" fill=\"none\" stroke=\"#333333\"/>\n";
    std::vector<std::pair<double, std::string>> y_ticks;
    if (log_y) {
      for (int d = static_cast<int>(y0); d <= static_cast<int>(y1); ++d)
        y_ticks.emplace_back(std::pow(10.0, d), detail::decade_label(d));
    } else {
      const double largest = std::max(std::fabs(y0), std::fabs(y1));
      for (double y = y0; y <= y1 + step * 1e-6; y += step)
        y_ticks.emplace_back(y, detail::sweep_tick_text(y, step, largest));
    }
    for (const auto& [y, text] : y_ticks) {
      const double yy = py(y);
      s += "<line x1=\"" + svg_number(left) + "\" y1=\"" + svg_number(yy) + "\" x2=\"" + svg_number(right) +
           "\" y2=\"" + svg_number(yy) + "\" stroke=\"#e5e5e5\"/>";
      s += "<text x=\"" + svg_number(left - 6) + "\" y=\"" + svg_number(yy + 4) + "\" text-anchor=\"end\" fill=\"#333333\">";
      append_xml_escaped(s, text);
      s += "</text>\n";
    }
    for (std::size_t t = 0; t < x_ticks.size(); t += tick_every) {
      const double xx = px(x_ticks[t].first);
      s += "<line x1=\"" + svg_number(xx) + "\" y1=\"" + svg_number(bottom) + "\" x2=\"" + svg_number(xx) +
           "\" y2=\"" + svg_number(bottom + 5) + "\" stroke=\"#333333\"/>";
      s += "<text x=\"" + svg_number(xx) + "\" y=\"" + svg_number(bottom + 18) + "\" text-anchor=\"middle\" fill=\"#333333\">";
      append_xml_escaped(s, x_ticks[t].second);
      s += "</text>\n";
    }
    s += "<text x=\"" + svg_number((left + right) / 2) + "\" y=\"" + svg_number(cy + cell_h - 10) +
         "\" text-anchor=\"middle\">";
    append_xml_escaped(s, x_axis.empty() ? std::string("point") : x_axis + (log_x ? " (log scale)" : ""));
    s += "</text>\n";
    const std::string unit = results.metrics[panel.front()].unit;
    s += "<text transform=\"translate(" + svg_number(cx + 16) + " " + svg_number((plot_top + bottom) / 2) +
         ") rotate(-90)\" text-anchor=\"middle\">";
    append_xml_escaped(s, (unit.empty() ? std::string("count") : unit) + (log_y ? " (log scale)" : ""));
    s += "</text>\n";

    // Legend on the panel's first line: a swatch and the label of each metric.
    double lx = left;
    for (std::size_t k = 0; k < panel.size(); ++k) {
      const sweep_metric& m = results.metrics[panel[k]];
      const char* colour = detail::roof_colour(k);
      s += "<line x1=\"" + svg_number(lx) + "\" y1=\"" + svg_number(cy + 18) + "\" x2=\"" + svg_number(lx + 22) +
           "\" y2=\"" + svg_number(cy + 18) + "\" stroke=\"" + colour + "\" stroke-width=\"2\"/>";
      s += "<circle cx=\"" + svg_number(lx + 11) + "\" cy=\"" + svg_number(cy + 18) + "\" r=\"3.5\" fill=\"" + colour + "\"/>";
      s += "<text x=\"" + svg_number(lx + 28) + "\" y=\"" + svg_number(cy + 22) + "\">";
      const std::string label = m.display() + (m.unit.empty() ? "" : " (" + m.unit + ")");
      append_xml_escaped(s, label);
      s += "</text>\n";
      lx += 44 + 7.0 * static_cast<double>(label.size());
    }

    // Series: the line through the known values in x order, then one group per value.
    for (std::size_t k = 0; k < panel.size(); ++k) {
      const std::size_t m = panel[k];
      const sweep_metric& metric = results.metrics[m];
      const char* colour = detail::roof_colour(k);
      std::vector<std::size_t> order(results.rows.size());
      for (std::size_t r = 0; r < order.size(); ++r) order[r] = r;
      std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return x_of_row[a] < x_of_row[b]; });
      std::string path;
      bool pen_down = false;
      for (std::size_t r : order) {
        const sweep_value& v = sweep_results::value_of(results.rows[r], m);
        if (!v.known()) {
          pen_down = false;  // a gap: no line across a point without a value
          continue;
        }
        path += (pen_down ? " L" : (path.empty() ? "M" : " M")) + svg_number(px(x_of_row[r])) + " " +
                svg_number(py(v.value));
        pen_down = true;
      }
      if (!path.empty())
        s += "<path class=\"kscope-sweep-line\" d=\"" + path + "\" fill=\"none\" stroke=\"" + colour +
             "\" stroke-width=\"2\"/>\n";
      for (std::size_t r : order) {
        const sweep_value& v = sweep_results::value_of(results.rows[r], m);
        const double xx = px(x_of_row[r]);
        const std::string where = metric.display() + " at " + results.short_label(results.rows[r]) + ": ";
        if (!v.known()) {
          s += "<g class=\"kscope-sweep-missing\"><title>";
          append_xml_escaped(s, where + "no value: " + v.missing);
          s += "</title><rect x=\"" + svg_number(xx - 4 + 3.0 * static_cast<double>(k)) + "\" y=\"" +
               svg_number(bottom - 10) + "\" width=\"8\" height=\"8\" fill=\"#ffffff\" stroke=\"" + colour +
               "\" stroke-width=\"1.5\"/></g>\n";
          continue;
        }
        s += "<g class=\"kscope-sweep-point\"><title>";
        append_xml_escaped(s, where + detail::sweep_value_text(v, metric.unit));
        s += "</title>";
        if (std::isfinite(v.ci.lo) && std::isfinite(v.ci.hi)) {
          const double ylo = py(v.ci.lo), yhi = py(v.ci.hi);
          s += "<path class=\"kscope-ci\" d=\"M" + svg_number(xx) + " " + svg_number(ylo) + " L" + svg_number(xx) + " " +
               svg_number(yhi) + " M" + svg_number(xx - 4) + " " + svg_number(ylo) + " L" + svg_number(xx + 4) + " " +
               svg_number(ylo) + " M" + svg_number(xx - 4) + " " + svg_number(yhi) + " L" + svg_number(xx + 4) + " " +
               svg_number(yhi) + "\" stroke=\"" + colour + "\" stroke-width=\"1.2\" fill=\"none\"/>";
        }
        s += "<circle cx=\"" + svg_number(xx) + "\" cy=\"" + svg_number(py(v.value)) + "\" r=\"4\" fill=\"" + colour +
             "\"/></g>\n";
      }
    }
    s += "</g>\n";
  }

  // ---- notes ----
  double ny = top + cell_h * static_cast<double>(panel_rows) + 12;
  for (const std::string& n : notes) {
    s += "<text class=\"kscope-note\" x=\"16\" y=\"" + svg_number(ny) + "\" fill=\"#555555\" font-size=\"11\">";
    append_xml_escaped(s, n);
    s += "</text>\n";
    ny += note_h;
  }
  s += "</svg>\n";
  return s;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// ---- the report page's pictures: bars, latency distributions, step timelines -------------
//
// Each is one <svg> with a known class (kscope-bars or the caller's, kscope-latency,
// kscope-step-timeline), no script and no external resource, and a bounded number of
// marks whatever the input: a large run gives a picture of the same size as a small one,
// with what was left out said in a note inside the picture. Times are nanoseconds.

// One bar of bar_chart_svg(): a label, a value (drawn from 0), the text after the bar.
//   kscope::chart_bar b{"step/decode", 51.4e6, "51.4 ms (79%)", ""};
struct chart_bar {
  std::string label;
  double value = 0;
  std::string value_text;
  std::string tooltip;  // "": the label and the value text
};

//   kscope::bar_chart_options o;
//   o.title = "GPU time per scope";
//   o.css_class = "kscope-gpu-bars";
struct bar_chart_options {
  std::string title;
  std::string css_class = "kscope-bars";
  std::string note;           // a line under the bars (what the values are)
  int width_px = 900;
  std::size_t max_bars = 24;  // more are not drawn; the note under the bars counts them
};

// Horizontal bars, largest value first as given (the caller orders them), on a linear
// axis from 0 to the largest value.
//   std::string svg = kscope::bar_chart_svg({{"decode", 51.4e6, "51.4 ms", ""}}, o);
[[nodiscard]] KSCOPE_DECL std::string bar_chart_svg(const std::vector<chart_bar>& bars,
                                                   const bar_chart_options& options = {});

// One latency distribution of latency_svg(): the percentiles the report keeps of a range
// (the samples themselves are not in a report). NaN: unknown, not drawn.
//   kscope::latency_row r{"request", 400, s.min, s.median, s.median_ci.lo, s.median_ci.hi,
//                         s.p90, s.p99, s.mean, s.max};
struct latency_row {
  std::string label;
  std::uint64_t count = 0;
  double min_ns = std::numeric_limits<double>::quiet_NaN();
  double p50_ns = std::numeric_limits<double>::quiet_NaN();
  double p50_lo_ns = std::numeric_limits<double>::quiet_NaN();  // the p50's 95 % interval
  double p50_hi_ns = std::numeric_limits<double>::quiet_NaN();
  double p90_ns = std::numeric_limits<double>::quiet_NaN();
  double p99_ns = std::numeric_limits<double>::quiet_NaN();
  double mean_ns = std::numeric_limits<double>::quiet_NaN();
  double max_ns = std::numeric_limits<double>::quiet_NaN();
};

struct latency_chart_options {
  std::string title = "Latency distribution";
  int width_px = 900;
  std::size_t max_rows = 16;
};

// One row per distribution on a shared time axis (log when it spans more than a factor
// of 20): a line from min to max, a box from p50 to p90 and from p90 to p99, the p50's
// interval as a bracket, the mean as a diamond.
//   std::string svg = kscope::latency_svg(rows);
[[nodiscard]] KSCOPE_DECL std::string latency_svg(const std::vector<latency_row>& rows,
                                                 const latency_chart_options& options = {});

// A stretch of a step timeline's lane: from start_ns (0: the step's start) for ns.
struct timeline_span {
  std::string label;
  double start_ns = 0;
  double ns = 0;
  std::string tooltip;  // "": the label and the length
};

// One step of step_timeline_svg(): what the host ran (one span per scope) and when the
// GPU was busy (spans labelled by the scope that launched the work, so each shares its
// host span's colour); the rest of the GPU lane is idle.
//   kscope::step_timeline t{"p50 step", 2.0e6, {{"decode", 0, 1.5e6, ""}}, {{"decode", 1e5, 1.3e6, ""}}};
struct step_timeline {
  std::string label;
  double span_ns = 0;
  std::vector<timeline_span> host;
  std::vector<timeline_span> gpu;
};

struct timeline_options {
  std::string title = "Step timeline";
  std::string note;             // a line under the steps (how the spans were obtained)
  int width_px = 960;
  std::size_t max_steps = 4;
  std::size_t max_spans = 24;   // per lane; the shortest beyond it are not drawn (counted)
};

// The steps one under the other on one time scale (so a slow step is longer), each a host
// lane and a GPU lane with its busy share, a legend of the scopes' colours.
//   std::string svg = kscope::step_timeline_svg({p50, p99});
[[nodiscard]] KSCOPE_DECL std::string step_timeline_svg(const std::vector<step_timeline>& steps,
                                                       const timeline_options& options = {});

namespace detail {

// At most `max_chars` code points of `text`, "…" at the end when cut (never inside a
// UTF-8 sequence): labels in a picture have a fixed width; the full text is the tooltip.
KSCOPE_DECL std::string chart_label(std::string_view text, std::size_t max_chars);

// A time for an axis or a label: "0", "850 ns", "1.20 ms" (format_si's 3 digits).
KSCOPE_DECL std::string chart_time_text(double ns);

// The opening tag every report picture shares: its class, its size, the font.
KSCOPE_DECL std::string chart_open(const std::string& css_class, double width, double height);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string chart_label(std::string_view text, std::size_t max_chars) {
  std::size_t at = 0, chars = 0;
  while (at < text.size() && chars < max_chars) {
    at += std::max<std::size_t>(1, decode_utf8(text, at).length);
    ++chars;
  }
  if (at >= text.size()) return std::string(text);
  // One code point fewer, for the ellipsis.
  std::size_t cut = 0, kept = 0;
  while (cut < text.size() && kept + 1 < max_chars) {
    cut += std::max<std::size_t>(1, decode_utf8(text, cut).length);
    ++kept;
  }
  return std::string(text.substr(0, cut)) + "\xE2\x80\xA6";
}

KSCOPE_DECL std::string chart_time_text(double ns) {
  if (!std::isfinite(ns)) return "-";
  if (ns == 0) return "0";
  return format_si(ns * 1e-9, "s");
}

KSCOPE_DECL std::string chart_open(const std::string& css_class, double width, double height) {
  std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"";
  append_xml_escaped(s, css_class);
  s += "\" width=\"" + svg_number(width) + "\" height=\"" + svg_number(height) + "\" viewBox=\"0 0 " +
       svg_number(width) + " " + svg_number(height) +
       "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"12\">\n"
       "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n";
  return s;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string bar_chart_svg(const std::vector<chart_bar>& bars, const bar_chart_options& options) {
  using detail::append_xml_escaped;
  using detail::svg_number;
  const std::size_t shown = std::min(bars.size(), std::max<std::size_t>(1, options.max_bars));
  const std::size_t left_out = bars.size() - std::min(bars.size(), shown);
  double largest = 0;
  for (std::size_t i = 0; i < shown; ++i)
    if (std::isfinite(bars[i].value)) largest = std::max(largest, bars[i].value);
  const double width = std::max(480, options.width_px);
  const double label_w = 280, value_w = 150, row_h = 22, top = options.title.empty() ? 12 : 40;
  const double bar_x = label_w + 8, bar_w = width - bar_x - value_w;
  const std::size_t notes = (left_out > 0 ? 1 : 0) + (options.note.empty() ? 0 : 1) + (bars.empty() ? 1 : 0);
  const double height = top + row_h * static_cast<double>(shown) + 10 + 16 * static_cast<double>(notes);
  std::string s = detail::chart_open(options.css_class, width, height);
  if (!options.title.empty()) {
    s += "<text x=\"12\" y=\"26\" font-size=\"15\" font-weight=\"bold\">";
    append_xml_escaped(s, options.title);
    s += "</text>\n";
  }
  for (std::size_t i = 0; i < shown && !bars.empty(); ++i) {
    const chart_bar& b = bars[i];
    const double y = top + row_h * static_cast<double>(i);
    const double v = std::isfinite(b.value) && b.value > 0 ? b.value : 0;
    const double w = largest > 0 ? std::max(v > 0 ? 1.0 : 0.0, v / largest * bar_w) : 0;
    s += "<g class=\"kscope-bar\"><title>";
    append_xml_escaped(s, b.tooltip.empty() ? b.label + ": " + b.value_text : b.tooltip);
    s += "</title><text x=\"" + svg_number(label_w) + "\" y=\"" + svg_number(y + 15) + "\" text-anchor=\"end\">";
    append_xml_escaped(s, detail::chart_label(b.label, 40));
    s += "</text><rect x=\"" + svg_number(bar_x) + "\" y=\"" + svg_number(y + 4) + "\" width=\"" + svg_number(w) +
         "\" height=\"" + svg_number(row_h - 8) + "\" fill=\"" + detail::roof_colour(0) + "\"/>";
    s += "<text x=\"" + svg_number(bar_x + w + 6) + "\" y=\"" + svg_number(y + 15) + "\" fill=\"#333333\">";
    append_xml_escaped(s, b.value_text);
    s += "</text></g>\n";
  }
  double ny = top + row_h * static_cast<double>(shown) + 18;
  const auto note = [&](const std::string& text) {
    s += "<text class=\"kscope-note\" x=\"12\" y=\"" + svg_number(ny) + "\" fill=\"#555555\" font-size=\"11\">";
    append_xml_escaped(s, text);
    s += "</text>\n";
    ny += 16;
  };
  if (bars.empty()) note("no data");
  if (left_out > 0) note(std::to_string(left_out) + " more not drawn (the table lists them)");
  if (!options.note.empty()) note(options.note);
  s += "</svg>\n";
  return s;
}

KSCOPE_DECL std::string latency_svg(const std::vector<latency_row>& rows, const latency_chart_options& options) {
  using detail::append_xml_escaped;
  using detail::svg_number;
  const std::size_t shown = std::min(rows.size(), std::max<std::size_t>(1, options.max_rows));
  const std::size_t left_out = rows.size() - std::min(rows.size(), shown);
  double lo = std::numeric_limits<double>::infinity(), hi = 0;
  for (std::size_t i = 0; i < shown; ++i) {
    const latency_row& r = rows[i];
    for (double v : {r.min_ns, r.p50_ns, r.p50_lo_ns, r.p50_hi_ns, r.p90_ns, r.p99_ns, r.mean_ns, r.max_ns}) {
      if (!(v > 0) || !std::isfinite(v)) continue;
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
  }
  if (!(hi > 0)) { lo = 1e3; hi = 1e6; }
  const bool log_x = hi / lo > 20;
  double x0 = 0, x1 = 1, step = 1;
  if (log_x) {
    x0 = std::floor(std::log10(lo) + 1e-9);
    x1 = std::ceil(std::log10(hi) - 1e-9);
    if (x1 <= x0) x1 = x0 + 1;
  } else {
    step = detail::sweep_nice_step(hi, 5);
    x1 = std::ceil(hi / step - 1e-9) * step;
    if (!(x1 > 0)) x1 = step;
  }
  const double width = std::max(560, options.width_px);
  const double label_w = 220, right = 40, top = 64, row_h = 34;
  const double plot_x = label_w + 12, plot_w = width - plot_x - right;
  const double axis_y = top + row_h * static_cast<double>(std::max<std::size_t>(shown, 1));
  const double height = axis_y + 40 + (left_out > 0 ? 16 : 0);
  const auto px = [&](double ns) {
    const double t = log_x ? (std::log10(std::max(ns, std::pow(10.0, x0))) - x0) / (x1 - x0) : ns / x1;
    return plot_x + std::clamp(t, 0.0, 1.0) * plot_w;
  };
  std::string s = detail::chart_open("kscope-latency", width, height);
  s += "<text x=\"12\" y=\"26\" font-size=\"15\" font-weight=\"bold\">";
  append_xml_escaped(s, options.title);
  s += "</text>\n";
  // Legend on the second line: what each mark is.
  const char* const box = detail::roof_colour(5);
  const char* const tail = detail::roof_colour(1);
  const char* const ink = "#222222";
  s += "<g class=\"kscope-legend\" font-size=\"11\">"
       "<line x1=\"12\" y1=\"44\" x2=\"36\" y2=\"44\" stroke=\"#7F7F7F\"/><text x=\"40\" y=\"48\">min to max</text>"
       "<rect x=\"120\" y=\"38\" width=\"24\" height=\"12\" fill=\"" + std::string(box) +
       "\"/><text x=\"148\" y=\"48\">p50 to p90</text>"
       "<rect x=\"226\" y=\"38\" width=\"24\" height=\"12\" fill=\"" + std::string(tail) +
       "\"/><text x=\"254\" y=\"48\">p90 to p99</text>"
       "<line x1=\"344\" y1=\"37\" x2=\"344\" y2=\"51\" stroke=\"" + std::string(ink) +
       "\" stroke-width=\"2\"/><text x=\"350\" y=\"48\">p50 and its 95% interval</text>"
       "<path d=\"M506 44 l5 -5 l5 5 l-5 5 z\" fill=\"#ffffff\" stroke=\"" + std::string(ink) +
       "\"/><text x=\"522\" y=\"48\">mean</text></g>\n";
  // Grid and ticks.
  s += "<g class=\"kscope-axes\" fill=\"#333333\">\n";
  std::vector<std::pair<double, std::string>> ticks;
  if (log_x) {
    for (int d = static_cast<int>(x0); d <= static_cast<int>(x1); ++d)
      ticks.emplace_back(std::pow(10.0, d), detail::chart_time_text(std::pow(10.0, d)));
  } else {
    for (double v = 0; v <= x1 + step * 1e-6; v += step) ticks.emplace_back(v, detail::chart_time_text(v));
  }
  for (const auto& [v, text] : ticks) {
    const double x = px(v);
    s += "<line x1=\"" + svg_number(x) + "\" y1=\"" + svg_number(top - 6) + "\" x2=\"" + svg_number(x) + "\" y2=\"" +
         svg_number(axis_y) + "\" stroke=\"#e5e5e5\"/>";
    s += "<text x=\"" + svg_number(x) + "\" y=\"" + svg_number(axis_y + 16) + "\" text-anchor=\"middle\">";
    append_xml_escaped(s, text);
    s += "</text>\n";
  }
  s += "<text x=\"" + svg_number(plot_x + plot_w / 2) + "\" y=\"" + svg_number(axis_y + 32) +
       "\" text-anchor=\"middle\">" + (log_x ? "latency (log scale)" : "latency") + "</text>\n</g>\n";
  for (std::size_t i = 0; i < shown; ++i) {
    const latency_row& r = rows[i];
    const double y = top + row_h * static_cast<double>(i) + row_h / 2;
    const auto known = [](double v) { return std::isfinite(v) && v >= 0; };
    s += "<g class=\"kscope-latency-row\"><title>";
    append_xml_escaped(s, r.label + ": " + std::to_string(r.count) + " instances; min " +
                              detail::chart_time_text(r.min_ns) + ", p50 " + detail::chart_time_text(r.p50_ns) +
                              " [" + detail::chart_time_text(r.p50_lo_ns) + ", " + detail::chart_time_text(r.p50_hi_ns) +
                              "], p90 " + detail::chart_time_text(r.p90_ns) + ", p99 " +
                              detail::chart_time_text(r.p99_ns) + ", mean " + detail::chart_time_text(r.mean_ns) +
                              ", max " + detail::chart_time_text(r.max_ns));
    s += "</title><text x=\"" + svg_number(label_w) + "\" y=\"" + svg_number(y + 4) + "\" text-anchor=\"end\">";
    append_xml_escaped(s, detail::chart_label(r.label, 30));
    s += "</text>";
    if (known(r.min_ns) && known(r.max_ns))
      s += "<line x1=\"" + svg_number(px(r.min_ns)) + "\" y1=\"" + svg_number(y) + "\" x2=\"" + svg_number(px(r.max_ns)) +
           "\" y2=\"" + svg_number(y) + "\" stroke=\"#7F7F7F\"/>";
    if (known(r.p50_ns) && known(r.p90_ns))
      s += "<rect x=\"" + svg_number(px(r.p50_ns)) + "\" y=\"" + svg_number(y - 8) + "\" width=\"" +
           svg_number(std::max(1.0, px(r.p90_ns) - px(r.p50_ns))) + "\" height=\"16\" fill=\"" + box + "\"/>";
    if (known(r.p90_ns) && known(r.p99_ns))
      s += "<rect x=\"" + svg_number(px(r.p90_ns)) + "\" y=\"" + svg_number(y - 8) + "\" width=\"" +
           svg_number(std::max(1.0, px(r.p99_ns) - px(r.p90_ns))) + "\" height=\"16\" fill=\"" + tail + "\"/>";
    if (known(r.p50_lo_ns) && known(r.p50_hi_ns)) {
      const double a = px(r.p50_lo_ns), b = px(r.p50_hi_ns);
      s += "<path d=\"M" + svg_number(a) + " " + svg_number(y - 11) + " L" + svg_number(a) + " " + svg_number(y + 11) +
           " M" + svg_number(a) + " " + svg_number(y + 11) + " L" + svg_number(b) + " " + svg_number(y + 11) + " L" +
           svg_number(b) + " " + svg_number(y - 11) + "\" fill=\"none\" stroke=\"" + ink + "\"/>";
    }
    if (known(r.p50_ns))
      s += "<line x1=\"" + svg_number(px(r.p50_ns)) + "\" y1=\"" + svg_number(y - 11) + "\" x2=\"" +
           svg_number(px(r.p50_ns)) + "\" y2=\"" + svg_number(y + 11) + "\" stroke=\"" + ink +
           "\" stroke-width=\"2\"/>";
    if (known(r.mean_ns)) {
      const double x = px(r.mean_ns);
      s += "<path d=\"M" + svg_number(x - 5) + " " + svg_number(y) + " l5 -5 l5 5 l-5 5 z\" fill=\"#ffffff\" stroke=\"" +
           ink + "\"/>";
    }
    if (known(r.p99_ns)) {
      s += "<text x=\"" + svg_number(std::min(px(r.p99_ns) + 6, plot_x + plot_w - 4)) + "\" y=\"" + svg_number(y - 10) +
           "\" font-size=\"10\" fill=\"#555555\">p99 ";
      append_xml_escaped(s, detail::chart_time_text(r.p99_ns));
      s += "</text>";
    }
    s += "</g>\n";
  }
  if (rows.empty())
    s += "<text class=\"kscope-note\" x=\"" + svg_number(plot_x) + "\" y=\"" + svg_number(top + 20) +
         "\" fill=\"#7F7F7F\">no data</text>\n";
  if (left_out > 0)
    s += "<text class=\"kscope-note\" x=\"12\" y=\"" + svg_number(axis_y + 50) +
         "\" fill=\"#555555\" font-size=\"11\">" + std::to_string(left_out) +
         " more not drawn (the table lists them)</text>\n";
  s += "</svg>\n";
  return s;
}

KSCOPE_DECL std::string step_timeline_svg(const std::vector<step_timeline>& steps, const timeline_options& options) {
  using detail::append_xml_escaped;
  using detail::svg_number;
  const std::size_t shown = std::min(steps.size(), std::max<std::size_t>(1, options.max_steps));
  double longest = 0;
  for (std::size_t i = 0; i < shown; ++i)
    if (std::isfinite(steps[i].span_ns)) longest = std::max(longest, steps[i].span_ns);
  if (!(longest > 0)) longest = 1;
  // One colour per scope label, in the order first seen (host lanes first), shared by
  // the GPU spans the scope launched; "idle" is the lane's grey background.
  std::vector<std::string> labels;
  const auto colour_of = [&](const std::string& label) {
    auto it = std::find(labels.begin(), labels.end(), label);
    if (it == labels.end()) { labels.push_back(label); it = labels.end() - 1; }
    return detail::roof_colour(static_cast<std::size_t>(it - labels.begin()));
  };
  // The spans drawn of a lane: the longest max_spans, in time order.
  const auto drawn = [&](const std::vector<timeline_span>& lane, std::size_t& left_out) {
    std::vector<const timeline_span*> keep;
    for (const timeline_span& t : lane)
      if (std::isfinite(t.start_ns) && std::isfinite(t.ns) && t.ns > 0) keep.push_back(&t);
    const std::size_t cap = std::max<std::size_t>(1, options.max_spans);
    if (keep.size() > cap) {
      std::stable_sort(keep.begin(), keep.end(), [](const timeline_span* a, const timeline_span* b) { return a->ns > b->ns; });
      left_out += keep.size() - cap;
      keep.resize(cap);
    }
    std::stable_sort(keep.begin(), keep.end(),
                     [](const timeline_span* a, const timeline_span* b) { return a->start_ns < b->start_ns; });
    return keep;
  };
  for (std::size_t i = 0; i < shown; ++i)
    for (const timeline_span& t : steps[i].host) (void)colour_of(t.label);
  const double width = std::max(560, options.width_px);
  const double lane_x = 90, right = 24, lane_h = 24, top = 44;
  const double lane_w = width - lane_x - right;
  const double step_h = 18 + lane_h * 2 + 8 + 30;
  const auto px = [&](double ns) { return lane_x + std::clamp(ns / longest, 0.0, 1.0) * lane_w; };
  const double tick = detail::sweep_nice_step(longest, 6);

  std::string body;
  std::size_t left_out = 0;
  for (std::size_t i = 0; i < shown; ++i) {
    const step_timeline& st = steps[i];
    const double y0 = top + step_h * static_cast<double>(i);
    const double end = px(std::isfinite(st.span_ns) ? st.span_ns : 0);
    double busy = 0;
    for (const timeline_span& t : st.gpu)
      if (std::isfinite(t.ns) && t.ns > 0) busy += t.ns;
    body += "<g class=\"kscope-step\"><text x=\"12\" y=\"" + svg_number(y0 + 12) + "\" font-weight=\"bold\">";
    append_xml_escaped(body, st.label);
    body += "</text><text x=\"" + svg_number(lane_x + 220) + "\" y=\"" + svg_number(y0 + 12) + "\" fill=\"#555555\">";
    std::string summary = "step " + detail::chart_time_text(st.span_ns);
    if (st.span_ns > 0)
      summary += "; GPU busy " + detail::chart_time_text(busy) + " (" +
                 detail::format_fixed(100 * std::min(1.0, busy / st.span_ns), 0) + "%), idle " +
                 detail::chart_time_text(std::max(0.0, st.span_ns - busy));
    append_xml_escaped(body, summary);
    body += "</text>\n";
    const double host_y = y0 + 18, gpu_y = host_y + lane_h + 4;
    body += "<text x=\"" + svg_number(lane_x - 8) + "\" y=\"" + svg_number(host_y + 16) +
            "\" text-anchor=\"end\">host</text><text x=\"" + svg_number(lane_x - 8) + "\" y=\"" +
            svg_number(gpu_y + 16) + "\" text-anchor=\"end\">GPU</text>\n";
    // The lanes' extent: the step; the GPU lane's background is its idle time.
    body += "<rect x=\"" + svg_number(lane_x) + "\" y=\"" + svg_number(host_y) + "\" width=\"" +
            svg_number(end - lane_x) + "\" height=\"" + svg_number(lane_h) +
            "\" fill=\"#f4f4f4\" stroke=\"#999999\"/>";
    body += "<rect class=\"kscope-idle\" x=\"" + svg_number(lane_x) + "\" y=\"" + svg_number(gpu_y) + "\" width=\"" +
            svg_number(end - lane_x) + "\" height=\"" + svg_number(lane_h) +
            "\" fill=\"#e6e6e6\" stroke=\"#999999\"><title>GPU idle</title></rect>\n";
    const auto lane = [&](const std::vector<timeline_span>& spans, double y, const char* css_class, bool gpu) {
      for (const timeline_span* t : drawn(spans, left_out)) {
        const double a = px(t->start_ns), b = px(t->start_ns + t->ns);
        const double w = std::max(1.0, b - a);
        body += std::string("<g class=\"") + css_class + "\"><title>";
        append_xml_escaped(body, t->tooltip.empty() ? (gpu ? "GPU busy, launched in " : "") + t->label + ": " +
                                                          detail::chart_time_text(t->ns)
                                                    : t->tooltip);
        body += "</title><rect x=\"" + svg_number(a) + "\" y=\"" + svg_number(y + 2) + "\" width=\"" + svg_number(w) +
                "\" height=\"" + svg_number(lane_h - 4) + "\" fill=\"" + colour_of(t->label) + "\"" +
                (gpu ? "" : " fill-opacity=\"0.55\"") + "/>";
        // The name inside when it fits (about 7 px a character at 11 px).
        if (!gpu && w > 40) {
          const std::size_t chars = static_cast<std::size_t>((w - 8) / 7);
          body += "<text x=\"" + svg_number(a + 4) + "\" y=\"" + svg_number(y + 16) + "\" font-size=\"11\">";
          append_xml_escaped(body, detail::chart_label(t->label, chars));
          body += "</text>";
        }
        body += "</g>\n";
      }
    };
    lane(st.host, host_y, "kscope-host-span", false);
    lane(st.gpu, gpu_y, "kscope-gpu-span", true);
    // The time axis under the lanes.
    const double axis_y = gpu_y + lane_h + 4;
    body += "<g class=\"kscope-axes\" fill=\"#555555\" font-size=\"10\">";
    for (double v = 0; v <= longest + tick * 1e-6; v += tick) {
      const double x = px(v);
      body += "<line x1=\"" + svg_number(x) + "\" y1=\"" + svg_number(axis_y) + "\" x2=\"" + svg_number(x) +
              "\" y2=\"" + svg_number(axis_y + 4) + "\" stroke=\"#555555\"/><text x=\"" + svg_number(x) + "\" y=\"" +
              svg_number(axis_y + 15) + "\" text-anchor=\"middle\">";
      append_xml_escaped(body, detail::chart_time_text(v));
      body += "</text>";
    }
    body += "</g></g>\n";
  }
  // Legend: a swatch per scope (bounded), then idle.
  const std::size_t legend_items = std::min<std::size_t>(labels.size(), 12);
  const double legend_y = top + step_h * static_cast<double>(std::max<std::size_t>(shown, 1)) + 6;
  std::string legend = "<g class=\"kscope-legend\" font-size=\"11\">";
  double lx = 12, ly = legend_y;
  const auto swatch = [&](const std::string& text, const char* fill) {
    const std::string shown_text = detail::chart_label(text, 28);
    const double w = 22 + 7 * static_cast<double>(shown_text.size() > 28 ? 28 : shown_text.size()) + 14;
    if (lx + w > width - right) { lx = 12; ly += 18; }
    legend += "<rect x=\"" + svg_number(lx) + "\" y=\"" + svg_number(ly - 9) + "\" width=\"14\" height=\"12\" fill=\"" +
              fill + "\"/><text x=\"" + svg_number(lx + 18) + "\" y=\"" + svg_number(ly + 1) + "\">";
    append_xml_escaped(legend, shown_text);
    legend += "</text>";
    lx += w;
  };
  for (std::size_t k = 0; k < legend_items; ++k) swatch(labels[k], detail::roof_colour(k));
  swatch("GPU idle", "#e6e6e6");
  legend += "</g>\n";
  std::vector<std::string> notes;
  if (steps.empty()) notes.push_back("no data");
  if (steps.size() > shown) notes.push_back(std::to_string(steps.size() - shown) + " more steps not drawn");
  if (left_out > 0) notes.push_back(std::to_string(left_out) + " short spans not drawn");
  if (labels.size() > legend_items)
    notes.push_back(std::to_string(labels.size() - legend_items) + " scopes share colours beyond the legend");
  if (!options.note.empty()) notes.push_back(options.note);
  const double notes_y = ly + 22;
  const double height = notes_y + 16 * static_cast<double>(notes.size()) + 4;
  std::string s = detail::chart_open("kscope-step-timeline", width, height);
  s += "<text x=\"12\" y=\"26\" font-size=\"15\" font-weight=\"bold\">";
  append_xml_escaped(s, options.title);
  s += "</text>\n" + body + legend;
  double ny = notes_y;
  for (const std::string& n : notes) {
    s += "<text class=\"kscope-note\" x=\"12\" y=\"" + svg_number(ny) + "\" fill=\"#555555\" font-size=\"11\">";
    append_xml_escaped(s, n);
    s += "</text>\n";
    ny += 16;
  }
  s += "</svg>\n";
  return s;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

namespace detail {

// The style sheet of every kscope page (render_html and the report page of html.hpp):
// plain CSS, no fonts or images to fetch; @media print keeps the pictures on the page
// width, their colours, and tables and figures whole where a page break allows.
KSCOPE_DECL const char* html_page_style();

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL const char* html_page_style() {
  return "body{font-family:'DejaVu Sans',Helvetica,Arial,sans-serif;margin:24px;color:#222;background:#fff}\n"
         "h1{font-size:20px;margin:0 0 8px}\n"
         "h2{font-size:17px;margin:32px 0 8px;padding-bottom:4px;border-bottom:1px solid #ccc}\n"
         "h3{font-size:14px;margin:16px 0 4px}\n"
         ".context{font-family:'DejaVu Sans Mono',Menlo,monospace;font-size:12px;color:#555;margin:2px 0}\n"
         "nav.contents{font-size:13px;margin:12px 0}\n"
         "nav.contents a{margin-right:14px}\n"
         "figure{margin:16px 0}\n"
         "figcaption,.legend,.note{font-size:12px;color:#555;max-width:72em}\n"
         "svg{max-width:100%;height:auto}\n"
         ".headline{font-weight:bold}\n"
         ".lines{white-space:pre-line}\n"
         "li{margin:2px 0}\n"
         "table{border-collapse:collapse;margin:16px 0;font-size:13px}\n"
         "caption{text-align:left;font-weight:bold;padding-bottom:6px}\n"
         "th,td{border:1px solid #ccc;padding:4px 10px;text-align:right;font-variant-numeric:tabular-nums}\n"
         "th{background:#f2f2f2}\n"
         "th:first-child,td:first-child,td.wide,table.text-last td:last-child{text-align:left}\n"
         "@page{margin:12mm}\n"
         "@media print{\n"
         "body{margin:0;font-size:10pt}\n"
         ".context,li,p,figcaption{overflow-wrap:anywhere}\n"
         "nav.contents{display:none}\n"
         "*{-webkit-print-color-adjust:exact;print-color-adjust:exact}\n"
         "h2{break-after:avoid}\n"
         "figure,tr{break-inside:avoid}\n"
         "table{font-size:8.5pt}\n"
         "th,td{padding:2px 5px}\n"
         "a{color:inherit;text-decoration:none}\n"
         "}\n";
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail

// An HTML <table> of plain-text cells, escaped. Numeric-looking cells are right-aligned
// by the page's style (every column but the first).
//   std::string html = kscope::to_html(table);
[[nodiscard]] KSCOPE_DECL std::string to_html(const html_table& table);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string to_html(const html_table& table) {
  std::string out = "<table>\n";
  if (!table.caption.empty()) {
    out += "<caption>";
    detail::append_xml_escaped(out, table.caption);
    out += "</caption>\n";
  }
  if (!table.columns.empty()) {
    out += "<thead><tr>";
    for (const std::string& c : table.columns) {
      out += "<th>";
      detail::append_xml_escaped(out, c);
      out += "</th>";
    }
    out += "</tr></thead>\n";
  }
  out += "<tbody>\n";
  for (const std::vector<std::string>& row : table.rows) {
    out += "<tr>";
    for (const std::string& cell : row) {
      out += "<td>";
      detail::append_xml_escaped(out, cell);
      out += "</td>";
    }
    out += "</tr>\n";
  }
  out += "</tbody>\n</table>\n";
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// A complete single-file HTML page (UTF-8, no JavaScript, no external resources).
//   std::string html = kscope::render_html(page);
[[nodiscard]] KSCOPE_DECL std::string render_html(const html_report& page);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string render_html(const html_report& page) {
  std::string out;
  out.reserve(page.svg.size() + 4096);
  out += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>";
  detail::append_xml_escaped(out, page.title);
  out += "</title>\n<style>\n";
  out += detail::html_page_style();
  out += "</style>\n</head>\n<body>\n<h1>";
  detail::append_xml_escaped(out, page.title);
  out += "</h1>\n";
  for (const std::string& line : page.context_lines) {
    out += "<p class=\"context\">";
    detail::append_xml_escaped(out, line);
    out += "</p>\n";
  }
  if (!page.svg.empty()) {
    out += "<figure>\n";
    out += page.svg;
    out += "</figure>\n";
  }
  for (const html_table& table : page.tables) out += to_html(table);
  for (const std::string& fragment : page.html_fragments) {
    out += fragment;
    out += '\n';
  }
  out += "</body>\n</html>\n";
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace kscope
