// kscope/session/detail/metrics_writer.hpp — KSCOPE_METRICS=path: the running program's
// metrics in the OpenMetrics text format (report/openmetrics.hpp), rewritten every
// KSCOPE_METRICS_INTERVAL seconds (default 10) by a background thread, in the manner of
// node_exporter's textfile collector: each file is written whole to a temporary and renamed
// over the old one (core/detail/atomic_file.hpp), so a reader never sees half a file.
//
// What it must never do is disturb the program it lives in:
//   - A path that cannot be written gives one line on stderr, once; the thread keeps
//     trying at every interval (the directory may appear later) and the program goes on.
//   - A value of KSCOPE_METRICS_INTERVAL that is not a number of seconds in [0.1, 86400]
//     gives one line on stderr naming it, and the default is used.
//   - The thread blocks every signal but the faults it could raise itself, so a signal
//     meant for the program's own threads (sigwait, a handler it expects on the main
//     thread) is never delivered to it.
//   - Exit: an atexit handler stops the thread, joins it and writes the file once more,
//     so the last file holds the whole run. It is registered after the CUDA runtime's
//     first call (probe_gpu()), so it runs before the runtime's own teardown, as the
//     activity collector's does. The writer is never destroyed (like the session), so
//     nothing of it is torn down by static destruction while the thread runs; what the
//     thread uses (the session, the recorder, the collector) is never destroyed either.
//   - fork(): the child has no writer thread; its inherited exit handler sees another
//     process id and does nothing (no join of a thread that does not exist, no write over
//     the parent's file). The writer's mutex is never taken in a child, so it needs no fork
//     guard; the locks the report takes are all guarded (core/detail/fork_guard.hpp).
//   - _exit(), a fatal signal or abort() skip the last write: the file holds the last
//     periodic one.
//
//   // in a shell: KSCOPE_METRICS=/var/lib/node_exporter/textfile/engine.prom ./engine
//   kscope::detail::metrics_file_writer w;      // tests: a writer of their own
//   w.start("m.prom", std::chrono::milliseconds(200), [] { return std::string("# EOF\n"); });
#pragma once

#include "../../core/config.hpp"
#include "../../core/detail/atomic_file.hpp"
#include "../../core/detail/number_format.hpp"
#include "../../core/detail/once.hpp"
#include "../../core/detail/text_escape.hpp"
#include "../../device/availability.hpp"

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#if defined(__unix__) || defined(__APPLE__)
#  include <pthread.h>
#  include <signal.h>
#  include <unistd.h>
#  define KSCOPE_DETAIL_METRICS_POSIX 1
#else
#  define KSCOPE_DETAIL_METRICS_POSIX 0
#endif

namespace kscope {
namespace detail {

// KSCOPE_METRICS_INTERVAL: seconds, decimals allowed ("2.5"). Below 0.1 s a report would be
// built without pause; above a day (86400 s) the file would look dead to whoever reads it.
inline constexpr double metrics_default_interval_s = 10;
inline constexpr double metrics_min_interval_s = 0.1;
inline constexpr double metrics_max_interval_s = 86400;

struct metrics_interval_setting {
  double seconds = metrics_default_interval_s;
  std::string warning;  // "" when the value was used or there was none
};

// The interval a KSCOPE_METRICS_INTERVAL value gives (nullptr, empty or blank: the
// default, silently). Anything else that is not a number in [0.1, 86400] gives the default
// and a warning naming the variable and the value:
//   parse_metrics_interval("2.5").seconds == 2.5
//   parse_metrics_interval("fast").warning == "KSCOPE_METRICS_INTERVAL=\"fast\" is not a number of seconds ..."
[[nodiscard]] KSCOPE_DECL metrics_interval_setting parse_metrics_interval(const char* text);

// Writes what `produce` returns to one file, whole, every interval, from a thread of its
// own (see the top of this header). One writer writes one file; start() once.
class metrics_file_writer {
 public:
  using producer = std::function<std::string()>;
  // Where the one line about a failure goes (default: stderr, "kscope: " in front).
  using error_sink = std::function<void(const std::string&)>;

  metrics_file_writer() = default;
  metrics_file_writer(const metrics_file_writer&) = delete;
  metrics_file_writer& operator=(const metrics_file_writer&) = delete;
  // Stops the thread (joined) without the last write; a writer's own tests use it. The
  // process-wide writer is never destroyed.
  ~metrics_file_writer();

  // The process-wide writer KSCOPE_METRICS starts (never destroyed).
  [[nodiscard]] static metrics_file_writer& global() noexcept;

