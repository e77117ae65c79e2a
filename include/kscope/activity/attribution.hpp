// kscope/activity/attribution.hpp — GPU activity records attributed to the scope that launched them.
//
// Pure C++ (no CUDA, no CUPTI headers): the CUPTI collector (collector.hpp) turns each
// CUpti_Activity into a plain record and feeds it here; the CPU tests feed synthetic ones
// through the very same functions. This header holds gpu_attribution and includes the
// pieces it is built from, so including it gives the whole CUPTI data model:
//
//   evidence/activity_records.hpp  kernel / memcpy / memset records, unscoped_node
//   correlation.hpp           the launch table and THE lookup rule (find_launch)
//   graph_nodes.hpp           CUDA graph node -> the scope that built it (capture time)
//   evidence/communication.hpp     which kernels are NCCL communication
//   activity.hpp              the results: per-node activity, kernel summaries, counters
//   detail/interval_union.hpp busy time as a union of intervals
//   detail/kernel_table.hpp   per-kernel-name statistics (the top-kernels table)
//
// How a record finds its scope (correlation.hpp says why): its correlation id (a copy's
// runtime correlation id when that one is not found) is looked up once, when the record
// arrives. Found: the node open on the launching thread at launch time (unscoped_node when
// none was open, counted `unscoped`). Not found: unscoped_node, counted `unattributed`
// (and `unattributed_evicted` when a newer launch had taken the entry). Lookups never
// consume an entry, so every kernel of a CUDA-graph launch is attributed.
//
// Per node: kernel count and time, GPU busy time (union of kernel intervals over all
// streams), idle time inside the node's GPU span, memcpy per direction (and, of them, the
// copies to or from pageable host memory and the synchronous ones), memset (and the
// synchronous ones), the communication share and a per-device split. Per kernel name: a top-kernels table like
// torch.profiler's key_averages().table().
//
// CUDA graphs: a replayed kernel belongs to the scope that LAUNCHED the graph (above).
// When its graph node was built in another scope (graph_nodes.hpp), the launch-time
// node's graph_capture breakdown also says which scope built it and how much ran, so a
// replay shows which phase each kernel came from; it never moves the record.
//
// Everything here is bounded: the correlation table, the intervals kept per node, the
// kernel-name table and the recent-event ring all have caps (see attribution_options and
// memory_bytes()).
#pragma once

#include "../core/config.hpp"
#include "../evidence/activity_results.hpp"
#include "../evidence/communication.hpp"
#include "correlation.hpp"
#include "graph_nodes.hpp"
#include "detail/interval_union.hpp"
#include "detail/kernel_table.hpp"
#include "../evidence/activity_records.hpp"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace kscope {

// Caps and sizes; the defaults hold a few MiB at most (see gpu_attribution::memory_bytes).
//
//   kscope::attribution_options o;
//   o.recent_capacity = 0;  // no trace events, aggregates only
//   kscope::gpu_attribution attribution(o);
struct attribution_options {
  std::size_t correlation_capacity = std::size_t{1} << 18;  // 4 MiB of table
  std::size_t recent_capacity = 65536;   // GPU events kept for the trace (0: none)
  std::size_t max_kernel_names = 4096;   // distinct names; more fold into "(other kernels)"
  std::size_t median_samples = 256;      // duration reservoir per kernel name
  std::size_t max_intervals_per_node = 256;  // before the oldest are folded (busy/idle)
  std::size_t max_nodes = 65536;         // distinct nodes with GPU work
  std::size_t graph_node_capacity = std::size_t{1} << 17;  // graph nodes remembered (2 MiB)
};

// The attribution core: consumes records, keeps per-node and per-kernel aggregates.
// Not thread-safe by itself except for launches() (the lock-free launch table): the CUPTI
// collector serializes add_* and report() with its own mutex.
//
//   kscope::gpu_attribution attribution;
//   attribution.launches().record_launch(7, /*node*/ 3, /*thread*/ 0);
//   attribution.add_kernel(k);               // k.correlation_id == 7 -> node 3
//   auto r = attribution.report();
//   r.find(3)->kernel_count;                 // 1
// Receives every attributed kernel, copy and memset interval as the attribution applies
// it (the PM-sample attribution in session/live_metric_sampling.hpp). Called under the collector's
// attribution lock from CUPTI's buffer thread: add_interval must be quick, take no kscope
// lock other than its own and never call back into the collector.
class kernel_interval_sink {
 public:
  virtual ~kernel_interval_sink() = default;
  virtual void add_interval(const kernel_interval& interval) noexcept = 0;
};

namespace detail {
struct attribution_feed;  // detail/parse.hpp: the buffer walk's way in
}  // namespace detail

class gpu_attribution {
 public:
  explicit gpu_attribution(attribution_options options = {});

  gpu_attribution(const gpu_attribution&) = delete;
  gpu_attribution& operator=(const gpu_attribution&) = delete;

  [[nodiscard]] correlation_table& launches() noexcept { return table_; }
  // Graph node -> capture-time scope; the collector's resource callback writes it.
  [[nodiscard]] graph_node_table& graph_nodes() noexcept { return graph_nodes_; }
  [[nodiscard]] const attribution_options& options() const noexcept { return options_; }
  // Hands every interval to `sink` from now on (nullptr: to nobody). The caller keeps the
  // sink alive while it is set.
  void set_interval_sink(kernel_interval_sink* sink) noexcept { interval_sink_ = sink; }

  // CUPTI's graph-level trace has been enabled in this process (the collector says so once;
  // it stays said). From then on CUPTI stamps a replay traced node by node wrongly: its
  // first kernel ends late by an offset (3 ms to 290 ms measured on an H100, CUDA 13.0) and
  // every later kernel of the replay is shifted by as much, whether graph-level trace is
  // toggled inside the launch's callback or around a drained stream
  // (bench/graph_node_timestamps_probe.cu). So such a replay's kernels are held until a
  // replay of the same graph traced as one record (whose span is right) gives the span to
  // check it against; a replay longer than that by more than graph_retime_tolerance is
  // moved back by the excess (graph_replays_retimed) before it is counted anywhere.
  void set_graph_level_trace(bool on) noexcept { graph_level_trace_ = graph_level_trace_ || on; }

  // Graph replays that no replay traced as one record will ever check (their graph was built
  // before the collector started, or while graph-level trace was off: CUPTI traces it node
  // by node only) carry unreferenced_replay_bit in their launch's thread index (the
  // collector's mark_unreferenced_replay): their kernels are counted as they come instead of
  // waiting for a reference that never comes (graph_replays_unreferenced).

  // Dispatches on r.kind.
  void add(const activity_record& r);

  void add_kernel(const kernel_record& k);

  void add_memcpy(const memcpy_record& m);

  void add_memset(const memset_record& s);

  // A synchronization: the host waited. Counted in its node's host_sync, never in the
  // node's GPU span, busy, idle or the GPU timeline (it is host time). A stream waiting
  // on an event is not a host wait: counted in sync_records only.
  void add_sync(const sync_record& y);

  // A CUDA-graph replay traced as one record (graph-level trace): attributed like a launch
  // (its correlation id is the graph launch's), its span counted in its node and graph;
  // the node's kernel figures for it are scaled from the node-level replays of the same
  // graph at report time (report(): node_gpu_activity::scaled_*).
  void add_graph(const graph_record& g);

  // Records the buffer walk could not read (invalid kind mid-buffer).
  void note_malformed(std::uint64_t count = 1) noexcept;
  // Records CUPTI dropped for lack of buffer space (read outside any lock by the collector).
  void note_dropped_by_cupti(std::uint64_t count) noexcept;

  // Called after each buffer: kernel-name pointers are trusted within one buffer only.
  void end_of_buffer() noexcept { kernels_.end_of_buffer(); }

  // Forgets aggregates and events (kernel names, the launch table and the graph-node
  // table stay: a graph captured before a reset is still replayed after it).
  void reset();

  // Per-node aggregates, top kernels, counters, recent events, warnings.
  [[nodiscard]] gpu_activity_report report(std::size_t top_kernel_limit = 50);

  // Sorted by total GPU time, descending; ties by name. limit 0: all.
  [[nodiscard]] std::vector<kernel_summary> top_kernels(std::size_t limit = 0) const {
    return kernels_.top(limit);
  }

  // Oldest first.
  [[nodiscard]] std::vector<gpu_activity_event> recent_events() const;

  [[nodiscard]] const attribution_counters& counters() const noexcept { return counters_; }

  // Bytes held now (tables, intervals, reservoirs, events, names); bounded by the caps.
  [[nodiscard]] std::size_t memory_bytes() const noexcept;

 private:
  struct device_accumulator {
    explicit device_accumulator(std::uint32_t device, std::size_t max_intervals);
    device_gpu_activity totals;
    detail::interval_union kernel_union;
  };

