// libkscope_c_testing.so's one addition to libkscope_c.so: a fake per-scope counter hook,
// installed where session::enable_counters installs the real one, so the tests see what the
// C interface and the Python package do while counters are on without a GPU or CUPTI.
// Every call of the scope named to it is profiled, and its open and close take as long as
// asked (a real profiled call's CUPTI setup, synchronization and decoding take
// milliseconds). Only the tests build this library; libkscope_c.so has none of it.
#include "kscope/c/kscope_c.h"

#include <kscope/scope/detail/counter_hook.hpp>
#include <kscope/scope/scope.hpp>

#include <atomic>
#include <chrono>
#include <thread>

namespace {

std::atomic<kscope::node_id> profiled_node{0};
std::atomic<unsigned> open_ms{0}, close_ms{0};
std::atomic<int> opens{0}, closes{0};

bool fake_open(kscope::node_id node) noexcept {
  if (node != profiled_node.load()) return false;
  std::this_thread::sleep_for(std::chrono::milliseconds(open_ms.load()));
  ++opens;
  return true;
}

void fake_close(kscope::node_id) noexcept {
  std::this_thread::sleep_for(std::chrono::milliseconds(close_ms.load()));
  ++closes;
}

const kscope::detail::counter_hook fake_hook{&fake_open, &fake_close};

}  // namespace

extern "C" {

// Profiles every call of the top-level scope `name` (NULL: turns the hook off), its open and
// close sleeping open_sleep_ms and close_sleep_ms.
KSCOPE_C_API void kscope_testing_fake_counters(const char* name, unsigned open_sleep_ms, unsigned close_sleep_ms);
// How many calls the hook opened and closed since the last kscope_testing_fake_counters.
KSCOPE_C_API void kscope_testing_fake_counter_calls(int* opened, int* closed);

void kscope_testing_fake_counters(const char* name, unsigned open_sleep_ms, unsigned close_sleep_ms) {
  kscope::detail::active_counter_hook.store(nullptr);
  if (name == nullptr) return;
  try {
    profiled_node = kscope::detail::find_node(kscope::detail::root_node, name);  // no call recorded
  } catch (...) {
    return;  // out of memory: the hook stays off
  }
  open_ms = open_sleep_ms;
  close_ms = close_sleep_ms;
  opens = 0;
  closes = 0;
  kscope::detail::active_counter_hook.store(&fake_hook);
}

void kscope_testing_fake_counter_calls(int* opened, int* closed) {
  if (opened != nullptr) *opened = opens.load();
  if (closed != nullptr) *closed = closes.load();
}

}  // extern "C"