  // Starts the thread: the first file one interval from now, then every interval. False
  // when it already runs, `path` is empty, or no thread could be made (said once).
  bool start(std::string path, std::chrono::nanoseconds interval, producer produce, error_sink errors = nullptr);
  // Stops the thread, joins it and writes the file once more. Does nothing when it never
  // started, was stopped already, or in a child process forked after the start.
  void stop_and_write() noexcept;

  [[nodiscard]] bool running() const noexcept { return running_.load(std::memory_order_acquire); }
  [[nodiscard]] std::uint64_t writes() const noexcept { return writes_.load(std::memory_order_relaxed); }
  [[nodiscard]] std::uint64_t failures() const noexcept { return failures_.load(std::memory_order_relaxed); }

 private:
  void loop() noexcept;
  void write_once() noexcept;
  void say_once(const std::string& line) noexcept;
  // Stops and joins the thread; true when this call stopped it (in the process that started it).
  bool stop_thread() noexcept;
  [[nodiscard]] bool in_starting_process() const noexcept;

  std::mutex control_;  // start and stop; held across join and the last write, never by the thread
  std::mutex mutex_;    // stop_requested_; the thread waits on wake_ with it
  std::condition_variable wake_;
  bool stop_requested_ = false;
  std::unique_ptr<std::thread> thread_;
  std::atomic<bool> running_{false};
  std::atomic<long> owner_pid_{0};
  std::string path_;
  std::chrono::nanoseconds interval_{0};
  producer produce_;
  error_sink errors_;
  std::atomic<bool> said_{false};
  std::atomic<std::uint64_t> writes_{0};
  std::atomic<std::uint64_t> failures_{0};
};

// The exit handler: the process-wide writer's stop_and_write().
KSCOPE_DECL void metrics_at_exit() noexcept;

// KSCOPE_METRICS=path (and KSCOPE_METRICS_INTERVAL): starts the process-wide writer with
// `produce` (the session's openmetrics()) and registers its exit handler. Run once before
// main by session.hpp; false when the variable is unset or empty.
KSCOPE_DECL bool start_metrics_from_environment(metrics_file_writer::producer produce);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL metrics_interval_setting parse_metrics_interval(const char* text) {
  metrics_interval_setting s;
  if (text == nullptr) return s;
  std::string_view v(text);
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
  if (v.empty()) return s;
  double seconds = 0;
  if (parse_double(v, seconds) && std::isfinite(seconds) && seconds >= metrics_min_interval_s &&
      seconds <= metrics_max_interval_s) {
    s.seconds = seconds;
    return s;
  }
  std::string shown(text);
  if (shown.size() > 64) shown = shown.substr(0, 64) + "...";
  s.warning = "KSCOPE_METRICS_INTERVAL=\"" + printable_name(shown) + "\" is not a number of seconds from " +
              format_general(metrics_min_interval_s, 3) + " to " + format_general(metrics_max_interval_s, 6) +
              "; the default, " + format_general(metrics_default_interval_s, 3) + " s, is used";
  return s;
}

KSCOPE_DECL metrics_file_writer::~metrics_file_writer() {
  if (!stop_thread() && thread_ && !in_starting_process()) {
    // A forked child's copy names a thread of the parent: never join or detach it.
    (void)thread_.release();
  }
}

KSCOPE_DECL metrics_file_writer& metrics_file_writer::global() noexcept {
  // A fork never catches it half-built (core/detail/once.hpp). Leaked on purpose: the
  // thread may still run while static destructors do, until the exit handler joins it.
  static lazy_global<metrics_file_writer> instance{lock_rank::init};
  return instance.get([] { return new metrics_file_writer(); });
}

KSCOPE_DECL bool metrics_file_writer::in_starting_process() const noexcept {
#if KSCOPE_DETAIL_METRICS_POSIX
  return owner_pid_.load(std::memory_order_acquire) == static_cast<long>(::getpid());
#else
  return true;
#endif
}

KSCOPE_DECL bool metrics_file_writer::start(std::string path, std::chrono::nanoseconds interval, producer produce,
                                            error_sink errors) {
  std::lock_guard<std::mutex> control(control_);
  if (thread_ || path.empty() || !produce) return false;
  path_ = std::move(path);
  interval_ = interval > std::chrono::nanoseconds(0) ? interval : std::chrono::nanoseconds(1'000'000);
  produce_ = std::move(produce);
  errors_ = std::move(errors);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_requested_ = false;
  }
#if KSCOPE_DETAIL_METRICS_POSIX
  owner_pid_.store(static_cast<long>(::getpid()), std::memory_order_release);
  // The thread inherits the creator's signal mask: every signal blocked while it is made,
  // but the faults a thread raises itself (a blocked one would skip the program's crash
  // handler: the kernel resets it to the default action).
  sigset_t all, previous;
  sigfillset(&all);
  for (int fault : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGABRT, SIGSYS}) sigdelset(&all, fault);
  const bool masked = pthread_sigmask(SIG_SETMASK, &all, &previous) == 0;
#endif
  try {
    thread_ = std::make_unique<std::thread>([this] { loop(); });
  } catch (const std::exception& e) {
    say_once("KSCOPE_METRICS: no thread for writing " + path_ + " (" + e.what() + "); metrics are not written");
  }
#if KSCOPE_DETAIL_METRICS_POSIX
  if (masked) pthread_sigmask(SIG_SETMASK, &previous, nullptr);
#endif
  running_.store(thread_ != nullptr, std::memory_order_release);
  return thread_ != nullptr;
}