  // One CUDA graph replayed from one node: its replays traced as one record (span only)
  // and those traced node by node, whose kernels give the per-replay and per-span-ns
  // figures the others are scaled by. A node-level replay is told apart from the next by
  // its correlation id (every kernel of one launch carries the launch's); the last few are
  // kept open so that each one's span (first start to last end) can be taken.
  struct graph_accumulator {
    std::uint32_t graph_id = 0;
    std::uint64_t untraced = 0;  // replays traced as one record
    std::int64_t untraced_span_ns = 0;
    std::uint64_t traced = 0;  // replays traced node by node
    std::uint64_t traced_kernels = 0;
    std::int64_t traced_kernel_ns = 0;
    std::int64_t traced_span_ns = 0;  // of the replays no longer open
    std::int64_t traced_busy_ns = 0;  // per replay min(kernel time, span): its kernels' union on one stream
    struct open_replay {
      std::uint32_t correlation_id = 0;
      std::int64_t first_ns = 0, last_ns = 0, kernel_ns = 0;
    };
    std::array<open_replay, 4> open{};
    std::size_t next_open = 0;
    struct kernel_share {
      const detail::kernel_stats* stats;
      std::uint64_t calls;
      std::int64_t ns;
    };
    std::vector<kernel_share> kernels;  // per kernel name, node-level replays only
    static constexpr std::size_t max_kernel_names = 256;
    // The node-level replays' kernels built in another scope, per capture scope: the
    // replays traced as one record are scaled into the node's graph_capture from these.
    struct capture_share {
      node_id captured_in = 0;
      std::uint64_t kernels = 0;
      std::int64_t ns = 0;
    };
    std::vector<capture_share> captured;
    static constexpr std::size_t max_capture_shares = 8;
    // Node-level replays' kernels waiting for the check against the graph's reference span
    // (set_graph_level_trace), in arrival order; their names resolved already (CUPTI's name
    // pointers last one buffer). A replay is let go once a later one of the same graph
    // begins or a report is made: its kernels may arrive over several buffers.
    struct held_kernel {
      kernel_record record;
      detail::kernel_stats* stats;
      launch_origin origin;
    };
    std::vector<held_kernel> held;
    std::size_t held_replays = 0;  // distinct correlation ids in `held`
    std::uint64_t released_unchecked = 0;  // a graph never traced as one record so far
    // The replay let go last, and the shift it got: its kernels that arrive after it was let
    // go (a later buffer) get the same one.
    std::uint32_t released_correlation = 0;
    bool released_as_one_record = false;  // it was counted as one record (below)
    // The most kernels a node-level replay of this graph brought: a replay with fewer lost
    // some (under PM sampling CUPTI stamped one kernel of a replay to end before it began,
    // and offset the others unevenly).
    std::size_t most_kernels_per_replay = 0;
    std::int64_t released_head_start_ns = 0, released_late_from_ns = 0, released_shift_ns = 0;

    void add_traced_kernel(std::uint32_t correlation_id, std::int64_t start, std::int64_t end,
                           const detail::kernel_stats* stats);
    // Span and busy time over every node-level replay, the open ones included.
    [[nodiscard]] std::pair<std::int64_t, std::int64_t> traced_span_and_busy() const noexcept;
  };
  static constexpr std::size_t max_graphs_per_node = 64;

  struct node_accumulator {
    explicit node_accumulator(std::size_t max_intervals);
    node_gpu_activity totals;  // `devices` stays empty here: the split lives in `devices`
    detail::interval_union kernel_union;
    detail::interval_union activity_union;
    detail::interval_union comm_union;
    detail::interval_union compute_union;
    std::vector<device_accumulator> devices;  // at most max_devices_per_node
    std::size_t last_device = 0;              // index of the last device used (one per stream run)
    std::size_t max_intervals_per_union;
    // Two unions that, until the node's first communication kernel or its second device,
    // are given exactly the kernels kernel_union is given, in the same order, and so would
    // be in exactly its state: compute_union (every kernel but NCCL's) and the first
    // device's kernel_union (the node's first kernel created that device). Until then they
    // stay empty and kernel_union stands for them (the report reads it in their place);
    // the first kernel that sets one apart copies kernel_union into it as it is before
    // that kernel. Every kernel went to four unions; two made the buffer walk about 14 %
    // faster (bench/attribution_bench.cpp), and the memory they held is not held twice.
    bool compute_union_shared = true;
    detail::interval_union& compute_union_now() noexcept { return compute_union_shared ? kernel_union : compute_union; }
    // The same holds for the first device's kernel totals (count, time, and of them NCCL's):
    // until the node's second device, `totals` holds them and the first device's stay
    // untouched; the kernel that sets the device apart copies them over first. So a node on
    // one GPU, the common case, keeps nothing per device per kernel (device_for and four
    // additions on every kernel record before). sole_device says which case holds: the
    // first device's ordinal while its union and totals are shared, no_device_yet before
    // the node's first kernel, several_devices once they are set apart.
    static constexpr std::int64_t no_device_yet = -1;
    static constexpr std::int64_t several_devices = -2;
    std::int64_t sole_device = no_device_yet;
    [[nodiscard]] bool shares_device(const device_accumulator& d) const noexcept {
      return sole_device >= 0 && &d == &devices.front();
    }
    detail::interval_union& device_union_now(device_accumulator& d) noexcept {
      return shares_device(d) ? kernel_union : d.kernel_union;
    }
    [[nodiscard]] device_gpu_activity device_totals_now(const device_accumulator& d) const noexcept;
    std::vector<graph_accumulator> graphs;    // at most max_graphs_per_node
    std::size_t last_graph = 0;
    // Replays traced as one record of graphs past the cap: spans counted busy, kernels unknown.
    std::uint64_t unsampled_replays = 0;
    std::int64_t unsampled_span_ns = 0;

    // The accumulator of graph `id`, or nullptr past the cap (counted in `over_cap`).
    graph_accumulator* graph_for(std::uint32_t id, std::uint64_t& over_cap);

    // The accumulator of `device`, or nullptr past the cap. The last one used is checked
    // inline (a stream's records come in runs); the others in device_for_uncached.
    inline device_accumulator* device_for(std::uint32_t device);
    device_accumulator* device_for_uncached(std::uint32_t device);
  };

  static attribution_options sanitize(attribution_options o);

  // The buffer walk (detail/parse.hpp) parses each CUPTI record by its kind and hands it
  // straight to that kind's path below: through add() every record cost a call and a second
  // switch on the kind it had just been parsed by.
  friend struct detail::attribution_feed;

  // The per-record path, from here to next_recent, is declared inline: in the compiled mode
  // (kscope::compiled, built with -fPIC) an ordinary external function is never inlined,
  // since another library might interpose it, and a call per step of every record made the
  // compiled mode's buffer walk a quarter slower than the header-only one. Only
  // kscope_compiled.cpp (or a header-only program) defines and calls them; add() and the
  // public add_* are the ways in. The cold parts (a node, device or kernel name not seen
  // lately, a graph-launched record) stay out of line.
  inline void kernel_in(const kernel_record& k);
  inline void memcpy_in(const memcpy_record& m);
  inline void memset_in(const memset_record& s);

  KSCOPE_FORCE_INLINE inline bool valid_times(std::int64_t start, std::int64_t end) noexcept;

  // Launched inside a call the per-scope counters profiled (correlation.hpp marks it): its
  // time includes kernel replay, so it is counted and kept out of every aggregate.
  KSCOPE_FORCE_INLINE inline bool profiled(const launch_origin& origin) noexcept;
  // Whether the launch carries unreferenced_replay_bit; takes it off the thread index.
  KSCOPE_FORCE_INLINE inline bool take_unreferenced_mark(launch_origin& origin) noexcept;

  // The one path from a record to its node: correlation_table::find_launch's rule, and
  // what each answer counts. Decided now, never revisited (see find_launch for why).
  // Forced inline: called, it returned its 8 bytes through two 4-byte stores the caller
  // read back as one load, which the CPU cannot forward (a stall per record).
  KSCOPE_FORCE_INLINE inline launch_origin origin_of(std::uint32_t correlation_id,
                                                     std::uint32_t runtime_correlation_id) noexcept;

  // The node cache inline; a node not in it goes to node_for_uncached (which may move it
  // to unscoped_node past the node cap). That one takes the node alone, so that the
  // per-record path's launch_origin never has its address taken and stays in registers.
  KSCOPE_FORCE_INLINE inline node_accumulator& node_for(launch_origin& origin);
  node_accumulator& node_for_uncached(node_id& node);

  // What every kind does to its node: the span and the union of all its activity.
  KSCOPE_FORCE_INLINE inline node_accumulator& account(const activity_header& r, launch_origin& origin);

