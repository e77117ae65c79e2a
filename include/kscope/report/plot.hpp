// kscope/report/plot.hpp — the roofline picture: a self-contained SVG, and a single-file HTML
// page that shows it beside tables.
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

#include "../core/detail/atomic_file.hpp"
#include "../core/detail/number_format.hpp"
#include "../core/detail/text_escape.hpp"
#include "../core/roofline.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <string_view>
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
inline void append_xml_escaped(std::string& out, std::string_view text) {
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

inline std::string xml_escaped(std::string_view text) {
  std::string out;
  append_xml_escaped(out, text);
  return out;
}

inline std::string svg_number(double value) { return format_fixed(value, 2); }

// The label of the decade 10^exponent: "0.01", "1", "100", "1k", "10 T" + unit...
// Whole numbers with an SI prefix from 10^3 up, plain decimals below.
inline std::string decade_label(int exponent, const char* unit = "") {
  static const char* const prefixes[] = {"", "k", "M", "G", "T", "P", "E"};
  const std::string space = *unit != '\0' ? " " : "";
  if (exponent >= 0) {
    const int group = std::min(exponent / 3, 6);
    const double mantissa = std::pow(10.0, exponent - 3 * group);
    return format_general(mantissa, 6) + space + prefixes[group] + unit;  // printf "%g"
  }
  return format_general(std::pow(10.0, exponent), 6) + space + unit;
}

// Colours that stay apart for colour-blind readers (Okabe & Ito, 2008).
inline const char* roof_colour(std::size_t index) {
  static const char* const palette[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000"};
  return palette[index % (sizeof palette / sizeof palette[0])];
}

inline const char* limiter_colour(bound b) {
  switch (b) {
    case bound::memory: return "#0072B2";
    case bound::compute: return "#D55E00";
    case bound::latency: return "#7F7F7F";
  }
  return "#7F7F7F";
}

// The roof label without the " (measured)" suffix, so both roofs of a type share a colour.
inline std::string_view roof_family(std::string_view label) {
  constexpr std::string_view suffix = " (measured)";
  if (label.size() >= suffix.size() && label.substr(label.size() - suffix.size()) == suffix) {
    label.remove_suffix(suffix.size());
  }
  return label;
}

inline bool positive_finite(double v) { return v > 0 && std::isfinite(v); }

}  // namespace detail

// A standalone SVG document (no XML declaration, so it can also be inlined in HTML)
// drawing the roofs and the points. See the top of this header for what is drawn.
//   std::string svg = kscope::roofline_svg(roofs, points);
[[nodiscard]] inline std::string roofline_svg(const std::vector<roof_line>& roofs,
                                              const std::vector<roof_point>& points,
                                              const plot_options& options = {}) {
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
    const char* colour = detail::limiter_colour(p.limiter);
    s += "<g class=\"kscope-point\" data-limiter=\"";
    s += to_string(p.limiter);
    s += "\"><title>";
    append_xml_escaped(s, p.label + ": " + detail::format_si(p.intensity, "FLOP/B") + ", " +
                              detail::format_si(p.flops_per_s, "FLOP/s") + ", " + to_string(p.limiter) + "-bound" +
                              (off_scale ? " (off scale: drawn at the plot edge)" : ""));
    s += "</title><circle cx=\"" + svg_number(x) + "\" cy=\"" + svg_number(y) + "\" r=\"5\" fill=\"" +
         (off_scale ? std::string("#ffffff") : std::string(colour)) + "\" stroke=\"" + colour +
         "\" stroke-width=\"2\"/>";
    // Label below the point (points sit under their roof, so below is usually free),
    // above it at the bottom edge; to the left near the right edge.
    const bool flip = x > left + plot_w * 0.8;
    const double label_y = y + 17 > top + plot_h - 2 ? y - 8 : y + 17;
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
    s += "<circle cx=\"" + svg_number(lx + 13) + "\" cy=\"" + svg_number(ly) + "\" r=\"5\" fill=\"" +
         detail::limiter_colour(b) + "\"/>";
    s += "<text x=\"" + svg_number(lx + 32) + "\" y=\"" + svg_number(ly + 4) + "\">" + to_string(b) + "-bound</text>\n";
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

// An HTML <table> of plain-text cells, escaped. Numeric-looking cells are right-aligned
// by the page's style (every column but the first).
//   std::string html = kscope::to_html(table);
[[nodiscard]] inline std::string to_html(const html_table& table) {
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

// A complete single-file HTML page (UTF-8, no JavaScript, no external resources).
//   std::string html = kscope::render_html(page);
[[nodiscard]] inline std::string render_html(const html_report& page) {
  std::string out;
  out.reserve(page.svg.size() + 4096);
  out += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>";
  detail::append_xml_escaped(out, page.title);
  out += "</title>\n<style>\n"
         "body{font-family:'DejaVu Sans',Helvetica,Arial,sans-serif;margin:24px;color:#222;background:#fff}\n"
         "h1{font-size:20px;margin:0 0 8px}\n"
         ".context{font-family:'DejaVu Sans Mono',Menlo,monospace;font-size:12px;color:#555;margin:2px 0}\n"
         "figure{margin:16px 0}\n"
         "table{border-collapse:collapse;margin:16px 0;font-size:13px}\n"
         "caption{text-align:left;font-weight:bold;padding-bottom:6px}\n"
         "th,td{border:1px solid #ccc;padding:4px 10px;text-align:right;font-variant-numeric:tabular-nums}\n"
         "th{background:#f2f2f2}\n"
         "th:first-child,td:first-child{text-align:left}\n"
         "</style>\n</head>\n<body>\n<h1>";
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

// Writes text to a file (binary), all or nothing: through a temporary file renamed over
// `path` once complete (core/detail/atomic_file.hpp), so a full disk never leaves a
// truncated file in place of the old one. false and *error ("cannot write PATH: No space
// left on device") on failure; never throws.
//   std::string why;
//   if (!kscope::write_text_file("roofline.svg", svg, &why)) std::fprintf(stderr, "%s\n", why.c_str());
[[nodiscard]] inline bool write_text_file(const std::string& path, std::string_view text,
                                          std::string* error = nullptr) noexcept {
  return detail::write_file_atomically(path, text, error);
}

}  // namespace kscope