KSCOPE_DECL bool metrics_file_writer::stop_thread() noexcept {
  if (!in_starting_process()) return false;  // a forked child: the thread is the parent's
  if (!thread_ || !running_.load(std::memory_order_acquire)) return false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_requested_ = true;
  }
  wake_.notify_all();
  try {
    thread_->join();
  } catch (...) {
    return false;  // joined from its own thread: cannot happen, the thread never stops itself
  }
  running_.store(false, std::memory_order_release);
  return true;
}

KSCOPE_DECL void metrics_file_writer::stop_and_write() noexcept {
  if (!in_starting_process()) return;  // checked before any lock: a child never takes them
  try {
    std::lock_guard<std::mutex> control(control_);
    if (stop_thread()) write_once();
  } catch (...) {  // a mutex that cannot be locked: nothing more to do at exit
  }
}

KSCOPE_DECL void metrics_file_writer::loop() noexcept {
#if defined(__linux__)
  pthread_setname_np(pthread_self(), "kscope-metrics");  // what top -H and gdb show
#endif
  try {
    std::unique_lock<std::mutex> lock(mutex_);
    auto next = std::chrono::steady_clock::now() + interval_;
    while (!wake_.wait_until(lock, next, [this] { return stop_requested_; })) {
      lock.unlock();
      write_once();
      lock.lock();
      // A write that took longer than the interval: the next one an interval after it, not
      // a burst to catch up.
      const auto now = std::chrono::steady_clock::now();
      next += interval_;
      if (next <= now) next = now + interval_;
    }
  } catch (...) {  // no lock, no clock: the thread ends, the program goes on
  }
}

KSCOPE_DECL void metrics_file_writer::write_once() noexcept {
  std::string error;
  bool ok = false;
  try {
    const std::string text = produce_();
    ok = write_file_atomically(path_, text, &error);
  } catch (const std::exception& e) {
    error = std::string("the metrics could not be made: ") + e.what();
  } catch (...) {
    error = "the metrics could not be made";
  }
  if (ok) {
    writes_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  failures_.fetch_add(1, std::memory_order_relaxed);
  try {
    say_once("KSCOPE_METRICS: " + error + "; kscope keeps trying every interval, the program goes on");
  } catch (...) {
  }
}

KSCOPE_DECL void metrics_file_writer::say_once(const std::string& line) noexcept {
  if (said_.exchange(true, std::memory_order_acq_rel)) return;
  try {
    if (errors_) {
      errors_(line);
      return;
    }
    const std::string shown = "kscope: " + printable_name(line) + "\n";
    std::fputs(shown.c_str(), stderr);
  } catch (...) {
  }
}

KSCOPE_DECL void metrics_at_exit() noexcept { metrics_file_writer::global().stop_and_write(); }

KSCOPE_DECL bool start_metrics_from_environment(metrics_file_writer::producer produce) {
  const char* path = std::getenv("KSCOPE_METRICS");
  if (path == nullptr || *path == '\0') return false;
  const metrics_interval_setting interval = parse_metrics_interval(std::getenv("KSCOPE_METRICS_INTERVAL"));
  if (!interval.warning.empty()) {
    const std::string line = "kscope: " + interval.warning + "\n";
    std::fputs(line.c_str(), stderr);
  }
  // The CUDA runtime registers its teardown with atexit at its first call: made now, so
  // the handler below runs before it and the last report can still read the GPU's events.
  (void)probe_gpu();
  metrics_file_writer& writer = metrics_file_writer::global();
  const auto ns = std::chrono::duration<double, std::nano>(interval.seconds * 1e9);
  if (!writer.start(path, std::chrono::duration_cast<std::chrono::nanoseconds>(ns), std::move(produce))) return false;
  (void)std::atexit(&metrics_at_exit);
  return true;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail
}  // namespace kscope

#undef KSCOPE_DETAIL_METRICS_POSIX