  // Forced inline, as apply_transfer is: called, the launch_origin passed by value was
  // stored as two halves and read back whole, which the CPU cannot forward (a stall on
  // every record).
  KSCOPE_FORCE_INLINE inline void apply_kernel(const kernel_record& k, launch_origin origin,
                                               detail::kernel_stats& stats);
  // A kernel of `acc` on another device than its sole one so far (node_accumulator::
  // sole_device), before it is counted: the node's first kernel records its device; one on
  // a second device sets the first device's union and totals apart. Out of line: once per
  // node, and once more for a node on several GPUs.
  static void leave_sole_device(node_accumulator& acc, std::uint32_t device);

  // A node-level replay's kernel, applied: its share in the graph's figures that scale the
  // replays traced as one record (out of apply_kernel, which every kernel runs).
  void note_traced_replay_kernel(node_accumulator& acc, const kernel_record& k, const detail::kernel_stats& stats,
                                 node_id captured_in, std::int64_t ns);

  // A node-level replay's kernel while graph-level trace is on: held in its graph's
  // accumulator (set_graph_level_trace says why); false when it has none (past the cap).
  bool hold_graph_kernel(const kernel_record& k, launch_origin origin, detail::kernel_stats& stats);

  // The held replays of `g`, each checked against the graph's reference span (retimed when
  // it is longer by more than the tolerance; counted unchecked when there is no reference
  // and `unchecked_too`), then applied. Without a reference and !unchecked_too they stay.
  // `keep_correlation` (not 0): that replay stays held (its kernels may still be arriving).
  void release_held(graph_accumulator& g, bool unchecked_too, std::uint32_t keep_correlation = 0);

  // A node-level replay that lost kernels, counted as a replay traced as one record of
  // `span` from `start` (graph_replays_incomplete).
  void count_as_one_record(graph_accumulator& g, const graph_accumulator::held_kernel& head, std::int64_t start,
                           std::int64_t span);
  // Corrects one kernel of an already released replay the way that replay was.
  static void retime_like_released(const graph_accumulator& g, kernel_record& k) noexcept;

  // A graph-launched record: which scope built its node (graph_nodes_), and, when that is
  // not the launch-time node (after the node cap: the node the record really went to),
  // its share in that node's graph_capture breakdown. Counted whatever the answer.
  // Returns the capture scope when it is another than the launching one (0 otherwise).
  // Inline for the records no graph launched; the others go to note_graph_node.
  inline node_id note_graph_capture(node_accumulator& acc, std::uint64_t graph_node_id, node_id launch_node,
                                    bool kernel, std::int64_t ns);
  node_id note_graph_node(node_accumulator& acc, std::uint64_t graph_node_id, node_id launch_node, bool kernel,
                          std::int64_t ns);

  // The replays of each graph traced as one record, scaled from the node-level replays of
  // the same graph (graph_accumulator): kernels per replay, kernel and busy time per span
  // ns. Added to `a` and to the per-kernel `scaled` shares; a graph never traced per node
  // counts its spans as busy and its kernels as unknown.
  static void add_graph_estimates(const node_accumulator& acc, node_gpu_activity& a,
                                  detail::kernel_table::scaled_shares& scaled);

  // Copies (per direction) and memsets: count, bytes and time in their bucket. Returns the
  // totals of the node the record went to (the caller adds the pageable and synchronous
  // buckets there).
  KSCOPE_FORCE_INLINE inline node_gpu_activity& apply_transfer(const activity_header& r, activity_kind kind,
                                                               memcpy_kind copy, std::uint64_t bytes,
                                                               launch_origin origin);

  // One record into one bucket: count, bytes, duration.
  static void add_copy(copy_totals& t, const activity_header& r, std::uint64_t bytes) noexcept {
    t.count += 1;
    t.bytes += bytes;
    t.ns += r.end_ns - r.start_ns;
  }

  static std::string_view memcpy_label(memcpy_kind kind) noexcept;

  // One event of the trace ring as it is kept: the gpu_activity_event it stands for, less
  // what its kind implies (recent_events() rebuilds the event). The name is the kernel's
  // (kept as its statistics, which hold it and never move), else "Memcpy HtoD"-style by
  // copy kind, "Memset" or "CUDA graph"; a kernel has no bytes, the others no launch shape.
  // 88 bytes where the event is 120: the ring (65536 events by default) is far larger than
  // the L2 cache, and writing it was a sixth of the buffer walk's time, mostly the memory
  // traffic; kept this way the walk measured about a tenth faster (bench/attribution_bench.cpp).
  struct recent_event {
    std::int64_t start_ns;
    std::int64_t end_ns;
    std::uint64_t graph_node_id;
    union {
      const detail::kernel_stats* kernel;  // kind kernel
      std::uint64_t bytes;                 // kinds memcpy and memset
    };
    std::uint32_t correlation_id;
    std::uint32_t device;
    std::uint32_t context;
    std::uint32_t stream;
    std::uint32_t graph_id;
    node_id node;
    std::uint32_t thread_index;
    std::array<std::int32_t, 3> grid;  // kind kernel
    std::array<std::int32_t, 3> block;
    activity_kind kind;
    memcpy_kind copy_kind;
  };
  static_assert(sizeof(void*) != 8 || sizeof(recent_event) == 88, "recent_event grew");

  // Sets what every kind has (the record's header, kind, launch origin; copy kind unknown);
  // the caller adds its kind's own fields.
  KSCOPE_FORCE_INLINE static inline void fill_recent(recent_event& e, const activity_header& r, activity_kind kind,
                                                     const launch_origin& origin) noexcept;
  // The ring slot the next event goes to, the overwritten event's end noted: the per-record
  // path fills it in place. Forced inline: left to GCC it stayed a call on every record.
  KSCOPE_FORCE_INLINE inline recent_event& next_recent();
  // The gpu_activity_event a ring slot stands for.
  static gpu_activity_event event_of(const recent_event& e);

  std::vector<std::string> warnings(const attribution_counters& c) const;

  attribution_options options_;
  correlation_table table_;
  graph_node_table graph_nodes_;
  attribution_counters counters_{};
  std::unordered_map<node_id, node_accumulator> nodes_;
  static constexpr std::size_t node_cache_size = 64;
  struct node_cache_entry {
    node_id node = 0;
    node_accumulator* accumulator = nullptr;
  };
  std::array<node_cache_entry, node_cache_size> node_cache_{};
  detail::kernel_table kernels_;
  std::vector<recent_event> recent_;
  std::size_t recent_next_ = 0;  // the slot to overwrite next, once full
  bool recent_full_ = false;     // recent_ holds recent_capacity events
  kernel_interval_sink* interval_sink_ = nullptr;
  bool graph_level_trace_ = false;
  std::uint32_t last_unreferenced_correlation_ = 0;  // the newest unreferenced replay counted
  // Per CUDA graph (whichever scope replayed it), the spans of its latest replays traced as
  // one record: the reference its node-level replays are checked against (their median).
  struct graph_reference {
    std::array<std::int64_t, 15> spans{};
    std::size_t seen = 0;
  };
  std::unordered_map<std::uint32_t, graph_reference> graph_references_;
  static constexpr std::size_t max_graph_references = 4096;
  [[nodiscard]] std::int64_t reference_span_ns(std::uint32_t graph_id) const;
};

// A node-level replay traced while graph-level trace is on that is longer than its graph's
// replays traced as one record (median span) by more than this share of that span, and by
// more than graph_retime_min_excess_ns, carries CUPTI's timestamp offset: retimed. Tracing
// node by node itself lengthens a replay by well under this (0.01 % on an H100:
// bench/graph_node_timestamps_probe.cu, node_only against the graph records).
inline constexpr double graph_retime_tolerance = 0.25;
inline constexpr std::int64_t graph_retime_min_excess_ns = 50'000;
// Where one kernel of a chain is stamped to start before the one before it ends by at most
// this, the overlap is CUPTI's stamping (~65 ns on an H100), not two kernels running.
inline constexpr std::int64_t graph_chain_stamp_overlap_ns = 1'000;
// Node-level replays held per graph before the oldest are let go without a reference.
inline constexpr std::size_t graph_max_held_replays = 8;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL void gpu_attribution::note_malformed(std::uint64_t count) noexcept { counters_.dropped_malformed += count; }

KSCOPE_DECL void gpu_attribution::note_dropped_by_cupti(std::uint64_t count) noexcept { counters_.dropped_by_cupti += count; }
#endif  // KSCOPE_DETAIL_DEFINITIONS

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL gpu_attribution::gpu_attribution(attribution_options options) : options_(sanitize(options)),
      table_(options_.correlation_capacity),
      graph_nodes_(options_.graph_node_capacity),
      kernels_(options_.max_kernel_names, options_.median_samples) {
  recent_.reserve(options_.recent_capacity);
}

