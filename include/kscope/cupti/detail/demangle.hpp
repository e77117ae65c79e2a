// kscope/cupti/detail/demangle.hpp — kernel names as C++ signatures.
//
// CUPTI reports Itanium-mangled names ("_Z4gemmv"); the top-kernels table and the trace
// show them demangled ("gemm()"). abi::__cxa_demangle where the C++ runtime has it.
#pragma once

#include "../../core/config.hpp"
#include <cstdlib>
#include <string>

#if defined(__has_include)
#  if __has_include(<cxxabi.h>)
#    include <cxxabi.h>
#    define KSCOPE_DETAIL_HAS_CXXABI 1
#  endif
#endif
#ifndef KSCOPE_DETAIL_HAS_CXXABI
#  define KSCOPE_DETAIL_HAS_CXXABI 0
#endif

namespace kscope {
namespace detail {

// abi::__cxa_demangle, falling back to the raw name (extern "C" kernels, other ABIs).
//
//   detail::demangle("_Z4gemmv");     // "gemm()"
//   detail::demangle("my_c_kernel");  // "my_c_kernel"
KSCOPE_DECL std::string demangle(const char* name);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string demangle(const char* name) {
  if (name == nullptr) return "(unknown kernel)";
#if KSCOPE_DETAIL_HAS_CXXABI
  int status = 0;
  char* out = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  if (status == 0 && out != nullptr) {
    std::string result(out);
    std::free(out);
    return result;
  }
  std::free(out);
#endif
  return std::string(name);
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail
}  // namespace kscope

#undef KSCOPE_DETAIL_HAS_CXXABI
