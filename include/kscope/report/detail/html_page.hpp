// kscope/report/detail/html_page.hpp — how report/html.hpp builds the report page: the
// table, list and figure pieces, which scopes a table lists, the pictures' data (the step
// timeline composed from the per-call figures, the GPU-time bars, the roofline's points),
// and one function per section of the page, each the counterpart of a section of text()
// (text.hpp, printing.hpp, evidence/counter_report.hpp, evidence/pm_report.hpp), from the same data.
#pragma once

#include "../../core/config.hpp"
#include "../data.hpp"
#include "printing.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kscope {

// At most this many scopes in each per-scope table of the report page (the scopes with the
// most time, and their parents); the page says how many it left out, the JSON has them all.
inline constexpr std::size_t html_max_scope_rows = 300;
// The most of one feature section's text (report/section.hpp) the page shows: the rest is
// in the text and JSON reports, and the page says how much it left out.
inline constexpr std::size_t html_max_section_bytes = std::size_t{64} << 10;

namespace detail {

KSCOPE_DECL std::vector<step_timeline> compose_step_timelines(const session_report& r,
                                                              std::string* step_path = nullptr);

// One cell of a page table: plain text (escaped), an optional tooltip, an indent level
// for the scope tree, and the columns it spans.
struct html_cell {
  std::string text;
  std::string title;
  std::size_t indent = 0;
  std::size_t span = 1;
};
KSCOPE_DECL void append_html_grid(std::string& out, const std::vector<std::string>& columns,
                                  const std::vector<std::vector<html_cell>>& rows, const char* css_class = "");

// Which scopes the page's per-scope tables list: all up to html_max_scope_rows, else the
// ones with the most time (the display order's key) and their ancestors.
KSCOPE_DECL std::vector<bool> html_shown_scopes(const std::vector<scope_report>& scopes, report_sort sort,
                                                std::size_t max_rows);

// The GPU-time bars and the roofline picture of the page ("" when the report has nothing
// to draw), with their captions.
KSCOPE_DECL std::string gpu_bars_svg(const session_report& r, std::string& caption);
KSCOPE_DECL std::string roofline_picture(const session_report& r, std::string& caption);

// An inline SVG for the page: the namespace attribute dropped (the HTML parser puts <svg>
// in the SVG namespace itself), so the page holds no URL at all.
KSCOPE_DECL std::string inline_svg(std::string svg);

// What the section functions share while one page is built: the report, the page so far,
// the scope table's order and which scopes the tables list, and the two pictures that
// move to the next section present when their own is absent.
struct html_page {
  const session_report& r;
  std::string& out;
  std::vector<std::size_t> order;  // display_order(): text()'s order
  std::vector<bool> shown;         // html_shown_scopes()
  std::size_t left_out = 0;
  std::string gpu_bars, gpu_bars_caption;
  std::string roofline, roofline_caption;
  bool gpu_bars_drawn = false;
  bool roofline_drawn = false;
};

KSCOPE_DECL html_page make_html_page(const session_report& r, std::string& out);

// The page's pieces: a section's frame (<section id data-section><h2>, closed by the
// caller), a paragraph and a list of plain text, a figure with its caption, a section id
// made safe (lower-case letters, digits, '-'), the note on the scopes a table leaves out,
// a scope's name cell (indented by its depth, its path the tooltip), a time in ns.
KSCOPE_DECL void html_section_open(std::string& out, const std::string& id, const std::string& heading);
KSCOPE_DECL void html_paragraph(std::string& out, const std::string& text, const char* css_class = "");
KSCOPE_DECL void html_list(std::string& out, const std::vector<std::string>& items, const char* css_class = "");
KSCOPE_DECL void html_figure(std::string& out, const std::string& svg, const std::string& caption);
KSCOPE_DECL std::string html_section_id(const std::string& id);
KSCOPE_DECL std::string html_left_out(std::size_t n);
KSCOPE_DECL html_cell html_name_cell(const scope_report& s, const std::string& suffix = std::string());
KSCOPE_DECL std::string html_ns(std::int64_t ns);

// The sections, in page order. Each writes its <section> (the context its <header>); the
// caller calls one only when report_sections_present() lists it.
KSCOPE_DECL void html_context(html_page& p);
KSCOPE_DECL void html_window(html_page& p);
KSCOPE_DECL void html_scopes(html_page& p);
KSCOPE_DECL void html_requests(html_page& p);
KSCOPE_DECL void html_gpu_busy(html_page& p);
KSCOPE_DECL void html_gpu_time(html_page& p);
KSCOPE_DECL void html_roofline(html_page& p);
KSCOPE_DECL void html_gpu_activity(html_page& p);
KSCOPE_DECL void html_top_kernels(html_page& p);
KSCOPE_DECL void html_counters(html_page& p);
KSCOPE_DECL void html_sampled_metrics(html_page& p);
KSCOPE_DECL void html_verdicts(html_page& p);
KSCOPE_DECL void html_cupti(html_page& p);
KSCOPE_DECL void html_warnings(html_page& p);

}  // namespace detail