KSCOPE_DECL void gpu_attribution::add(const activity_record& r) {
  switch (r.kind) {
    case activity_kind::kernel: kernel_in(r.kernel); break;
    case activity_kind::memcpy: memcpy_in(r.memcpy); break;
    case activity_kind::memset: memset_in(r.memset); break;
    case activity_kind::synchronization: add_sync(r.sync); break;
    case activity_kind::graph: add_graph(r.graph); break;
    default:
      ++counters_.records_seen;
      ++counters_.ignored_records;
      break;
  }
}

KSCOPE_DECL void gpu_attribution::add_kernel(const kernel_record& k) { kernel_in(k); }

KSCOPE_DECL void gpu_attribution::add_memcpy(const memcpy_record& m) { memcpy_in(m); }

KSCOPE_DECL void gpu_attribution::add_memset(const memset_record& s) { memset_in(s); }

inline void gpu_attribution::kernel_in(const kernel_record& k) {
  ++counters_.records_seen;
  if (!valid_times(k.start_ns, k.end_ns)) return;
  ++counters_.kernel_records;
  launch_origin origin = origin_of(k.correlation_id, 0);
  if (profiled(origin)) return;
  const bool unreferenced = take_unreferenced_mark(origin);
  detail::kernel_stats& stats = kernels_.find_or_add(k.name, counters_.distinct_kernels_over_cap);
  if (graph_level_trace_ && k.graph_id != 0) {
    if (KSCOPE_UNLIKELY(unreferenced)) {
      // No reference will come for its graph: counted now, as CUPTI stamped it; each replay
      // once (its kernels may come late and out of order: only a newer id is a new replay).
      if (last_unreferenced_correlation_ == 0 ||
          static_cast<std::int32_t>(k.correlation_id - last_unreferenced_correlation_) > 0) {
        last_unreferenced_correlation_ = k.correlation_id;
        ++counters_.graph_replays_unreferenced;
      }
    } else if (hold_graph_kernel(k, origin, stats)) {
      return;
    }
  }
  apply_kernel(k, origin, stats);
}

KSCOPE_DECL bool gpu_attribution::hold_graph_kernel(const kernel_record& k, launch_origin origin,
                                                    detail::kernel_stats& stats) {
  launch_origin o = origin;
  node_accumulator& acc = node_for(o);
  std::uint64_t over_cap = 0;  // counted when the replay is applied
  graph_accumulator* g = acc.graph_for(k.graph_id, over_cap);
  if (g == nullptr) return false;
  if (k.correlation_id != 0 && k.correlation_id == g->released_correlation) {
    if (g->released_as_one_record) return true;  // inside that record's estimate already
    // A kernel of a replay already let go, from a later buffer: shifted like the rest of it.
    kernel_record late = k;
    retime_like_released(*g, late);
    apply_kernel(late, o, stats);
    return true;
  }
  const bool new_replay = std::none_of(g->held.begin(), g->held.end(), [&](const graph_accumulator::held_kernel& h) {
    return h.record.correlation_id == k.correlation_id;
  });
  if (new_replay && !g->held.empty()) {
    // A later replay began: the earlier ones are whole. Let them go where they can be checked
    // (or unchecked, past the cap of replays waiting). Its first kernel's start is honest
    // (CUPTI's offset moves a replay's kernels after its head only).
    release_held(*g, /*unchecked_too=*/g->held_replays >= graph_max_held_replays, k.correlation_id);
  }
  g->held.push_back({k, &stats, o});
  g->held.back().record.name = nullptr;  // CUPTI's string lives for this buffer only
  if (new_replay) ++g->held_replays;
  return true;
}

KSCOPE_DECL std::int64_t gpu_attribution::reference_span_ns(std::uint32_t graph_id) const {
  const auto it = graph_references_.find(graph_id);
  if (it == graph_references_.end()) return 0;
  const graph_reference& r = it->second;
  const std::size_t n = std::min(r.seen, r.spans.size());
  if (n == 0) return 0;
  std::array<std::int64_t, 15> v = r.spans;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n / 2), v.begin() + static_cast<std::ptrdiff_t>(n));
  return v[n / 2];
}

KSCOPE_DECL void gpu_attribution::count_as_one_record(graph_accumulator& g, const graph_accumulator::held_kernel& head,
                                                      std::int64_t start, std::int64_t span) {
  ++counters_.graph_replays_incomplete;
  g.released_as_one_record = true;
  activity_header r = head.record;
  r.start_ns = start;
  r.end_ns = start + span;
  launch_origin origin = head.origin;
  account(r, origin);
  if (interval_sink_ != nullptr) interval_sink_->add_interval({r.start_ns, r.end_ns, origin.node, r.device});
  g.untraced += 1;
  g.untraced_span_ns += span;
  if (options_.recent_capacity > 0) fill_recent(next_recent(), r, activity_kind::graph, origin);
}

KSCOPE_DECL void gpu_attribution::retime_like_released(const graph_accumulator& g, kernel_record& k) noexcept {
  if (g.released_shift_ns == 0) return;
  if (k.start_ns >= g.released_late_from_ns) {
    k.start_ns -= g.released_shift_ns;
    k.end_ns -= g.released_shift_ns;
  }
}

KSCOPE_DECL void gpu_attribution::release_held(graph_accumulator& g, bool unchecked_too, std::uint32_t keep_correlation) {
  if (g.held.empty()) return;
  const std::int64_t reference = reference_span_ns(g.graph_id);
  if (reference <= 0 && !unchecked_too) return;
  std::vector<graph_accumulator::held_kernel> held;
  held.swap(g.held);
  g.held_replays = 0;
  if (keep_correlation != 0) {
    const auto kept = std::stable_partition(held.begin(), held.end(), [&](const graph_accumulator::held_kernel& h) {
      return h.record.correlation_id != keep_correlation;
    });
    g.held.assign(kept, held.end());
    g.held_replays = g.held.empty() ? 0 : 1;
    held.erase(kept, held.end());
  }
  // Replay by replay (a correlation id each), in the order they arrived.
  std::stable_sort(held.begin(), held.end(), [](const auto& a, const auto& b) {
    return a.record.correlation_id < b.record.correlation_id;
  });
  for (std::size_t first = 0; first < held.size();) {
    std::size_t last = first;
    std::int64_t start = held[first].record.start_ns, end = held[first].record.end_ns;
    std::size_t earliest = first;
    while (last < held.size() && held[last].record.correlation_id == held[first].record.correlation_id) {
      if (held[last].record.start_ns < start) {
        start = held[last].record.start_ns;
        earliest = last;
      }
      end = std::max(end, held[last].record.end_ns);
      ++last;
    }
    const std::int64_t span = end - start;
    g.released_correlation = held[first].record.correlation_id;
    g.released_as_one_record = false;
    g.released_head_start_ns = start;
    g.released_late_from_ns = 0;
    g.released_shift_ns = 0;
    const std::size_t kernels = last - first;
    g.most_kernels_per_replay = std::max(g.most_kernels_per_replay, kernels);
    if (reference > 0 && kernels < g.most_kernels_per_replay) {
      // Kernels lost (CUPTI stamped one to end before it began: dropped and counted) and the
      // rest offset unevenly (an H100 under PM sampling: 2 of 10 replays). No kernel of it
      // can be placed; the replay counts as one record of the graph's usual span, scaled
      // like those, from its true start.
      count_as_one_record(g, held[earliest], start, reference);
      first = last;
      continue;
    }
    if (reference <= 0) {
      ++counters_.graph_replays_unchecked;
      ++g.released_unchecked;
    } else {
      const std::int64_t excess = span - reference;
      const double allowed = std::max(graph_retime_tolerance * static_cast<double>(reference),
                                      static_cast<double>(graph_retime_min_excess_ns));
      if (static_cast<double>(excess) > allowed) {
        // CUPTI's offset: the first kernel ends late by it and every kernel that followed it
        // is late by as much. Those start at its late end (a few ns before or after it on an
        // H100); one that ran beside it (a parallel branch) started before its true end, the
        // offset earlier: halfway between tells them apart.
        //
        // The offset is `excess`: the replay's first kernel starts true (it is the earliest)
        // and the replay is taken to have run the reference's span, so the shifted kernels'
        // true place is fixed by the reference. The other kernels' durations and the gaps
        // between them are CUPTI's own (all shifted alike), so the head gets what they leave
        // of the reference. Measured on an H100 (50 kernels, 2.85 ms a replay), these rests
        // were as long node by node under graph sampling as with every replay traced per
        // node (2805 vs 2804.5 us): tracing per node does not stretch them. The next launch
        // of the graph is no better a clock: the host starts it later after a node-level
        // replay, which made a 46 us head read up to 60 us.
        const std::int64_t shift = excess;
        kernel_record& head = held[earliest].record;
        const std::int64_t late_from = head.end_ns - excess / 2;
        for (std::size_t i = first; i < last; ++i) {
          kernel_record& r = held[i].record;
          if (i == earliest) continue;
          if (r.start_ns >= late_from) {
            r.start_ns -= shift;
            r.end_ns -= shift;
          }
        }
        head.end_ns = std::max(head.start_ns, head.end_ns - shift);
        // Under PM sampling CUPTI offsets only the first few kernels after the head, and the
        // span (so `excess`) comes out short: the head would keep part of the offset. Another
        // kernel of the replay that started after the head bounds its end (the chain's next
        // kernel cannot start before it ends; a parallel branch makes the bound tighter,
        // never looser). And the head has at most what the other kernels' durations leave of
        // the graph's span. Their durations summed, not their union: under PM sampling's
        // pattern the kernels shifted by the short excess land on top of ones that were not
        // shifted, and a union would lose them. Less only the overlap CUPTI stamps into a
        // chain (each kernel starts ~65 ns before the one before it ends on an H100): over 49
        // kernels that took 3 us, 7 %, off a 46 us head.
        std::int64_t next_start = head.end_ns;
        std::vector<std::pair<std::int64_t, std::int64_t>> others;
        others.reserve(last - first);
        for (std::size_t i = first; i < last; ++i) {
          if (i == earliest) continue;
          others.emplace_back(held[i].record.start_ns, held[i].record.end_ns);
          if (held[i].record.start_ns > head.start_ns) next_start = std::min(next_start, held[i].record.start_ns);
        }
        std::sort(others.begin(), others.end());
        std::int64_t others_ns = 0, previous_end = others.empty() ? 0 : others.front().first;
        for (const auto& [s, e] : others) {
          const std::int64_t overlap = previous_end - s;
          const bool stamped_overlap = overlap > 0 && overlap <= graph_chain_stamp_overlap_ns && overlap < e - s;
          others_ns += (e - s) - (stamped_overlap ? overlap : 0);
          previous_end = std::max(previous_end, e);
        }
        std::int64_t head_end = std::min(head.end_ns, next_start);
        if (others_ns < reference) head_end = std::min(head_end, head.start_ns + (reference - others_ns));
        head.end_ns = std::max(head.start_ns, head_end);
        g.released_late_from_ns = late_from;
        g.released_shift_ns = shift;
        ++counters_.graph_replays_retimed;
      }
    }
    for (std::size_t i = first; i < last; ++i) apply_kernel(held[i].record, held[i].origin, *held[i].stats);
    first = last;
  }
}

