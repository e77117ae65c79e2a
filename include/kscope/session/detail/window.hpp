// kscope/session/detail/window.hpp — what session::window() adds to the scopes of a window:
// the interval it covers and the GPU's busy share over it, from the GPU-time accounting
// (evidence/gpu_time.hpp) on that interval.
//
// Why the GPU side is not simply the CUPTI aggregates: those are sums over the whole run,
// and nothing in them says when. The activity collector's ring of recent GPU events does,
// so the window's busy share, idle gaps and per-scope GPU time come from the events in the
// window; when the ring no longer holds every event from the window's start on (it
// overwrote one that ended later: more GPU events than it holds, delivered out of time
// order across streams) or nothing collects them, the share is unknown, each scope's GPU
// total with it, and the report says why instead of guessing.
//
//   detail::add_window(out, taken, since_ns, until_ns, gpu, collecting, trace, clock);  // session::window()
#pragma once

#include "../../core/config.hpp"
#include "../../core/detail/clock.hpp"
#include "../../core/detail/number_format.hpp"
#include "../../activity/collector.hpp"
#include "../../report/data.hpp"
#include "../../scope/recorder_snapshot.hpp"
#include "../../evidence/gpu_time.hpp"
#include "features.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

namespace kscope {
namespace detail {

// Fills out.window from the recorder's window `taken`, which covers [since_ns, until_ns]
// (the session converts its ticks once, so that one window's end is the next one's start to
// the nanosecond) and, when `collecting` (the activity source is running), out.gpu_time and
// the busy share from the source's recent events `gpu` and the recorder's trace ring
// `trace`. `out.scopes` must be summarized already: they are the nodes the accounting names.
KSCOPE_DECL void add_window(session_report& out, const recorder_window& taken, std::int64_t since_ns,
                            std::int64_t until_ns, const gpu_activity_report& gpu, bool collecting,
                            const recorder_trace& trace, const tick_map& clock);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL void add_window(session_report& out, const recorder_window& taken, std::int64_t since_ns,
                            std::int64_t until_ns, const gpu_activity_report& gpu, bool collecting,
                            const recorder_trace& trace, const tick_map& clock) {
  report_window w;
  w.sequence = taken.sequence;
  w.since_ns = since_ns;
  w.until_ns = std::max(since_ns, until_ns);
  w.duration_ns = w.until_ns - w.since_ns;
  if (!collecting) {
    w.gpu_busy_unavailable =
        "GPU activity is not being collected (session::enable_cupti() or KSCOPE_CUPTI=1 measures the busy share)";
  } else if (w.duration_ns <= 0) {
    w.gpu_busy_unavailable = "the window is empty (no time passed since the previous one)";
  } else {
    // The window's scopes carry no CUPTI aggregates (they are the run's): the accounting
    // takes each scope's time from its own events in the window.
    gpu_time_report t = account_session_gpu_time(out, gpu, trace, clock, w.since_ns, w.until_ns);
    if (std::isfinite(t.busy_share)) {
      w.gpu_busy_share = t.busy_share;
      w.gpu_busy_ns = t.busy_ns;
    } else if (!t.unknown_reason.empty()) {
      w.gpu_busy_unavailable = "the GPU-time account has holes: " + t.unknown_reason;
    } else {
      // Otherwise unknown only when the ring overflowed and holds every event only from after the
      // window's start (gpu_time.hpp: the latest end of an event it dropped, or its oldest).
      w.gpu_busy_unavailable =
          t.gpu_known_from_ns == std::numeric_limits<std::int64_t>::max()
              ? std::string("the GPU event ring overflowed and holds no event")
              : "the GPU event ring (the most recent " + std::to_string(gpu.recent.size()) +
                    " events) holds every event only from " +
                    format_fixed(static_cast<double>(t.gpu_known_from_ns - w.since_ns) / 1e6, 1) +
                    " ms after the window's start: take windows more often to know the busy share";
    }
    out.gpu_time = std::move(t);
  }
  out.window = std::move(w);
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail
}  // namespace kscope