#if KSCOPE_DETAIL_DEFINITIONS
namespace detail {

KSCOPE_DECL void append_html_grid(std::string& out, const std::vector<std::string>& columns,
                                  const std::vector<std::vector<html_cell>>& rows, const char* css_class) {
  out += *css_class != '\0' ? std::string("<table class=\"") + css_class + "\">\n" : std::string("<table>\n");
  out += "<thead><tr>";
  for (const std::string& c : columns) {
    out += "<th>";
    append_xml_escaped(out, c);
    out += "</th>";
  }
  out += "</tr></thead>\n<tbody>\n";
  for (const std::vector<html_cell>& row : rows) {
    out += "<tr>";
    for (const html_cell& c : row) {
      out += "<td";
      if (c.span > 1) out += " colspan=\"" + std::to_string(c.span) + "\" class=\"wide\"";
      if (c.indent > 0)
        out += " style=\"padding-left:" + std::to_string(10 + 14 * std::min<std::size_t>(c.indent, 24)) + "px\"";
      if (!c.title.empty()) {
        out += " title=\"";
        append_xml_escaped(out, c.title);
        out += "\"";
      }
      out += ">";
      append_xml_escaped(out, c.text);
      out += "</td>";
    }
    out += "</tr>\n";
  }
  out += "</tbody>\n</table>\n";
}

KSCOPE_DECL std::vector<bool> html_shown_scopes(const std::vector<scope_report>& scopes, report_sort sort,
                                                std::size_t max_rows) {
  std::vector<bool> shown(scopes.size(), scopes.size() <= max_rows);
  if (scopes.size() <= max_rows) return shown;
  const bool by_gpu = resolve_sort(scopes, sort) == report_sort::gpu;
  std::vector<std::size_t> by_weight(scopes.size());
  for (std::size_t i = 0; i < by_weight.size(); ++i) by_weight[i] = i;
  const auto weight = [&](std::size_t i) {
    const double w = by_gpu ? own_gpu_ns(scopes[i]) : scopes[i].host_inclusive_ns;
    return std::isfinite(w) ? w : 0.0;
  };
  std::stable_sort(by_weight.begin(), by_weight.end(),
                   [&](std::size_t a, std::size_t b) { return weight(a) > weight(b); });
  std::map<node_id, std::size_t> index;
  for (std::size_t i = 0; i < scopes.size(); ++i) index.emplace(scopes[i].id, i);
  std::size_t count = 0;
  for (std::size_t i : by_weight) {
    if (count >= max_rows) break;
    // The scope and the ancestors not listed yet, so that every row sits under its parent.
    std::size_t at = i;
    for (std::size_t guard = 0; guard <= scopes.size() && !shown[at]; ++guard) {
      shown[at] = true;
      ++count;
      const auto parent = index.find(scopes[at].parent);
      if (scopes[at].parent == 0 || parent == index.end()) break;
      at = parent->second;
    }
  }
  return shown;
}

KSCOPE_DECL std::string inline_svg(std::string svg) {
  constexpr std::string_view ns = " xmlns=\"http://www.w3.org/2000/svg\"";
  for (std::size_t at = svg.find(ns); at != std::string::npos; at = svg.find(ns, at)) svg.erase(at, ns.size());
  return svg;
}

KSCOPE_DECL std::vector<step_timeline> compose_step_timelines(const session_report& r, std::string* step_path) {
  std::vector<step_timeline> out;
  if (!r.gpu_time) return out;
  const gpu_time_report& t = *r.gpu_time;
  const scope_report* step = nullptr;
  const scope_gpu_time* step_gpu = nullptr;
  std::map<node_id, const scope_gpu_time*> by_id;  // t.find() per scope is quadratic in a large run
  for (const scope_gpu_time& g : t.scopes) by_id.emplace(g.id, &g);
  const auto find = [&](node_id id) -> const scope_gpu_time* {
    const auto it = by_id.find(id);
    return it == by_id.end() ? nullptr : it->second;
  };
  for (const scope_report& s : r.scopes) {
    if (s.cross_thread || s.calls < 2) continue;
    const scope_gpu_time* g = find(s.id);
    if (g == nullptr || g->calls_seen == 0 || g->busy_per_call_ns.n == 0) continue;
    const bool named = s.name == "step";
    const bool step_named = step != nullptr && step->name == "step";
    if (step == nullptr || (named && !step_named) ||
        (named == step_named && s.host_inclusive_ns > step->host_inclusive_ns)) {
      step = &s;
      step_gpu = g;
    }
  }
  if (step == nullptr) return out;
  if (step_path) *step_path = step->path;
  // The step's direct children, in the order first seen: when one runs, its median time
  // per call (host, and GPU busy with its children's work) times its calls per step; a
  // scope with fewer calls than the step runs in that share of the steps. The longest 10
  // by mean time per step are drawn, the rest as one span.
  struct part {
    std::string label;
    double share = 1;    // of the steps it runs in: calls / step calls, at most 1
    double host_ns = 0;  // per step when it runs
    double gpu_ns = 0;
    double mean_ns = 0;  // per step over all steps: its order among the children
  };
  std::vector<part> parts;
  const double steps = static_cast<double>(step->calls);
  for (const scope_report& c : r.scopes) {
    if (c.parent != step->id || c.cross_thread || c.depth != step->depth + 1 || c.calls == 0) continue;
    const double per_step = static_cast<double>(c.calls) / steps;
    part p{c.name, std::min(1.0, per_step), 0, 0, std::isfinite(c.host_inclusive_ns) ? c.host_inclusive_ns / steps : 0};
    const double calls_when_run = std::max(1.0, per_step);
    if (std::isfinite(c.host_ns.median)) p.host_ns = c.host_ns.median * calls_when_run;
    const scope_gpu_time* g = find(c.id);
    if (g != nullptr && g->calls_seen > 0 && std::isfinite(g->busy_per_call_ns.median))
      p.gpu_ns = g->busy_per_call_ns.median *
                 std::max(1.0, static_cast<double>(g->calls_seen) / static_cast<double>(step_gpu->calls_seen));
    parts.push_back(p);
  }
  if (parts.size() > 10) {
    std::vector<std::size_t> order(parts.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return parts[a].mean_ns > parts[b].mean_ns; });
    std::vector<bool> keep(parts.size(), false);
    for (std::size_t k = 0; k < 10; ++k) keep[order[k]] = true;
    // The rest at their mean per step, as if in every step: each is small.
    part other{"(other scopes)", 1, 0, 0, 0};
    std::vector<part> kept;
    for (std::size_t i = 0; i < parts.size(); ++i) {
      if (keep[i]) {
        kept.push_back(parts[i]);
      } else {
        other.host_ns += parts[i].mean_ns;
        other.gpu_ns += parts[i].gpu_ns * parts[i].share;
      }
    }
    kept.push_back(other);
    parts = std::move(kept);
  }
  const summary& host = step->host_ns;
  const summary& busy = step_gpu->busy_per_call_ns;
  const struct {
    const char* name;
    double quantile, span_ns, busy_ns;
  } percentiles[] = {{"p50 step", 0.5, host.median, busy.median}, {"p99 step", 0.99, host.p99, busy.p99}};
  for (const auto& q : percentiles) {
    if (!(q.span_ns > 0) || !std::isfinite(q.span_ns)) continue;
    step_timeline st;
    st.label = q.name;
    st.span_ns = q.span_ns;
    // A scope that runs in a share f of the steps is in the steps above the 1 - f quantile:
    // the report does not say which steps ran it, and the slow ones are those that did.
    std::vector<const part*> in_step;
    for (const part& p : parts)
      if (p.share >= 1 || p.share > 1 - q.quantile) in_step.push_back(&p);
    double host_sum = 0, gpu_sum = 0;
    for (const part* p : in_step) {
      host_sum += p->host_ns;
      gpu_sum += p->gpu_ns;
    }
    const double host_scale = host_sum > q.span_ns ? q.span_ns / host_sum : 1.0;
    const double busy_ns = std::isfinite(q.busy_ns) ? std::clamp(q.busy_ns, 0.0, q.span_ns) : 0.0;
    const double gpu_scale = gpu_sum > busy_ns ? busy_ns / gpu_sum : 1.0;
    double at = 0, gpu_free = 0;  // the host lane's end, and where the GPU lane is free from
    const auto place_gpu = [&](const std::string& label, double start, double ns) {
      if (!(ns > 0)) return;
      start = std::max(start, gpu_free);
      if (start + ns > q.span_ns) start = std::max(gpu_free, q.span_ns - ns);
      ns = std::min(ns, q.span_ns - start);
      if (ns <= 0) return;
      st.gpu.push_back(timeline_span{label, start, ns, "GPU busy, launched in " + label + ": " + chart_time_text(ns)});
      gpu_free = start + ns;
    };
    for (const part* p : in_step) {
      const double ns = p->host_ns * host_scale;
      if (ns > 0) st.host.push_back(timeline_span{p->label, at, ns, p->label + ": " + chart_time_text(ns)});
      place_gpu(p->label, at, p->gpu_ns * gpu_scale);
      at += ns;
    }
    // The rest of the step: its own host time, and the GPU busy time no child accounts
    // for, launched by the step itself.
    if (at < q.span_ns)
      st.host.push_back(timeline_span{step->name, at, q.span_ns - at,
                                      step->name + " outside its child scopes: " + chart_time_text(q.span_ns - at)});
    place_gpu(step->name, at, busy_ns - std::min(busy_ns, gpu_sum * gpu_scale));
    out.push_back(std::move(st));
  }
  return out;
}

