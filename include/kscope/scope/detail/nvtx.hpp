// kscope/scope/detail/nvtx.hpp — the kscope NVTX domain, registered strings and ranges.
//
// Scopes appear in Nsight Systems as ranges of a "kscope" domain. NVTX3 is header-only:
// with no tool attached each call is an indirect call into a no-op (about a nanosecond),
// so ranges stay on in production. Without NVTX (CPU-only builds) these are empty.
#pragma once

#include "../../core/config.hpp"
#include "../../core/detail/once.hpp"

#include <cstdint>

#if KSCOPE_HAS_NVTX
#  include <nvtx3/nvToolsExt.h>
#endif

namespace kscope {
namespace detail {

#if KSCOPE_HAS_NVTX
using nvtx_string = nvtxStringHandle_t;
using nvtx_range_id = nvtxRangeId_t;

// One domain for the whole process, created on first use. That first NVTX call also
// initializes NVTX (with a tool attached, it loads the tool's library): a fork while
// another thread is in it waits for it, so a child never inherits it half-done and
// waits on it forever (core/detail/once.hpp). Every push and pop reads it: the flag and
// the handle are two independent loads, as with a function-local static's guard.
inline nvtxDomainHandle_t nvtx_domain() noexcept {
  static nvtxDomainHandle_t created = nullptr;  // written once, before `once` is done
  static fork_safe_once once{lock_rank::init_code_loading};
  if (KSCOPE_UNLIKELY(!once.done())) once.call([] { created = nvtxDomainCreateA("kscope"); });
  return created;
}

// Registering a string once lets the tool skip copying it on every push.
inline nvtx_string nvtx_register(const char* name) noexcept {
  return nvtxDomainRegisterStringA(nvtx_domain(), name);
}

inline nvtxEventAttributes_t nvtx_attributes() noexcept {
  nvtxEventAttributes_t attributes{};
  attributes.version = NVTX_VERSION;
  attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  return attributes;
}

inline void nvtx_push(nvtx_string registered) noexcept {
  nvtxEventAttributes_t attributes = nvtx_attributes();
  attributes.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  attributes.message.registered = registered;
  nvtxDomainRangePushEx(nvtx_domain(), &attributes);
}

inline void nvtx_push(const char* name) noexcept {
  nvtxEventAttributes_t attributes = nvtx_attributes();
  attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
  attributes.message.ascii = name;
  nvtxDomainRangePushEx(nvtx_domain(), &attributes);
}

inline void nvtx_pop() noexcept { nvtxDomainRangePop(nvtx_domain()); }

// Start/end ranges may end on another thread (a request's life in a serving engine).
inline nvtx_range_id nvtx_start(const char* name) noexcept {
  nvtxEventAttributes_t attributes = nvtx_attributes();
  attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
  attributes.message.ascii = name;
  return nvtxDomainRangeStartEx(nvtx_domain(), &attributes);
}

inline void nvtx_end(nvtx_range_id id) noexcept { nvtxDomainRangeEnd(nvtx_domain(), id); }

#else
using nvtx_string = const void*;
using nvtx_range_id = std::uint64_t;
inline nvtx_string nvtx_register(const char*) noexcept { return nullptr; }
inline void nvtx_push(nvtx_string) noexcept {}
inline void nvtx_push(const char*) noexcept {}
inline void nvtx_pop() noexcept {}
inline nvtx_range_id nvtx_start(const char*) noexcept { return 0; }
inline void nvtx_end(nvtx_range_id) noexcept {}
#endif

}  // namespace detail
}  // namespace kscope