inline void gpu_attribution::memcpy_in(const memcpy_record& m) {
  ++counters_.records_seen;
  if (!valid_times(m.start_ns, m.end_ns)) return;
  ++counters_.memcpy_records;
  launch_origin origin = origin_of(m.correlation_id, m.runtime_correlation_id);
  if (profiled(origin)) return;
  (void)take_unreferenced_mark(origin);
  node_gpu_activity& totals = apply_transfer(m, activity_kind::memcpy, m.kind, m.bytes, origin);
  // A pageable copy is synchronous for the host whatever the API: counted there only.
  if (m.pageable()) {
    add_copy(totals.memcpy_pageable[static_cast<std::size_t>(direction_of(m.kind))], m, m.bytes);
  } else if (m.synchronous) {
    add_copy(totals.memcpy_sync, m, m.bytes);
  }
}

inline void gpu_attribution::memset_in(const memset_record& s) {
  ++counters_.records_seen;
  if (!valid_times(s.start_ns, s.end_ns)) return;
  ++counters_.memset_records;
  launch_origin origin = origin_of(s.correlation_id, 0);
  if (profiled(origin)) return;
  (void)take_unreferenced_mark(origin);
  node_gpu_activity& totals = apply_transfer(s, activity_kind::memset, memcpy_kind::unknown, s.bytes, origin);
  if (s.synchronous) add_copy(totals.memset_sync, s, s.bytes);
}

KSCOPE_DECL void gpu_attribution::add_sync(const sync_record& y) {
  ++counters_.records_seen;
  if (!valid_times(y.start_ns, y.end_ns)) return;
  ++counters_.sync_records;
  if (!host_blocks(y.kind)) return;
  launch_origin origin = origin_of(y.correlation_id, 0);
  if (profiled(origin)) return;
  host_sync_totals& h = node_for(origin).totals.host_sync;
  h.count += 1;
  h.ns += y.end_ns - y.start_ns;
  switch (y.kind) {
    case sync_kind::stream: ++h.stream; break;
    case sync_kind::event: ++h.event; break;
    case sync_kind::context: ++h.context; break;
    default: break;
  }
}

KSCOPE_DECL void gpu_attribution::add_graph(const graph_record& g) {
  ++counters_.records_seen;
  if (!valid_times(g.start_ns, g.end_ns)) return;
  ++counters_.graph_launch_records;
  launch_origin origin = origin_of(g.correlation_id, 0);
  if (profiled(origin)) return;
  (void)take_unreferenced_mark(origin);
  node_accumulator& acc = account(g, origin);
  if (interval_sink_ != nullptr) interval_sink_->add_interval({g.start_ns, g.end_ns, origin.node, g.device});
  const std::int64_t span = g.end_ns - g.start_ns;
  if (g.graph_id != 0 && (graph_references_.size() < max_graph_references || graph_references_.count(g.graph_id) > 0)) {
    graph_reference& ref = graph_references_[g.graph_id];
    ref.spans[ref.seen++ % ref.spans.size()] = span;
  }
  if (graph_accumulator* ga = acc.graph_for(g.graph_id, counters_.graphs_over_cap)) {
    ga->untraced += 1;
    ga->untraced_span_ns += span;
    // The newest held replay may still be arriving: it waits for a later one or a report.
    if (!ga->held.empty()) release_held(*ga, /*unchecked_too=*/false, ga->held.back().record.correlation_id);
  } else {
    acc.unsampled_replays += 1;
    acc.unsampled_span_ns += span;
  }
  if (options_.recent_capacity > 0) fill_recent(next_recent(), g, activity_kind::graph, origin);
}

KSCOPE_DECL void gpu_attribution::reset() {
  nodes_.clear();
  graph_references_.clear();
  node_cache_.fill(node_cache_entry{});
  kernels_.reset();
  recent_.clear();
  recent_next_ = 0;
  recent_full_ = false;
  counters_ = attribution_counters{};
}