KSCOPE_DECL void html_section_open(std::string& out, const std::string& id, const std::string& heading) {
  out += "<section id=\"" + id + "\" data-section=\"" + id + "\">\n<h2>";
  append_xml_escaped(out, heading);
  out += "</h2>\n";
}

KSCOPE_DECL void html_paragraph(std::string& out, const std::string& text, const char* css_class) {
  out += *css_class != '\0' ? std::string("<p class=\"") + css_class + "\">" : std::string("<p>");
  append_xml_escaped(out, text);
  out += "</p>\n";
}

KSCOPE_DECL void html_list(std::string& out, const std::vector<std::string>& items, const char* css_class) {
  if (items.empty()) return;
  out += *css_class != '\0' ? std::string("<ul class=\"") + css_class + "\">\n" : std::string("<ul>\n");
  for (const std::string& item : items) {
    out += "<li>";
    append_xml_escaped(out, item);
    out += "</li>\n";
  }
  out += "</ul>\n";
}

KSCOPE_DECL void html_figure(std::string& out, const std::string& svg, const std::string& caption) {
  out += "<figure>\n" + inline_svg(svg);
  if (!caption.empty()) {
    out += "<figcaption>";
    append_xml_escaped(out, caption);
    out += "</figcaption>\n";
  }
  out += "</figure>\n";
}

KSCOPE_DECL std::string html_section_id(const std::string& id) {
  std::string out;
  for (char c : id) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
    out += keep ? c : (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : '-';
  }
  return out.empty() ? std::string("section") : out;
}

KSCOPE_DECL std::string html_left_out(std::size_t n) {
  return std::to_string(n) + (n == 1 ? " scope" : " scopes") + " with less time not listed (at most " +
         std::to_string(html_max_scope_rows) + " rows a table; the JSON report has them all)";
}

// GPU time per scope for the bars: the GPU-time account's (own busy time plus copies,
// whole run), else CUPTI's own GPU time, else the events' (inclusive of children).
KSCOPE_DECL std::string gpu_bars_svg(const session_report& r, std::string& caption) {
  struct entry {
    std::string path;
    double ns;
    double share;
  };
  std::vector<entry> entries;
  if (r.gpu_time) {
    for (const scope_gpu_time& g : r.gpu_time->scopes)
      if (g.totals_known && g.gpu_ns > 0) entries.push_back({g.path, g.gpu_ns, g.share_of_gpu});
    caption =
        "GPU time per scope: each scope's own kernel busy time plus its copies and memsets (CUPTI), "
        "exclusive of its children; the share is of the sum over scopes.";
  } else {
    bool any_activity = false;
    for (const scope_report& s : r.scopes) any_activity = any_activity || s.gpu_activity.has_value();
    for (const scope_report& s : r.scopes) {
      const double ns = any_activity ? own_gpu_ns(s) : (s.gpu_calls ? s.gpu_total_ns : 0.0);
      if (ns > 0 && std::isfinite(ns)) entries.push_back({s.path, ns, std::nan("")});
    }
    caption = any_activity ? "GPU time per scope: each scope's own kernel busy time plus its copies and memsets "
                             "(CUPTI), exclusive of its children."
                           : "GPU time per scope: the time between each scope's CUDA events, summed over its calls "
                             "(inclusive of its children's).";
  }
  if (entries.empty()) return {};
  std::stable_sort(entries.begin(), entries.end(), [](const entry& a, const entry& b) { return a.ns > b.ns; });
  constexpr std::size_t max_bars = 20;
  std::vector<chart_bar> bars;
  double rest = 0;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const entry& e = entries[i];
    if (i + 1 >= max_bars && entries.size() > max_bars) {
      rest += e.ns;
      continue;
    }
    const std::string share = std::isfinite(e.share) ? " (" + share_text(e.share) + ")" : std::string();
    bars.push_back(chart_bar{e.path, e.ns, format_duration_ns(e.ns) + share, ""});
  }
  if (entries.size() > max_bars)
    bars.push_back(chart_bar{"(" + std::to_string(entries.size() - max_bars + 1) + " more scopes)", rest,
                             format_duration_ns(rest), ""});
  bar_chart_options o;
  o.title = "GPU time per scope";
  o.css_class = "kscope-gpu-bars";
  o.max_bars = max_bars;
  return bar_chart_svg(bars, o);
}

// The roofline picture: every scope placed by its declared work (when the placement may
// be shown with a limiter) and every level its counters measured; at most 64 points, from
// the scopes with the most time.
KSCOPE_DECL std::string roofline_picture(const session_report& r, std::string& caption) {
  if (r.context.roof_lines.empty()) return {};
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < r.scopes.size(); ++i)
    if (placement_has_limiter(r.scopes[i]) || r.scopes[i].counters) order.push_back(i);
  const auto weight = [&](std::size_t i) {
    const scope_report& s = r.scopes[i];
    const double w =
        std::isfinite(s.roofline_time_ns) ? s.roofline_time_ns * static_cast<double>(s.calls) : s.host_inclusive_ns;
    return std::isfinite(w) ? w : 0.0;
  };
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return weight(a) > weight(b); });
  constexpr std::size_t max_points = 64;
  std::vector<roof_point> points;
  std::size_t scopes_left_out = 0;
  for (std::size_t i : order) {
    const scope_report& s = r.scopes[i];
    std::vector<roof_point> mine;
    if (placement_has_limiter(s)) mine.push_back(to_roof_point(s.path, *s.roofline));
    if (s.counters)
      for (memory_level level : {memory_level::dram, memory_level::l2, memory_level::l1})
        if (const std::optional<roof_point> mp = s.counters->measured.chart_point(level, s.path)) mine.push_back(*mp);
    if (mine.empty()) continue;
    if (points.size() + mine.size() > max_points) {
      ++scopes_left_out;
      continue;
    }
    points.insert(points.end(), mine.begin(), mine.end());
  }
  if (points.empty()) return {};
  plot_options options;
  options.title = r.context.devices.empty()
                      ? "Roofline"
                      : "Roofline: " + r.context.devices.front().substr(0, r.context.devices.front().find(':'));
  options.point_limiters = false;  // what limits a scope is its verdict, not its point's side of the ridge
  caption =
      "Each scope at its median call: declared work (scope::set_work) as 'path', hardware counters' "
      "measured levels as 'path (DRAM)', 'path (L2)', 'path (L1)'; solid roofs theoretical, dashed measured; "
      "what limits each scope: its verdict (Verdict per scope).";
  if (scopes_left_out > 0)
    caption += " " + std::to_string(scopes_left_out) + " scopes with less time not drawn (at most " +
               std::to_string(max_points) + " points; the table lists them).";
  return roofline_svg(r.context.roof_lines, points, options);
}

