// kscope/core/detail/symbol_table.hpp — the entry points of a library loaded at run time,
// resolved from one dlopen handle by one table.
//
// kscope links cudart only; CUPTI (its activity, profiler, PM- and PC-sampling entry
// points) and cuBLAS are opened with dlopen and their functions looked up by name. Each
// loader is a list of entries, the name, the function pointer it fills and whether the
// loader fails without it, resolved here in list order; what is specific to a loader (which
// file, which versions, its words when a library does not fit) stays in the loader:
//
//   cublas_api api;
//   const symbol_entry entries[] = {
//       required_symbol("cublasCreate_v2", api.create),
//       optional_symbol("cublasGetStatusString", api.status_string),
//   };
//   if (const char* missing = resolve_symbols(handle, entries)) say(missing);  // first required one
//
// Every entry is looked up, a missing optional one left null, so a loader that fails still
// names its first missing required entry. No CUDA header: cuBLAS (device/) uses it too.
#pragma once

#include "../config.hpp"

#include <cstddef>
#include <type_traits>

#if defined(__has_include)
#  if __has_include(<dlfcn.h>)
#    include <dlfcn.h>
#    define KSCOPE_DETAIL_HAS_DLOPEN 1
#  endif
#endif
#ifndef KSCOPE_DETAIL_HAS_DLOPEN
#  define KSCOPE_DETAIL_HAS_DLOPEN 0
#endif

namespace kscope {
namespace detail {

// One entry point of a table: `target` is the function pointer to fill, erased to void*
// so that one table holds entry points of every type; `assign` stores a looked-up address
// into it with its own type (made by required_symbol / optional_symbol).
struct symbol_entry {
  const char* name = nullptr;
  void* target = nullptr;
  void (*assign)(void* target, void* symbol) = nullptr;
  bool required = true;
};

template <class F>
[[nodiscard]] symbol_entry symbol_slot(const char* name, F& target, bool required) noexcept {
  static_assert(std::is_pointer_v<F> && std::is_function_v<std::remove_pointer_t<F>>,
                "a symbol table fills function pointers");
  return {name, &target, [](void* slot, void* symbol) noexcept { *static_cast<F*>(slot) = reinterpret_cast<F>(symbol); },
          required};
}

// An entry the loader cannot do without: resolve_symbols names it when it is missing.
template <class F>
[[nodiscard]] symbol_entry required_symbol(const char* name, F& target) noexcept {
  return symbol_slot(name, target, true);
}

// An entry whose absence only switches something off: left null when missing.
template <class F>
[[nodiscard]] symbol_entry optional_symbol(const char* name, F& target) noexcept {
  return symbol_slot(name, target, false);
}

// The address of `name` in the library `handle` opened, or null (also where there is no
// dlopen).
KSCOPE_DECL void* lookup_symbol(void* handle, const char* name) noexcept;

// One entry point, outside a table (a lookup that waits on its own condition): true when
// found; `out` is null otherwise.
template <class F>
bool resolve_symbol(void* handle, const char* name, F& out) noexcept {
  symbol_entry entry = symbol_slot(name, out, false);
  void* symbol = lookup_symbol(handle, name);
  entry.assign(entry.target, symbol);
  return symbol != nullptr;
}

// Looks up every entry in `handle`, in order, and fills its target (null when missing).
// Returns the name of the first required entry missing, or null when all are there.
KSCOPE_DECL const char* resolve_symbols(void* handle, const symbol_entry* entries, std::size_t count) noexcept;

template <std::size_t N>
const char* resolve_symbols(void* handle, const symbol_entry (&entries)[N]) noexcept {
  return resolve_symbols(handle, entries, N);
}

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL void* lookup_symbol(void* handle, const char* name) noexcept {
#if KSCOPE_DETAIL_HAS_DLOPEN
  return ::dlsym(handle, name);
#else
  (void)handle;
  (void)name;
  return nullptr;
#endif
}

KSCOPE_DECL const char* resolve_symbols(void* handle, const symbol_entry* entries, std::size_t count) noexcept {
  const char* first_missing = nullptr;
  for (std::size_t i = 0; i < count; ++i) {
    const symbol_entry& e = entries[i];
    void* symbol = lookup_symbol(handle, e.name);
    e.assign(e.target, symbol);
    if (symbol == nullptr && e.required && first_missing == nullptr) first_missing = e.name;
  }
  return first_missing;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail
}  // namespace kscope
