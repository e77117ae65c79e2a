// kscope/session/feature.hpp — the one interface between a feature and the session.
//
// A report is the scopes' statistics (always) plus one section per feature that ran: GPU
// metrics sampled while running, per-scope hardware counters, where a serving loop's GPU
// time went. Each of those is a `session_feature` registered with the session, and the
// session knows it only through this interface:
//
//   register  session::add_feature(f): from now on every report asks f for its section
//             (enable_metric_sampling(), enable_counters() and the session itself
//             register the built-in ones, session/detail/features.hpp);
//   snapshot  f.snapshot(now): before the recorder is copied, f takes what it collected up
//             to now, so the scopes' data is at least as recent as f's; it returns the
//             data of its section for this one report (reports may run concurrently);
//   section   section.add_to(out, evidence): after the scopes are summarized, the section
//             writes its part of the report from its data and the evidence every feature
//             may read (scopes, GPU activity, clock, peaks): a report_section of its own in
//             out.sections (report/section.hpp: every printer prints it, parse_report reads
//             it back), and what it concluded for a scope in that scope's feature_evidence,
//             which the verdict weighs with the rest (verdict/scope_verdict.hpp). Neither
//             needs an edit of report/ or verdict/. A feature that throws loses its section
//             in that report, with a warning; the report goes on.
//
// write_trace() asks each feature for tracks beside the kernels (add_trace_tracks).
//
//   struct queue_depth final : kscope::session_feature {
//     struct printed final : kscope::report_section {
//       int peak = 0;
//       std::string key() const override { return "queue_depth"; }
//       std::string heading() const override { return "Queue depth"; }
//       std::string text(const kscope::session_report&) const override { return "peak " + std::to_string(peak) + "\n"; }
//       std::string json() const override { return "{\"peak\":" + std::to_string(peak) + "}"; }
//     };
//     struct section final : kscope::feature_section {
//       int peak = 0;
//       void add_to(kscope::session_report& out, const kscope::report_evidence&) override {
//         auto p = std::make_shared<printed>();
//         p->peak = peak;
//         out.sections.push_back(std::move(p));
//       }
//     };
//     const char* name() const noexcept override { return "queue_depth"; }
//     std::unique_ptr<kscope::feature_section> snapshot(std::int64_t) override {
//       auto s = std::make_unique<section>();
//       s->peak = peak.load();
//       return s;
//     }
//     std::atomic<int> peak{0};
//   };
//   kscope::session::global().add_feature(std::make_shared<queue_depth>());
#pragma once

#include "../core/config.hpp"
#include "../core/detail/clock.hpp"
#include "../evidence/activity_results.hpp"
#include "../device/device.hpp"
#include "../report/data.hpp"
#include "../report/trace.hpp"
#include "../scope/recorder.hpp"

#include <cstdint>
#include <memory>

namespace kscope {

// What every feature may read while a report is built. Pointers are never null.
struct report_evidence {
  const recorder_snapshot* scopes = nullptr;      // the recorder's copy (names, samples, tree)
  const gpu_activity_report* activity = nullptr;  // the GPU activity source's (empty when off)
  const detail::tick_map* clock = nullptr;        // the scopes' ticks to kscope's ns clock
  const device_peaks* peaks = nullptr;            // the roofs scopes are placed against, or null
  bool timeline = false;  // the activity collector ran (or ran and stopped): GPU intervals exist
};

// One feature's part of one report: what snapshot() took, written into the report once the
// scopes are summarized.
class feature_section {
 public:
  virtual ~feature_section() = default;
  virtual void add_to(session_report& out, const report_evidence& evidence) = 0;
};

class session_feature {
 public:
  virtual ~session_feature() = default;
  // Unique among the registered features; registering a second with the same name
  // replaces the first.
  [[nodiscard]] virtual const char* name() const noexcept = 0;
  // Step 1 of a report, before the recorder is copied (no kscope lock held). nullptr: no
  // section in this report.
  [[nodiscard]] virtual std::unique_ptr<feature_section> snapshot(std::int64_t now_ns) = 0;
  // write_trace(): tracks beside the kernels (sampled metrics as counters, for instance).
  virtual void add_trace_tracks(trace_options& options, std::int64_t now_ns) {
    (void)options;
    (void)now_ns;
  }
};

}  // namespace kscope