KSCOPE_DECL html_page make_html_page(const session_report& r, std::string& out) {
  html_page p{r,
              out,
              display_order(r.scopes, r.sort),
              html_shown_scopes(r.scopes, r.sort, html_max_scope_rows),
              0,
              {},
              {},
              {},
              {},
              false,
              false};
  for (bool s : p.shown) p.left_out += s ? 0 : 1;
  p.gpu_bars = gpu_bars_svg(r, p.gpu_bars_caption);
  p.roofline = roofline_picture(r, p.roofline_caption);
  return p;
}

KSCOPE_DECL html_cell html_name_cell(const scope_report& s, const std::string& suffix) {
  return html_cell{s.name + suffix, s.path, s.depth > 0 ? s.depth - 1 : 0, 1};
}

KSCOPE_DECL std::string html_ns(std::int64_t ns) { return format_duration_ns(static_cast<double>(ns)); }

// The header: where and when, the GPUs and their roofs.
KSCOPE_DECL void html_context(html_page& p) {
  const session_report& r = p.r;
  std::string& out = p.out;
  out += "<header id=\"context\" data-section=\"context\">\n<h1>kscope report</h1>\n";
  std::string first = "kscope " + r.context.kscope_version;
  if (!r.context.host_name.empty()) first += " on " + r.context.host_name;
  if (!r.context.timestamp_utc.empty()) first += ", " + r.context.timestamp_utc;
  html_paragraph(out, first, "context");
  if (r.context.devices.empty()) {
    html_paragraph(out,
                   "GPU: " + (r.context.cuda_compiled ? r.context.no_device_reason + "; host times only"
                                                      : std::string("kscope built without CUDA; GPU timing needs a "
                                                                    "CUDA build and a device")),
                   "context");
  } else {
    for (const std::string& d : r.context.devices) html_paragraph(out, "GPU: " + d, "context");
    for (const std::string& roof : r.context.roofs) html_paragraph(out, "roof: " + roof, "context");
  }
  out += "</header>\n";
}

// A window report's interval and its GPU busy share.
KSCOPE_DECL void html_window(html_page& p) {
  const session_report& r = p.r;
  std::string& out = p.out;
  const report_window& w = *r.window;
  html_section_open(out, "window", "Window");
  html_paragraph(out, "window " + std::to_string(w.sequence) + ": the " +
                          format_duration_ns(static_cast<double>(w.duration_ns)) +
                          " since the previous one (calls and times of this window only)");
  html_paragraph(out, "GPU busy " + (std::isfinite(w.gpu_busy_share)
                                         ? format_fixed(100.0 * w.gpu_busy_share, 1) + "% of the window"
                                         : "unknown: " + w.gpu_busy_unavailable));
  out += "</section>\n";
}

// The scope tree: host and GPU medians with their intervals, totals, shares.
KSCOPE_DECL void html_scopes(html_page& p) {
  const session_report& r = p.r;
  std::string& out = p.out;
  html_section_open(out, "scopes", "Scopes");
  bool any_unsteady = false, any_capped = false, any_contradicted = false;
  std::vector<std::vector<html_cell>> rows;
  for (std::size_t i : p.order) {
    const scope_report& s = r.scopes[i];
    const bool contradicted = s.gpu_calls && !s.gpu_time_disagreement.empty();
    any_contradicted = any_contradicted || contradicted;
    std::string flags;
    if (!s.host_ns.steady && s.host_ns.n > 0) {
      flags += "!";
      any_unsteady = true;
    }
    if (s.samples_capped) {
      flags += "*";
      any_capped = true;
    }
    if (!p.shown[i]) continue;
    const auto ci_title = [](const summary& m) {
      return std::isfinite(m.median_ci.lo) ? "95% interval of the median: [" + format_duration_ns(m.median_ci.lo) +
                                                 ", " + format_duration_ns(m.median_ci.hi) + "]"
                                           : std::string();
    };
    rows.push_back({html_name_cell(s, s.cross_thread ? " ~" : ""),
                    {std::to_string(s.calls) + flags, "", 0, 1},
                    {format_duration_ns(s.host_ns.median), "", 0, 1},
                    {format_ci_percent(s.host_ns), ci_title(s.host_ns), 0, 1},
                    {s.gpu_calls ? format_duration_ns(s.gpu_ns.median) : "-", "", 0, 1},
                    {contradicted  ? "≠CUPTI"
                     : s.gpu_calls ? format_ci_percent(s.gpu_ns)
                                   : "",
                     contradicted  ? s.gpu_time_disagreement
                     : s.gpu_calls ? ci_title(s.gpu_ns)
                                   : "",
                     0, 1},
                    {format_duration_ns(s.host_inclusive_ns), "", 0, 1},
                    {share_text(s.share_of_parent), "", 0, 1}});
  }
  if (r.scopes.empty()) {
    html_paragraph(out, "(no scopes recorded)");
  } else {
    append_html_grid(out, {"scope", "calls", "host median", "CI95", "GPU median", "CI95", "total", "% parent"}, rows,
                     "scopes");
  }
  if (p.left_out > 0) html_paragraph(out, html_left_out(p.left_out), "note");
  std::string legend =
      "median: per call; CI95: half-width of its 95% interval (the interval itself in the cell's tooltip); total: "
      "host time over all calls; % parent: share of the parent's total";
  if (any_unsteady) legend += "; !: no steady state found (all samples after the first used)";
  if (any_capped) legend += "; *: samples capped at " + std::to_string(r.sample_cap) + " (reservoir)";
  legend += "; ~: cross-thread range";
  if (any_contradicted)
    legend += "; ≠CUPTI: the scope's events disagree with its kernels' time (see the warnings); not its GPU time";
  const report_sort used = resolve_sort(r.scopes, r.sort);
  if (!r.scopes.empty() && used != report_sort::recorded)
    legend += used == report_sort::gpu ? "; siblings sorted by GPU time" : "; siblings sorted by host time";
  html_paragraph(out, legend, "legend");
  bool any_activity = false;
  for (const scope_report& s : r.scopes) any_activity = any_activity || s.gpu_activity.has_value();
  if (!r.gpu_time && !any_activity && !p.gpu_bars.empty()) {
    html_figure(out, p.gpu_bars, p.gpu_bars_caption);
    p.gpu_bars_drawn = true;
  }
  out += "</section>\n";
}

