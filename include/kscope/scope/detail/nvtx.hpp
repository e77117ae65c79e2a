// kscope/scope/detail/nvtx.hpp — the kscope NVTX domain, registered strings and ranges.
//
// Scopes appear in Nsight Systems as ranges of a "kscope" domain. NVTX3 is header-only:
// with no tool attached each call is an indirect call into a no-op (about a nanosecond),
// so ranges stay on in production. Without NVTX (CPU-only builds) these are empty.
#pragma once

#include "../../core/config.hpp"
#include "../../core/detail/once.hpp"

#include <cstdint>

// Under KSCOPE_SEPARATE_COMPILATION the NVTX header (whose implementation is compiled into
// every file that includes it: about half a second of g++ -O2) is included only where the
// definitions are: a push or pop is then one call more, next to NVTX's own indirect call.
#if KSCOPE_HAS_NVTX && KSCOPE_DETAIL_DEFINITIONS
#  include <nvtx3/nvToolsExt.h>
#endif
#include <type_traits>

#if KSCOPE_HAS_NVTX
// NVTX's opaque handle structs, declared as nvToolsExt.h declares them (at global scope), so
// that the handle types below are NVTX's own without its header.
struct nvtxStringRegistration_st;
struct nvtxDomainRegistration_st;
#endif

namespace kscope {
namespace detail {

#if KSCOPE_HAS_NVTX
using nvtx_string = ::nvtxStringRegistration_st*;         // nvtxStringHandle_t
using nvtx_range_id = std::uint64_t;                      // nvtxRangeId_t
using nvtx_domain_handle = ::nvtxDomainRegistration_st*;  // nvtxDomainHandle_t

// One domain for the whole process, created on first use. That first NVTX call also
// initializes NVTX (with a tool attached, it loads the tool's library): a fork while
// another thread is in it waits for it, so a child never inherits it half-done and
// waits on it forever (core/detail/once.hpp).
KSCOPE_DECL nvtx_domain_handle nvtx_domain() noexcept;

// Registering a string once lets the tool skip copying it on every push.
KSCOPE_DECL nvtx_string nvtx_register(const char* name) noexcept;
KSCOPE_DECL void nvtx_push(nvtx_string registered) noexcept;
KSCOPE_DECL void nvtx_push(const char* name) noexcept;
KSCOPE_DECL void nvtx_pop() noexcept;
// Start/end ranges may end on another thread (a request's life in a serving engine).
KSCOPE_DECL nvtx_range_id nvtx_start(const char* name) noexcept;
KSCOPE_DECL void nvtx_end(nvtx_range_id id) noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
static_assert(std::is_same<nvtx_string, nvtxStringHandle_t>::value, "NVTX's string handle type changed");
static_assert(std::is_same<nvtx_range_id, nvtxRangeId_t>::value, "NVTX's range id type changed");
static_assert(std::is_same<nvtx_domain_handle, nvtxDomainHandle_t>::value, "NVTX's domain handle type changed");

// Every push and pop reads it: the flag and the handle are two independent loads, as with
// a function-local static's guard.
KSCOPE_DECL nvtx_domain_handle nvtx_domain() noexcept {
  static nvtxDomainHandle_t created = nullptr;  // written once, before `once` is done
  static fork_safe_once once{lock_rank::init_code_loading};
  if (KSCOPE_UNLIKELY(!once.done())) once.call([] { created = nvtxDomainCreateA("kscope"); });
  return created;
}

inline nvtxEventAttributes_t nvtx_attributes() noexcept {
  nvtxEventAttributes_t attributes{};
  attributes.version = NVTX_VERSION;
  attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  return attributes;
}

KSCOPE_DECL nvtx_string nvtx_register(const char* name) noexcept {
  return nvtxDomainRegisterStringA(nvtx_domain(), name);
}

KSCOPE_DECL void nvtx_push(nvtx_string registered) noexcept {
  nvtxEventAttributes_t attributes = nvtx_attributes();
  attributes.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  attributes.message.registered = registered;
  nvtxDomainRangePushEx(nvtx_domain(), &attributes);
}

KSCOPE_DECL void nvtx_push(const char* name) noexcept {
  nvtxEventAttributes_t attributes = nvtx_attributes();
  attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
  attributes.message.ascii = name;
  nvtxDomainRangePushEx(nvtx_domain(), &attributes);
}

KSCOPE_DECL void nvtx_pop() noexcept { nvtxDomainRangePop(nvtx_domain()); }

KSCOPE_DECL nvtx_range_id nvtx_start(const char* name) noexcept {
  nvtxEventAttributes_t attributes = nvtx_attributes();
  attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
  attributes.message.ascii = name;
  return nvtxDomainRangeStartEx(nvtx_domain(), &attributes);
}

KSCOPE_DECL void nvtx_end(nvtx_range_id id) noexcept { nvtxDomainRangeEnd(nvtx_domain(), id); }
#endif  // KSCOPE_DETAIL_DEFINITIONS

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