KSCOPE_DECL gpu_activity_report gpu_attribution::report(std::size_t top_kernel_limit) {
    gpu_activity_report r;
    // Held node-level replays whose graph has a reference span by now are checked and
    // counted; the others stay held (in no figure, said in the warnings).
    std::uint64_t held = 0;
    for (auto& [id, acc] : nodes_) {
      (void)id;
      for (graph_accumulator& g : acc.graphs) {
        // A graph whose replays already went unchecked (none traced as one record past the
        // cap) lets the rest go too rather than leave them out of the report.
        // Every held replay goes: the session flushed CUPTI before asking, so what has not
        // come is not coming (CUPTI loses a kernel record now and then under PM sampling: a
        // replay waiting for it would leave the account with a hole for good). A kernel of
        // it that still comes later is shifted like the rest (retime_like_released).
        release_held(g, /*unchecked_too=*/g.released_unchecked > 0);
        held += g.held_replays;
      }
    }
    r.nodes.reserve(nodes_.size());
    std::uint64_t clipped = 0;
    detail::kernel_table::scaled_shares scaled;  // per kernel name, from graph scaling
    for (auto& [id, acc] : nodes_) {
      node_gpu_activity a = acc.totals;
      a.busy_ns = acc.kernel_union.total_ns();
      const std::int64_t active = acc.activity_union.total_ns();
      a.idle_ns = std::max<std::int64_t>(0, (a.last_end_ns - a.first_start_ns) - active);
      a.comm_busy_ns = acc.comm_union.total_ns();
      a.compute_busy_ns = acc.compute_union_now().total_ns();
      clipped += acc.kernel_union.clipped() + acc.activity_union.clipped() +
 acc.comm_union.clipped() + acc.compute_union_now().clipped();
      a.devices.reserve(acc.devices.size());
      for (auto& d : acc.devices) {
        device_gpu_activity split = acc.device_totals_now(d);
        split.busy_ns = acc.device_union_now(d).total_ns();
        clipped += acc.device_union_now(d).clipped();
        a.devices.push_back(split);
      }
      std::sort(a.devices.begin(), a.devices.end(),
[](const device_gpu_activity& x, const device_gpu_activity& y) { return x.device < y.device; });
      add_graph_estimates(acc, a, scaled);
      std::sort(a.graph_capture.begin(), a.graph_capture.end(),
[](const graph_capture_origin& x, const graph_capture_origin& y) {
  if (x.kernel_ns != y.kernel_ns) return x.kernel_ns > y.kernel_ns;
  if (x.copy_ns != y.copy_ns) return x.copy_ns > y.copy_ns;
  return x.captured_in < y.captured_in;
});
      r.nodes.emplace_back(id, a);
    }
    std::sort(r.nodes.begin(), r.nodes.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    r.top_kernels = kernels_.top(top_kernel_limit, scaled);
    r.counters = counters_;
    r.counters.busy_intervals_clipped = clipped;
    r.counters.graph_replays_held = held;
    r.counters.graph_nodes_evicted = graph_nodes_.evicted();
    r.recent = recent_events();
    r.warnings = warnings(r.counters);
    r.memory_bytes = memory_bytes();
    return r;
  }

KSCOPE_DECL std::vector<gpu_activity_event> gpu_attribution::recent_events() const {
  std::vector<gpu_activity_event> out;
  out.reserve(recent_.size());
  // Oldest first: from the next slot to overwrite once the ring has wrapped.
  const std::size_t oldest = recent_full_ ? recent_next_ : 0;
  for (std::size_t i = oldest; i < recent_.size(); ++i) out.push_back(event_of(recent_[i]));
  for (std::size_t i = 0; i < oldest; ++i) out.push_back(event_of(recent_[i]));
  return out;
}

KSCOPE_DECL std::size_t gpu_attribution::memory_bytes() const noexcept {
  std::size_t bytes = sizeof(*this) + table_.memory_bytes() + graph_nodes_.memory_bytes() +
      kernels_.memory_bytes();
  bytes += recent_.capacity() * sizeof(recent_event);
  bytes += graph_references_.size() * (sizeof(graph_reference) + 32);
  for (const auto& [id, acc] : nodes_) {
    (void)id;
    bytes += sizeof(node_accumulator) + 32 + acc.kernel_union.memory_bytes() +
             acc.activity_union.memory_bytes() + acc.comm_union.memory_bytes() +
             acc.compute_union.memory_bytes();
    for (const auto& d : acc.devices) bytes += sizeof(d) + d.kernel_union.memory_bytes();
    bytes += acc.totals.graph_capture.capacity() * sizeof(graph_capture_origin);
    for (const auto& g : acc.graphs)
      bytes += sizeof(g) + g.kernels.capacity() * sizeof(g.kernels[0]) + g.held.capacity() * sizeof(g.held[0]);
  }
  return bytes;
}

KSCOPE_DECL gpu_attribution::device_accumulator::device_accumulator(std::uint32_t device, std::size_t max_intervals) : kernel_union(max_intervals) {
  totals.device = device;
}

KSCOPE_DECL void gpu_attribution::graph_accumulator::add_traced_kernel(std::uint32_t correlation_id, std::int64_t start, std::int64_t end,
                       const detail::kernel_stats* stats) {
  const std::int64_t ns = end - start;
  ++traced_kernels;
  traced_kernel_ns += ns;
  bool share_found = false;
  for (kernel_share& k : kernels) {
    if (k.stats == stats) {
      k.calls += 1;
      k.ns += ns;
      share_found = true;
      break;
    }
  }
  if (!share_found && kernels.size() < max_kernel_names) kernels.push_back({stats, 1, ns});
  for (open_replay& r : open) {
    if (r.correlation_id == correlation_id && correlation_id != 0) {
      r.first_ns = std::min(r.first_ns, start);
      r.last_ns = std::max(r.last_ns, end);
      r.kernel_ns += ns;
      return;
    }
  }
  open_replay& slot = open[next_open];
  next_open = (next_open + 1) % open.size();
  if (slot.correlation_id != 0) {
    traced_span_ns += slot.last_ns - slot.first_ns;
    traced_busy_ns += std::min(slot.kernel_ns, slot.last_ns - slot.first_ns);
  }
  slot = open_replay{correlation_id, start, end, ns};
  ++traced;
}

KSCOPE_DECL std::pair<std::int64_t, std::int64_t> gpu_attribution::graph_accumulator::traced_span_and_busy() const noexcept {
  std::int64_t span = traced_span_ns, busy = traced_busy_ns;
  for (const open_replay& r : open) {
    if (r.correlation_id == 0) continue;
    span += r.last_ns - r.first_ns;
    busy += std::min(r.kernel_ns, r.last_ns - r.first_ns);
  }
  return {span, busy};
}

KSCOPE_DECL gpu_attribution::node_accumulator::node_accumulator(std::size_t max_intervals) : kernel_union(max_intervals), activity_union(max_intervals), comm_union(max_intervals),
      compute_union(max_intervals), max_intervals_per_union(max_intervals) {}

KSCOPE_DECL auto gpu_attribution::node_accumulator::graph_for(std::uint32_t id, std::uint64_t& over_cap) -> graph_accumulator* {
  if (last_graph < graphs.size() && graphs[last_graph].graph_id == id) return &graphs[last_graph];
  for (std::size_t i = 0; i < graphs.size(); ++i) {
    if (graphs[i].graph_id == id) {
      last_graph = i;
      return &graphs[i];
    }
  }
  if (graphs.size() >= max_graphs_per_node) {
    ++over_cap;
    return nullptr;
  }
  graphs.emplace_back();
  graphs.back().graph_id = id;
  last_graph = graphs.size() - 1;
  return &graphs.back();
}

KSCOPE_DECL device_gpu_activity gpu_attribution::node_accumulator::device_totals_now(
    const device_accumulator& d) const noexcept {
  device_gpu_activity t = d.totals;
  if (shares_device(d)) {
    t.kernel_count = totals.kernel_count;
    t.kernel_ns = totals.kernel_ns;
    t.comm_kernel_count = totals.comm_kernel_count;
    t.comm_ns = totals.comm_ns;
  }
  return t;
}

KSCOPE_DECL void gpu_attribution::leave_sole_device(node_accumulator& acc, std::uint32_t device) {
  if (acc.sole_device == node_accumulator::no_device_yet) {
    acc.device_for(device);  // the node's first device: never past the cap
    acc.sole_device = device;
    return;
  }
  device_accumulator& first = acc.devices.front();
  first.kernel_union = acc.kernel_union;
  first.totals = acc.device_totals_now(first);
  acc.sole_device = node_accumulator::several_devices;
}

inline auto gpu_attribution::node_accumulator::device_for(std::uint32_t device) -> device_accumulator* {
  if (last_device < devices.size() && devices[last_device].totals.device == device) return &devices[last_device];
  return device_for_uncached(device);
}

KSCOPE_DECL auto gpu_attribution::node_accumulator::device_for_uncached(std::uint32_t device) -> device_accumulator* {
  for (std::size_t i = 0; i < devices.size(); ++i) {
    if (devices[i].totals.device == device) {
      last_device = i;
      return &devices[i];
    }
  }
  if (devices.size() >= max_devices_per_node) return nullptr;
  devices.emplace_back(device, max_intervals_per_union);
  last_device = devices.size() - 1;
  return &devices.back();
}

KSCOPE_DECL attribution_options gpu_attribution::sanitize(attribution_options o) {
  o.median_samples = std::max<std::size_t>(o.median_samples, 1);
  o.max_kernel_names = std::max<std::size_t>(o.max_kernel_names, 1);
  o.max_nodes = std::max<std::size_t>(o.max_nodes, 1);
  return o;
}

inline bool gpu_attribution::valid_times(std::int64_t start, std::int64_t end) noexcept {
  if (start == 0) {
    ++counters_.dropped_zero_start;
    return false;
  }
  if (end < start) {
    ++counters_.dropped_end_before_start;
    return false;
  }
  return true;
}

inline bool gpu_attribution::take_unreferenced_mark(launch_origin& origin) noexcept {
  if (origin.thread_index == unknown_thread || (origin.thread_index & unreferenced_replay_bit) == 0) return false;
  origin.thread_index &= ~unreferenced_replay_bit;
  return true;
}

inline bool gpu_attribution::profiled(const launch_origin& origin) noexcept {
  if (origin.thread_index == unknown_thread || (origin.thread_index & profiled_launch_bit) == 0) return false;
  ++counters_.profiled_records;
  return true;
}

inline launch_origin gpu_attribution::origin_of(std::uint32_t correlation_id, std::uint32_t runtime_correlation_id) noexcept {
  const correlation_table::lookup_result hit = table_.find_launch(correlation_id, runtime_correlation_id);
  switch (hit.status) {
    case correlation_table::lookup_status::found:
      if (hit.origin.node == unscoped_node) ++counters_.unscoped;
      return hit.origin;
    case correlation_table::lookup_status::evicted:
      ++counters_.unattributed_evicted;
      break;
    case correlation_table::lookup_status::unknown:
      break;
  }
  ++counters_.unattributed;
  return launch_origin{};  // unscoped_node, unknown_thread
}

inline auto gpu_attribution::node_for(launch_origin& origin) -> node_accumulator& {
  const node_cache_entry& cached = node_cache_[origin.node % node_cache_size];
  if (cached.accumulator != nullptr && cached.node == origin.node) return *cached.accumulator;
  node_id node = origin.node;
  node_accumulator& acc = node_for_uncached(node);
  origin.node = node;
  return acc;
}

KSCOPE_DECL auto gpu_attribution::node_for_uncached(node_id& node) -> node_accumulator& {
  node_cache_entry& cached = node_cache_[node % node_cache_size];
  if (cached.accumulator != nullptr && cached.node == node) return *cached.accumulator;
  auto it = nodes_.find(node);
  if (it == nodes_.end()) {
    if (nodes_.size() >= options_.max_nodes && node != unscoped_node) {
      ++counters_.nodes_over_cap;
      node = unscoped_node;
      return node_for_uncached(node);
    }
    it = nodes_.emplace(node, node_accumulator(options_.max_intervals_per_node)).first;
  }
  cached.node = node;
  cached.accumulator = &it->second;  // unordered_map nodes are stable across rehashing
  return it->second;
}

inline auto gpu_attribution::account(const activity_header& r, launch_origin& origin) -> node_accumulator& {
  node_accumulator& acc = node_for(origin);
  acc.activity_union.add(r.start_ns, r.end_ns);
  if (acc.totals.first_start_ns == 0 || r.start_ns < acc.totals.first_start_ns) acc.totals.first_start_ns = r.start_ns;
  if (r.end_ns > acc.totals.last_end_ns) acc.totals.last_end_ns = r.end_ns;
  return acc;
}

inline void gpu_attribution::apply_kernel(const kernel_record& k, launch_origin origin, detail::kernel_stats& stats) {
  node_accumulator& acc = account(k, origin);
  const std::int64_t ns = k.end_ns - k.start_ns;
  if (interval_sink_ != nullptr) interval_sink_->add_interval({k.start_ns, k.end_ns, origin.node, k.device});
  const node_id captured_in = note_graph_capture(acc, k.graph_node_id, origin.node, true, ns);
  const bool communication = stats.communication;
  // A kernel that sets a shared union or total apart (node_accumulator says why they are
  // shared): it takes kernel_union's and the totals' state before this kernel is counted.
  // The device's own figures: none while the node has run on its sole device.
  device_accumulator* dev = nullptr;
  if (KSCOPE_UNLIKELY(acc.sole_device != static_cast<std::int64_t>(k.device))) {
    if (acc.sole_device != node_accumulator::several_devices) leave_sole_device(acc, k.device);
    if (acc.sole_device == node_accumulator::several_devices) {
      dev = acc.device_for(k.device);
      if (dev == nullptr) ++counters_.devices_over_cap;
    }
  }
  if (KSCOPE_UNLIKELY(communication && acc.compute_union_shared)) {
    acc.compute_union = acc.kernel_union;
    acc.compute_union_shared = false;
  }
  acc.totals.kernel_count += 1;
  acc.totals.kernel_ns += ns;
  acc.kernel_union.add(k.start_ns, k.end_ns);
  stats.add_call(k);
  if (k.graph_id != 0) note_traced_replay_kernel(acc, k, stats, captured_in, ns);
  if (communication) {
    acc.totals.comm_kernel_count += 1;
    acc.totals.comm_ns += ns;
    acc.comm_union.add(k.start_ns, k.end_ns);
  } else if (!acc.compute_union_shared) {
    acc.compute_union.add(k.start_ns, k.end_ns);
  }
  if (dev != nullptr) {
    dev->totals.kernel_count += 1;
    dev->totals.kernel_ns += ns;
    dev->kernel_union.add(k.start_ns, k.end_ns);
    if (communication) {
      dev->totals.comm_kernel_count += 1;
      dev->totals.comm_ns += ns;
    }
  }
  if (options_.recent_capacity > 0) {
    recent_event& e = next_recent();
    fill_recent(e, k, activity_kind::kernel, origin);
    e.kernel = &stats;
    e.grid = {k.grid_x, k.grid_y, k.grid_z};
    e.block = {k.block_x, k.block_y, k.block_z};
  }
}

KSCOPE_DECL void gpu_attribution::note_traced_replay_kernel(node_accumulator& acc, const kernel_record& k,
                                                            const detail::kernel_stats& stats, node_id captured_in,
                                                            std::int64_t ns) {
  // A node-level replay: its figures scale the replays of the same graph traced as one record.
  std::uint64_t over_cap = 0;
  if (graph_accumulator* ga = acc.graph_for(k.graph_id, over_cap)) {
    const std::uint64_t before = ga->traced;
    ga->add_traced_kernel(k.correlation_id, k.start_ns, k.end_ns, &stats);
    counters_.graph_replays_traced += ga->traced - before;
    if (captured_in != 0) {
      graph_accumulator::capture_share* share = nullptr;
      for (auto& c : ga->captured)
        if (c.captured_in == captured_in) share = &c;
      if (share == nullptr && ga->captured.size() < graph_accumulator::max_capture_shares) {
        ga->captured.push_back({captured_in, 0, 0});
        share = &ga->captured.back();
      }
      if (share != nullptr) {
        share->kernels += 1;
        share->ns += ns;
      }
    }
  }
}

inline node_id gpu_attribution::note_graph_capture(node_accumulator& acc, std::uint64_t graph_node_id,
                                                   node_id launch_node, bool kernel, std::int64_t ns) {
  if (graph_node_id == 0) return 0;
  return note_graph_node(acc, graph_node_id, launch_node, kernel, ns);
}

KSCOPE_DECL node_id gpu_attribution::note_graph_node(node_accumulator& acc, std::uint64_t graph_node_id, node_id launch_node,
                                                    bool kernel, std::int64_t ns) {
  ++counters_.graph_records;
  const graph_node_table::lookup_result built = graph_nodes_.find(graph_node_id);
  if (!built.found) {
    ++counters_.graph_capture_unknown;
    return 0;
  }
  if (built.node == launch_node) return 0;
  ++counters_.graph_built_elsewhere;
  std::vector<graph_capture_origin>& origins = acc.totals.graph_capture;
  graph_capture_origin* o = nullptr;
  for (graph_capture_origin& candidate : origins) {
    if (candidate.captured_in == built.node) {
      o = &candidate;
      break;
    }
  }
  if (o == nullptr) {
    if (origins.size() >= max_capture_origins_per_node) {
      ++counters_.graph_capture_over_cap;
      return built.node;
    }
    origins.push_back(graph_capture_origin{});
    o = &origins.back();
    o->captured_in = built.node;
  }
  if (kernel) {
    o->kernel_count += 1;
    o->kernel_ns += ns;
  } else {
    o->copy_count += 1;
    o->copy_ns += ns;
  }
  return built.node;
}

KSCOPE_DECL void gpu_attribution::add_graph_estimates(const node_accumulator& acc, node_gpu_activity& a,
                                detail::kernel_table::scaled_shares& scaled) {
  for (const graph_accumulator& g : acc.graphs) {
    a.graph_replays += g.traced + g.untraced;
    a.graph_replays_traced += g.traced;
    a.graph_span_ns += g.untraced_span_ns;
    if (g.untraced == 0) continue;
    const auto [traced_span, traced_busy] = g.traced_span_and_busy();
    std::uint64_t kernels = 0;
    std::int64_t kernel_ns = 0, busy_ns = g.untraced_span_ns;
    if (g.traced > 0 && traced_span > 0) {
      const double per_replay = static_cast<double>(g.untraced) / static_cast<double>(g.traced);
      const double per_span_ns = static_cast<double>(g.untraced_span_ns) / static_cast<double>(traced_span);
      kernels = static_cast<std::uint64_t>(std::llround(static_cast<double>(g.traced_kernels) * per_replay));
      kernel_ns = std::llround(static_cast<double>(g.traced_kernel_ns) * per_span_ns);
      busy_ns = std::llround(static_cast<double>(traced_busy) * per_span_ns);
      for (const graph_accumulator::kernel_share& k : g.kernels) {
        auto& share = scaled[k.stats];
        share.calls += static_cast<std::uint64_t>(std::llround(static_cast<double>(k.calls) * per_replay));
        share.ns += std::llround(static_cast<double>(k.ns) * per_span_ns);
        share.from_replays += g.traced;
      }
      // The graph's kernels built in another scope: their share of the scaled replays.
      for (const graph_accumulator::capture_share& c : g.captured) {
        for (graph_capture_origin& o : a.graph_capture) {
          if (o.captured_in != c.captured_in) continue;
          o.kernel_count += static_cast<std::uint64_t>(std::llround(static_cast<double>(c.kernels) * per_replay));
          o.kernel_ns += std::llround(static_cast<double>(c.ns) * per_span_ns);
          break;
        }
      }
    } else {
      a.graph_replays_unsampled += g.untraced;
    }
    a.kernel_count += kernels;
    a.scaled_kernel_count += kernels;
    a.kernel_ns += kernel_ns;
    a.scaled_kernel_ns += kernel_ns;
    a.busy_ns += busy_ns;
    a.compute_busy_ns += busy_ns;
    a.scaled_busy_ns += busy_ns;
  }
  if (acc.unsampled_replays > 0) {
    a.graph_replays += acc.unsampled_replays;
    a.graph_replays_unsampled += acc.unsampled_replays;
    a.graph_span_ns += acc.unsampled_span_ns;
    a.busy_ns += acc.unsampled_span_ns;
    a.compute_busy_ns += acc.unsampled_span_ns;
    a.scaled_busy_ns += acc.unsampled_span_ns;
  }
}

inline node_gpu_activity& gpu_attribution::apply_transfer(const activity_header& r, activity_kind kind,
                                                              memcpy_kind copy, std::uint64_t bytes,
                                                              launch_origin origin) {
  node_accumulator& acc = account(r, origin);
  if (interval_sink_ != nullptr) interval_sink_->add_interval({r.start_ns, r.end_ns, origin.node, r.device});
  note_graph_capture(acc, r.graph_node_id, origin.node, false, r.end_ns - r.start_ns);
  add_copy(kind == activity_kind::memset ? acc.totals.memset
                                         : acc.totals.memcpy[static_cast<std::size_t>(direction_of(copy))],
           r, bytes);
  if (options_.recent_capacity > 0) {
    recent_event& e = next_recent();
    fill_recent(e, r, kind, origin);
    e.copy_kind = copy;
    e.bytes = bytes;
  }
  return acc.totals;
}

KSCOPE_DECL std::string_view gpu_attribution::memcpy_label(memcpy_kind kind) noexcept {
  switch (kind) {
    case memcpy_kind::h2d: return "Memcpy HtoD";
    case memcpy_kind::d2h: return "Memcpy DtoH";
    case memcpy_kind::d2d: return "Memcpy DtoD";
    case memcpy_kind::h2h: return "Memcpy HtoH";
    case memcpy_kind::p2p: return "Memcpy PtoP";
    case memcpy_kind::array: return "Memcpy Array";
    default: return "Memcpy";
  }
}

inline void gpu_attribution::fill_recent(recent_event& e, const activity_header& r, activity_kind kind,
                                         const launch_origin& origin) noexcept {
  static_assert(sizeof(void*) != 8 || sizeof(activity_header) == 48,
                "activity_header changed: recent_event must keep every field of it");
  e.start_ns = r.start_ns;
  e.end_ns = r.end_ns;
  e.graph_node_id = r.graph_node_id;
  e.correlation_id = r.correlation_id;
  e.device = r.device;
  e.context = r.context;
  e.stream = r.stream;
  e.graph_id = r.graph_id;
  e.node = origin.node;
  e.thread_index = origin.thread_index;
  e.kind = kind;
  e.copy_kind = memcpy_kind::unknown;
}

KSCOPE_DECL gpu_activity_event gpu_attribution::event_of(const recent_event& e) {
  static_assert(sizeof(void*) != 8 || sizeof(gpu_activity_event) == 120,
                "gpu_activity_event changed: event_of must set every field of it");
  gpu_activity_event out;  // what the kind does not have keeps its default
  out.correlation_id = e.correlation_id;
  out.device = e.device;
  out.context = e.context;
  out.stream = e.stream;
  out.start_ns = e.start_ns;
  out.end_ns = e.end_ns;
  out.graph_id = e.graph_id;
  out.graph_node_id = e.graph_node_id;
  out.kind = e.kind;
  out.node = e.node;
  out.thread_index = e.thread_index;
  out.copy_kind = e.copy_kind;
  switch (e.kind) {
    case activity_kind::kernel:
      out.name = e.kernel->mangled;
      out.grid = e.grid;
      out.block = e.block;
      break;
    case activity_kind::memcpy:
      out.name = memcpy_label(e.copy_kind);
      out.bytes = e.bytes;
      break;
    case activity_kind::memset:
      out.name = "Memset";
      out.bytes = e.bytes;
      break;
    default:
      out.name = "CUDA graph";
      break;
  }
  return out;
}

inline auto gpu_attribution::next_recent() -> recent_event& {
  const std::size_t capacity = options_.recent_capacity;
  if (KSCOPE_UNLIKELY(!recent_full_)) {
    recent_full_ = recent_.size() + 1 == capacity;
    return recent_.emplace_back();
  }
  recent_event& oldest = recent_[recent_next_];
  counters_.recent_overwritten_end_ns = std::max(counters_.recent_overwritten_end_ns, oldest.end_ns);
  if (++recent_next_ == capacity) recent_next_ = 0;  // no division per record
  ++counters_.recent_overwritten;
  return oldest;
}

KSCOPE_DECL std::vector<std::string> gpu_attribution::warnings(const attribution_counters& c) const {
  std::vector<std::string> out;
  auto say = [&out](std::uint64_t n, const char* what) {
    if (n > 0) out.push_back(std::to_string(n) + what);
  };
  say(c.dropped_by_cupti,
      " GPU activity records dropped by CUPTI (activity buffer pool exhausted; raise "
      "cupti_options::buffer_count or buffer_bytes)");
  say(c.dropped_zero_start, " GPU records without timestamps (start = 0) dropped");
  say(c.dropped_end_before_start, " GPU records with end < start dropped");
  say(c.dropped_malformed, " malformed CUPTI activity buffers or records skipped");
  say(c.unattributed - c.unattributed_evicted,
      " GPU records whose launch was not seen were attributed to (unscoped)");
  say(c.unattributed_evicted,
      " GPU records arrived after their launch left the correlation table (raise "
      "attribution_options::correlation_capacity); attributed to (unscoped)");
  say(c.busy_intervals_clipped,
      " GPU intervals arrived far out of order; GPU busy/idle times may be slightly low");
  say(c.distinct_kernels_over_cap, " kernel calls folded into \"(other kernels)\" (name cap)");
  say(c.nodes_over_cap, " GPU records of nodes past the node cap went to (unscoped)");
  say(c.devices_over_cap, " kernels ran on more than 64 devices per scope: not split by device");
  say(c.graph_capture_unknown,
      " CUDA-graph records ran graph nodes whose creation kscope did not see (built before CUPTI "
      "started, or forgotten by the full graph-node table): the scope that built them is unknown");
  say(c.graph_capture_over_cap,
      (" CUDA-graph records were built in more than " + std::to_string(max_capture_origins_per_node) +
       " other scopes of one launching scope: left out of its graph_capture breakdown")
          .c_str());
  say(c.graphs_over_cap,
      (" CUDA-graph records belonged to graphs past " + std::to_string(max_graphs_per_node) +
       " graphs per scope: their replays traced as one record count as busy, their kernels are not estimated")
          .c_str());
  say(c.graph_replays_retimed,
      " CUDA-graph replays traced node by node came with CUPTI's timestamp offset (their first kernel "
      "ended late, the rest shifted: graph-level trace on); moved back by the excess over the graph's "
      "replays traced as one record");
  say(c.graph_replays_incomplete,
      " CUDA-graph replays traced node by node lost kernel records (CUPTI stamped one to end before it "
      "began, and offset the rest unevenly): counted as replays traced as one record of the graph's usual "
      "span, their kernels scaled like those");
  say(c.graph_replays_unchecked,
      " CUDA-graph replays traced node by node while graph-level trace was on had no replay of their "
      "graph traced as one record to check against: their first kernel's time may include CUPTI's "
      "timestamp offset");
  say(c.graph_replays_held,
      " CUDA-graph replays traced node by node wait for a replay of their graph traced as one record "
      "to check their timestamps: not in any figure yet");
  say(c.graph_replays_unreferenced,
      " CUDA-graph replays of graphs CUPTI saw built without graph-level trace (before the collector "
      "started, or while tracing was paused) were traced node by node, as CUPTI stamped them: no replay "
      "of theirs traced as one record checks their timestamps");
  say(c.graph_nodes_evicted,
      " graph nodes were forgotten by the full graph-node table (raise "
      "attribution_options::graph_node_capacity)");
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace kscope