// The cross-thread ranges' latency percentiles, and their picture.
KSCOPE_DECL void html_requests(html_page& p) {
  const session_report& r = p.r;
  std::string& out = p.out;
  html_section_open(out, "requests", "Requests (cross-thread ranges)");
  std::vector<std::vector<html_cell>> rows;
  std::vector<latency_row> latencies;
  for (const scope_report& s : r.scopes) {
    if (!s.cross_thread || s.host_ns.n == 0) continue;
    const summary& h = s.host_ns;
    rows.push_back({{s.path, "", 0, 1},
                    {std::to_string(s.calls) + (s.samples_capped ? "*" : ""), "", 0, 1},
                    {format_duration_ns(h.median), "", 0, 1},
                    {format_ci_percent(h), "", 0, 1},
                    {format_duration_ns(h.p90), "", 0, 1},
                    {format_duration_ns(h.p99), "", 0, 1},
                    {format_duration_ns(h.mean), "", 0, 1},
                    {format_duration_ns(h.max), "", 0, 1}});
    latencies.push_back(
        latency_row{s.path, s.calls, h.min, h.median, h.median_ci.lo, h.median_ci.hi, h.p90, h.p99, h.mean, h.max});
  }
  latency_chart_options o;
  o.title = "Request latency distribution";
  html_figure(out, latency_svg(latencies, o),
              "Each range's start-to-end time: min to max, p50 to p90 and p90 to p99, the p50's 95% interval and "
              "the mean (the report keeps these percentiles, not the samples).");
  if (rows.size() > html_max_scope_rows) rows.resize(html_max_scope_rows);
  append_html_grid(out, {"range", "count", "p50", "CI95", "p90", "p99", "mean", "max"}, rows);
  html_paragraph(out,
                 "start-to-end time of each range instance (any threads); p50 with the half-width of its 95% "
                 "interval; p90, p99: type 7 percentiles; *: from a uniform sample of the instances",
                 "legend");
  out += "</section>\n";
}

// The GPU-time account's busy share, the step timeline, idle gaps and host waits.
KSCOPE_DECL void html_gpu_busy(html_page& p) {
  const session_report& r = p.r;
  std::string& out = p.out;
  const gpu_time_report& t = *r.gpu_time;
  html_section_open(out, "gpu-busy", "GPU busy and idle");
  if (std::isfinite(t.busy_share)) {
    html_paragraph(out, gpu_busy_text(t), "headline");
  } else if (!t.unknown_reason.empty()) {
    html_paragraph(out,
                   "GPU busy: unknown (" + t.unknown_reason +
                       "); idle time could be records the account never got, so no idle gap is listed",
                   "headline");
  } else if (r.window && !r.window->gpu_busy_unavailable.empty()) {
    html_paragraph(out, "GPU busy: - (" + r.window->gpu_busy_unavailable + ")", "headline");
  } else {
    html_paragraph(out, "GPU busy: - (no GPU events in CUPTI's recent-event ring)", "headline");
  }
  std::string step_path;
  const std::vector<step_timeline> steps = compose_step_timelines(r, &step_path);
  if (!steps.empty()) {
    timeline_options o;
    o.title = "Step timeline: " + step_path;
    html_figure(out, step_timeline_svg(steps, o),
                "Composed from the report's per-call figures, not one recorded step (the trace, "
                "session::write_trace, has single steps): the step's host time at its p50 and p99. Host lane: "
                "its child scopes in the order first seen, each at its median time per call times its calls per "
                "step; a scope that runs in fewer steps (a prefill) is drawn in a step only above the percentile "
                "its share of the steps leaves, since the slow steps are the ones that ran it. GPU lane: the "
                "step's GPU busy time per call at the same percentile, split by the child scopes that launched "
                "it and placed from their start; the rest of the lane is idle.");
  }
  if (!t.idle_gaps.empty()) {
    std::vector<std::vector<html_cell>> rows;
    for (const gpu_idle_gap& g : t.idle_gaps)
      rows.push_back({{html_ns(g.ns), "", 0, 1},
                      {format_duration_ns(static_cast<double>(g.start_ns - t.window_start_ns)), "", 0, 1},
                      {g.open_path.empty() ? std::string("(no scope)") : g.open_path, "", 0, 1}});
    out += "<h3>Longest GPU idle gaps</h3>\n";
    append_html_grid(out, {"idle gap", "starts at (from the window's start)", "scope open on the host"}, rows,
                     "text-last");
  }
  if (!t.idle_by_scope.empty() && t.busy_ns < t.wall_ns) {
    std::vector<std::vector<html_cell>> rows;
    for (std::size_t i = 0; i < t.idle_by_scope.size() && i < 20; ++i) {
      const gpu_idle_by_scope& g = t.idle_by_scope[i];
      rows.push_back({{g.path.empty() ? std::string("(no scope)") : g.path, "", 0, 1},
                      {format_duration_ns(g.ns), "", 0, 1},
                      {std::to_string(g.gaps), "", 0, 1}});
    }
    out += "<h3>GPU idle by the scope open on the host</h3>\n";
    append_html_grid(out, {"scope open on the host", "GPU idle", "gaps"}, rows);
    if (t.idle_by_scope.size() > 20)
      html_paragraph(out, std::to_string(t.idle_by_scope.size() - 20) + " more in the JSON report", "note");
  }
  const std::vector<const scope_report*> waiting = scopes_waiting(r.scopes);
  if (!waiting.empty()) {
    std::vector<std::vector<html_cell>> rows;
    for (std::size_t i = 0; i < waiting.size() && i < 20; ++i) {
      const scope_report& s = *waiting[i];
      const host_sync_totals& h = s.gpu_activity->host_sync;
      rows.push_back({{s.path, "", 0, 1},
                      {html_ns(h.ns), "", 0, 1},
                      {std::to_string(h.count), "", 0, 1},
                      {s.calls > 0 && !t.windowed  // traced in windows: the waits are the windows' only
                           ? format_general(static_cast<double>(h.count) / static_cast<double>(s.calls), 3)
                           : std::string("-"),
                       "", 0, 1}});
    }
    out += "<h3>Host waits for the GPU (stream/event/device synchronizes)</h3>\n";
    append_html_grid(out, {"scope", "waited", "synchronizes", "per scope call"}, rows);
    if (waiting.size() > 20)
      html_paragraph(out, std::to_string(waiting.size() - 20) + " more in the JSON report", "note");
  }
  out += "</section>\n";
}

// GPU time per scope: the bars and the per-call table.
KSCOPE_DECL void html_gpu_time(html_page& p) {
  const session_report& r = p.r;
  std::string& out = p.out;
  const gpu_time_report& t = *r.gpu_time;
  html_section_open(out, "gpu-time", "GPU time per scope (CUPTI)");
  if (!p.gpu_bars.empty()) {
    html_figure(out, p.gpu_bars, p.gpu_bars_caption);
    p.gpu_bars_drawn = true;
  }
  std::vector<std::vector<html_cell>> rows;
  bool any_unknown = false;
  std::map<node_id, const scope_gpu_time*> by_id;  // t.find() per scope is quadratic in a large run
  for (const scope_gpu_time& g : t.scopes) by_id.emplace(g.id, &g);
  for (std::size_t i : p.order) {
    const scope_report& s = r.scopes[i];
    const auto found = by_id.find(s.id);
    const scope_gpu_time* g = found == by_id.end() ? nullptr : found->second;
    if (g == nullptr || (g->gpu_ns <= 0 && !(g->busy_per_call_ns.n > 0 && g->busy_per_call_ns.max > 0))) continue;
    any_unknown = any_unknown || !g->totals_known;
    if (!p.shown[i]) continue;
    rows.push_back({html_name_cell(s),
                    {g->totals_known ? format_duration_ns(g->gpu_ns) : "-", "", 0, 1},
                    {share_text(g->share_of_gpu), "", 0, 1},
                    {g->totals_known ? std::to_string(g->kernel_count) : "-", "", 0, 1},
                    {std::to_string(g->calls_seen), "", 0, 1},
                    {g->calls_seen ? format_duration_ns(g->busy_per_call_ns.median) : "-", "", 0, 1},
                    {g->calls_seen ? format_duration_ns(g->gaps_per_call_ns.median) : "-", "", 0, 1},
                    {g->calls_seen ? format_general(g->kernels_per_call, 3) : "-", "", 0, 1}});
  }
  append_html_grid(out, {"scope", "GPU total", "% GPU", "kernels", "calls", "busy/call", "gaps/call", "kern/call"},
                   rows);
  std::string legend = std::string("GPU total: the scope's own kernel busy time plus its copies and memsets (") +
                       (r.window ? "its events in this window" : "all records") + "); % GPU: of the sum over scopes";
  if (any_unknown) legend += " (-: unknown, the GPU event ring lost some of this window's events)";
  legend +=
      "; calls: calls in the host ring; busy/call, gaps/call (medians), kern/call (mean): from those calls, "
      "children's GPU work included; gaps: time between the call's GPU work";
  html_paragraph(out, legend, "legend");
  html_paragraph(out, gpu_time_covered_text(t), "legend");
  out += "</section>\n";
}

// The roofline picture, the placements and their advice.
KSCOPE_DECL void html_roofline(html_page& p) {
  const session_report& r = p.r;
  std::string& out = p.out;
  html_section_open(out, "roofline", "Roofline (median call)");
  if (!p.roofline.empty()) {
    html_figure(out, p.roofline, p.roofline_caption);
    p.roofline_drawn = true;
  }
  std::vector<std::vector<html_cell>> rows;
  std::vector<std::string> notes;
  for (std::size_t i = 0; i < r.scopes.size(); ++i) {
    const scope_report& s = r.scopes[i];
    if (!s.roofline || !p.shown[i]) continue;
    const placement& at = *s.roofline;
    rows.push_back(
        {html_name_cell(s),
         {format_si(at.flops_per_s, "FLOP/s"), "", 0, 1},
         {format_si(at.bytes_per_s, "B/s"), "", 0, 1},
         {format_fixed(at.intensity, at.intensity < 10 ? 2 : 0), "", 0, 1},
         {format_fixed(100 * at.fraction_of_roof, 0) + "%", "", 0, 1},
         {std::isfinite(s.fraction_of_measured_roof) ? format_fixed(100 * s.fraction_of_measured_roof, 0) + "%"
                                                     : std::string("-"),
          "", 0, 1},
         {placement_impossible(s) ? "impossible" : placement_roof_unknown(s) ? "roof?" : "", "", 0, 1},
         {s.roof, s.roof_basis, 0, 1}});
    // As text() says them: a time other than the events, the kernels' roof, or why it is not placed.
    const std::string timed = s.roofline_time_source.empty() || s.roofline_time_source == "events"
                                  ? std::string()
                                  : " [timed by " + s.roofline_time_source + "]";
    const std::string basis = s.roof_basis.empty() ? std::string() : " [" + s.roof_basis + "]";
    const bool unplaced = !placement_has_limiter(s);
    if (unplaced || !timed.empty() || !basis.empty())
      notes.push_back(s.path + timed + basis + (unplaced ? ": " + placement_advice(s) : std::string()));
  }
  append_html_grid(out, {"scope", "FLOP/s", "B/s", "FLOP/B", "% roof", "% measured roof", "placement", "roof"}, rows);
  html_paragraph(out,
                 "% roof: of the theoretical roof at the scope's intensity; % measured roof: of the measured roof; "
                 "what limits each scope: its verdict (Verdict per scope)",
                 "legend");
  html_list(out, notes, "advice");
  out += "</section>\n";
}

// CUPTI's kernels, copies and busy time per scope, per device.
KSCOPE_DECL void html_gpu_activity(html_page& p) {
  const session_report& r = p.r;
  std::string& out = p.out;
  html_section_open(out, "gpu-activity", "GPU activity (CUPTI)");
  if (!p.gpu_bars_drawn && !p.gpu_bars.empty()) {
    html_figure(out, p.gpu_bars, p.gpu_bars_caption);
    p.gpu_bars_drawn = true;
  }
  bool any_comm = false, any_multi_device = false, any_graph_scaled = false;
  std::vector<std::vector<html_cell>> rows;
  for (std::size_t i = 0; i < r.scopes.size(); ++i) {
    const scope_report& s = r.scopes[i];
    if (!s.gpu_activity) continue;
    const node_gpu_activity& a = *s.gpu_activity;
    any_comm = any_comm || a.comm_kernel_count > 0;
    any_multi_device = any_multi_device || a.devices.size() > 1;
    any_graph_scaled = any_graph_scaled || a.graph_scaled();
    if (!p.shown[i]) continue;
    const auto bytes = [&](copy_direction d) {
      const copy_totals& c = a.copies(d);
      return c.count ? format_si(static_cast<double>(c.bytes), "B") : std::string("-");
    };
    const auto comm = [&](std::uint64_t n, std::int64_t ns) { return n ? html_ns(ns) : std::string("-"); };
    rows.push_back({html_name_cell(s),
                    {std::to_string(a.kernel_count), "", 0, 1},
                    {html_ns(a.kernel_ns), "", 0, 1},
                    {comm(a.comm_kernel_count, a.comm_ns), "", 0, 1},
                    {html_ns(a.busy_ns), "", 0, 1},
                    {html_ns(a.idle_ns), "", 0, 1},
                    {bytes(copy_direction::h2d), "", 0, 1},
                    {bytes(copy_direction::d2h), "", 0, 1},
                    {bytes(copy_direction::d2d), "", 0, 1}});
    if (a.devices.size() > 1)
      for (const device_gpu_activity& d : a.devices)
        rows.push_back({{"@GPU " + std::to_string(d.device), "", s.depth, 1},
                        {std::to_string(d.kernel_count), "", 0, 1},
                        {html_ns(d.kernel_ns), "", 0, 1},
                        {comm(d.comm_kernel_count, d.comm_ns), "", 0, 1},
                        {html_ns(d.busy_ns), "", 0, 1},
                        {"", "", 0, 1},
                        {"", "", 0, 1},
                        {"", "", 0, 1},
                        {"", "", 0, 1}});
    if (!a.graph_capture.empty()) rows.push_back({{graph_capture_text(a.graph_capture, r.scopes), "", s.depth, 9}});
    if (a.graph_scaled()) rows.push_back({{graph_replays_text(a), "", s.depth, 9}});
  }
  append_html_grid(out, {"scope", "kernels", "kernel time", "comm", "busy", "idle", "H2D", "D2H", "D2D"}, rows);
  std::string legend =
      "kernel time: sum of kernel durations; busy: union of the node's kernel intervals; "
      "idle: its GPU span with none of its work running";
  if (any_comm) legend += "; comm: NCCL kernels' time (part of kernel time)";
  if (any_multi_device) legend += "; @GPU n: the scope's kernels on device n";
  if (any_graph_scaled)
    legend +=
        "; graph replays traced as one record count their kernels and time scaled from the replays "
        "of the same graph traced node by node";
  html_paragraph(out, legend, "legend");
  out += "</section>\n";
}

// The kernels by total GPU time.
KSCOPE_DECL void html_top_kernels(html_page& p) {
  const session_report& r = p.r;
  std::string& out = p.out;
  html_section_open(out, "top-kernels", "Top kernels (CUPTI)");
  constexpr std::size_t max_kernels = 50;
  std::vector<std::vector<html_cell>> rows;
  bool any_scaled = false;
  for (std::size_t i = 0; i < r.top_kernels.size() && i < max_kernels; ++i) {
    const kernel_summary& k = r.top_kernels[i];
    any_scaled = any_scaled || k.scaled_calls > 0;
    rows.push_back({{k.name + (k.scaled_calls > 0 ? " ~" + std::to_string(k.scaled_from_replays) : std::string()),
                     k.mangled_name, 0, 1},
                    {std::to_string(k.calls), "", 0, 1},
                    {html_ns(k.total_ns), "", 0, 1},
                    {format_duration_ns(k.median_ns), "", 0, 1},
                    {dims_text(k.grid) + (k.launch_config_varies ? "*" : ""), "", 0, 1},
                    {dims_text(k.block), "", 0, 1},
                    {std::to_string(k.registers_per_thread), "", 0, 1},
                    {format_si(static_cast<double>(k.static_shared_bytes + k.dynamic_shared_bytes), "B"), "", 0, 1}});
  }
  append_html_grid(out, {"kernel", "calls", "total", "median", "grid", "block", "registers", "shared memory"}, rows);
  if (r.top_kernels.size() > max_kernels)
    html_paragraph(out, "(" + std::to_string(r.top_kernels.size() - max_kernels) + " more in the JSON report)", "note");
  std::string legend = "*: a later call used another grid, block or shared memory size";
  if (any_scaled)
    legend +=
        "; ~N: calls and total include replays of CUDA graphs traced as one record, scaled from the N replays "
        "of the same graphs traced node by node; median from traced calls only";
  html_paragraph(out, legend, "legend");
  out += "</section>\n";
}

// Hardware counters per scope, their verdicts and what they cost.
KSCOPE_DECL void html_counters(html_page& p) {
  const session_report& r = p.r;
  std::string& out = p.out;
  // A report built by hand may hold scopes' counters without the session's status.
  const session_counters_status st = r.counters ? *r.counters : session_counters_status{};
  html_section_open(out, "counters", "Hardware counters per scope");
  html_paragraph(out, "sampled calls profiled; their times are not in the tables above", "legend");
  if (r.counters) html_paragraph(out, st.status, "headline");
  bool any = false;
  for (const scope_report& s : r.scopes) any = any || s.counters.has_value();
  if (!p.roofline_drawn && !p.roofline.empty()) {
    html_figure(out, p.roofline, p.roofline_caption);
    p.roofline_drawn = true;
  }
  if (!any) {
    if (const std::string cost = describe_cost(st.cost); !cost.empty()) html_paragraph(out, cost);
  } else {
    std::vector<std::vector<html_cell>> rows;
    std::vector<std::string> details;
    for (std::size_t i = 0; i < r.scopes.size(); ++i) {
      const scope_report& s = r.scopes[i];
      if (!s.counters || !p.shown[i]) continue;
      const scope_counter_report& c = *s.counters;
      const double dram = dram_bytes_moved(c.totals);
      const double sm = metric_value(c.totals, counter_metric::sm_throughput);
      const double mem = metric_value(c.totals, counter_metric::memory_throughput);
      const std::uint64_t whole = c.profiled_calls - std::min(c.profiled_calls, c.partial_calls);
      const std::string per_call_kernels =
          whole > 0 ? format_fixed(static_cast<double>(c.kernels) / static_cast<double>(whole), 1)
          : c.partial_calls > 0
              ? ">" + format_fixed(static_cast<double>(c.partial_kernels) / static_cast<double>(c.partial_calls), 0)
              : std::string("-");
      rows.push_back({html_name_cell(s),
                      {std::to_string(c.profiled_calls), "", 0, 1},
                      {per_call_kernels + (c.partial_calls > 0 && whole > 0 ? "*" : ""), "", 0, 1},
                      {counter_cell(c.per_call(dram), "B"), "", 0, 1},
                      {counter_cell(c.per_call(c.measured.flops.total), "FLOP"), "", 0, 1},
                      {std::isfinite(sm) ? format_fixed(sm, 1) : "-", "", 0, 1},
                      {std::isfinite(mem) ? format_fixed(mem, 1) : "-", "", 0, 1}});
      if (c.declared_vs_measured && !c.declared_vs_measured->text.empty())
        details.push_back(s.path + ": " + c.declared_vs_measured->text);
      if (const std::string measured = describe(c.measured); !measured.empty())
        details.push_back(s.path + ": measured roofline: " + measured);
      if (c.failed_calls)
        details.push_back(s.path + ": " + std::to_string(c.failed_calls) + " profiled calls failed (notes below)");
      if (c.partial_calls)
        details.push_back(s.path + ": " + std::to_string(c.partial_calls) + " of " + std::to_string(c.profiled_calls) +
                          " profiled calls launched more kernels than the counter-data image held: their kernels are "
                          "left out and the sums rest on the " +
                          std::to_string(whole) + " calls profiled whole");
      if (c.groups > 1) details.push_back(s.path + ": " + metric_calls_text(c));
    }
    append_html_grid(
        out, {"scope", "profiled", "kernels/call", "DRAM/call", "FLOP/call", "SM %", "memory %"}, rows);
    html_paragraph(out,
                   "profiled: calls profiled; kernels/call: kernels per profiled call (* some calls had more kernels "
                   "than the counter image held, >N: every call did); DRAM/call, FLOP/call: measured (DRAM read + "
                   "write, and the write-back after the call where measured; SASS FP instructions, fma = 2); SM %, "
                   "memory %: speed-of-light throughputs, kernel-time weighted; what limits each scope: its verdict "
                   "(Verdict per scope)",
                   "legend");
    html_list(out, details, "details");
    std::string line = std::to_string(st.passes) + " counter passes";
    if (st.skipped_busy) line += "; " + std::to_string(st.skipped_busy) + " due calls not profiled (another pass ran)";
    if (const std::string cost = describe_cost(st.cost); !cost.empty()) line += "; " + cost;
    if (r.counters) html_paragraph(out, line);
  }
  std::vector<std::string> notes;
  for (const std::string& n : st.notes) notes.push_back("note: " + n);
  html_list(out, notes, "notes");
  out += "</section>\n";
}

// PM sampling: per-scope means, verdicts, per-step distributions, coverage.
KSCOPE_DECL void html_sampled_metrics(html_page& p) {
  const session_report& r = p.r;
  std::string& out = p.out;
  const session_sampled_metrics& m = *r.sampled_metrics;
  html_section_open(out, "sampled-metrics", "GPU metrics sampled while running (PM sampling, no replay)");
  html_paragraph(out, m.status, "headline");
  if (m.running) {
    const sampled_metrics_report& d = m.data;
    std::vector<std::string> columns = {"scope", "samples", "idle"};
    for (const std::string& metric : d.metrics) columns.push_back(sampled_metric_label(metric));
    const auto row = [&](html_cell name, std::uint64_t samples, double idle, const std::vector<sampled_value>& values) {
      std::vector<html_cell> cells = {std::move(name),
                                      {std::to_string(samples), "", 0, 1},
                                      {std::isfinite(idle) ? format_fixed(100 * idle, 0) + "%" : "-", "", 0, 1}};
      for (std::size_t i = 0; i < d.metrics.size(); ++i) {
        const bool is_count = i < d.is_count.size() && d.is_count[i];
        cells.push_back({sampled_value_text(d.metrics[i], is_count, i < values.size() ? values[i].mean : std::nan("")),
                         d.metrics[i], 0, 1});
      }
      return cells;
    };
    std::vector<std::vector<html_cell>> rows;
    rows.push_back(row({"device (every sample)", "", 0, 1}, d.device_wide.samples, 1 - d.device_wide.busy_share(),
                       d.device_wide.values));
    for (std::size_t i = 0; i < r.scopes.size(); ++i) {
      const scope_report& s = r.scopes[i];
      const node_sampled_metrics* n = d.find(static_cast<sampled_node>(s.id));
      if (n == nullptr || n->samples == 0 || !p.shown[i]) continue;
      rows.push_back(row(html_name_cell(s), n->samples, n->idle_share(), n->values));
    }
    append_html_grid(out, columns, rows);
    if (!m.attributed)
      html_paragraph(out, "(no kernel activity reached the sampler: per-scope rows need the CUPTI collector running)",
                     "note");
    html_paragraph(out,
                   "idle: share of the sampled time, around the scope's kernels, with no kernel running; values: "
                   "time-weighted means over the samples the scope's kernels overlapped (GPU-wide counters), counts "
                   "as rates; what limits each scope: its verdict (Verdict per scope)",
                   "legend");
    std::vector<std::string> step_lines;
    for (const step_sampled_metrics& st : d.steps) {
      std::string path = "node " + std::to_string(st.node);
      for (const scope_report& s : r.scopes)
        if (static_cast<sampled_node>(s.id) == st.node) path = s.path;
      std::string line = "step " + path + ": " + std::to_string(st.calls) + " calls sampled";
      if (st.calls_without_samples) line += " (" + std::to_string(st.calls_without_samples) + " without samples)";
      for (std::size_t i = 0; i < d.metrics.size() && i < st.values.size(); ++i) {
        const bool is_count = i < d.is_count.size() && d.is_count[i];
        line += "; " + sampled_metric_label(d.metrics[i]) + " p50 " +
                sampled_value_text(d.metrics[i], is_count, st.values[i].p50) + " p90 " +
                sampled_value_text(d.metrics[i], is_count, st.values[i].p90);
      }
      step_lines.push_back(line);
    }
    if (step_lines.size() > html_max_scope_rows) step_lines.resize(html_max_scope_rows);
    html_list(out, step_lines, "details");
    html_paragraph(out, sampled_coverage_text(m));
    std::vector<std::string> notes;
    for (const std::string& n : m.notes) notes.push_back("note: " + n);
    html_list(out, notes, "notes");
  }
  out += "</section>\n";
}

// The one conclusion per scope, its evidence and what was not collected under it.
KSCOPE_DECL void html_verdicts(html_page& p) {
  const session_report& r = p.r;
  std::string& out = p.out;
  html_section_open(out, "verdicts", "Verdict per scope");
  html_paragraph(out,
                 "one conclusion each: measured evidence decides (the busiest unit nearest its peak, counters or "
                 "sampled metrics), declared work only where nothing measured did; the evidence under it",
                 "legend");
  out += "<ul class=\"verdicts\">\n";
  for (std::size_t i = 0; i < r.scopes.size(); ++i) {
    const scope_report& s = r.scopes[i];
    if (!s.verdict || !p.shown[i]) continue;
    out += "<li><span class=\"verdict\" data-kind=\"";
    out += to_string(s.verdict->verdict.kind);
    out += "\">";
    append_xml_escaped(out, s.path + ": " + verdict_headline(*s.verdict));
    out += "</span>";
    std::vector<std::string> lines;
    html_list(out, verdict_lines(*s.verdict), "evidence");
    out += "</li>\n";
  }
  out += "</ul>\n</section>\n";
}

// The CUPTI collector's status line.
KSCOPE_DECL void html_cupti(html_page& p) {
  const session_report& r = p.r;
  std::string& out = p.out;
  html_section_open(out, "cupti", "CUPTI");
  html_paragraph(out, "CUPTI: " + r.cupti_status, "headline");
  out += "</section>\n";
}

// What kscope could not do, and the event-pool note.
KSCOPE_DECL void html_warnings(html_page& p) {
  const session_report& r = p.r;
  std::vector<std::string> lines;
  if (r.gpu_timing_skipped)
    lines.push_back("note: " + std::to_string(r.gpu_timing_skipped) +
                    " stream scopes ran without GPU timing (event pool cap)");
  for (const std::string& w : r.warnings) {
    // A status shown as its own section above is not said again (text() does the same).
    if (w == r.cupti_status || (r.sampled_metrics && w == r.sampled_metrics->status) ||
        (r.counters && w == r.counters->status))
      continue;
    lines.push_back("warning: " + w);
  }
  std::vector<std::string> section_problems;
  (void)printed_feature_sections(r, section_problems);
  for (const std::string& problem : section_problems) lines.push_back("warning: " + problem);
  if (lines.empty()) return;
  html_section_open(p.out, "warnings", "Warnings and notes");
  html_list(p.out, lines, "warnings");
  p.out += "</section>\n";
}

}  // namespace detail
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace kscope
