// kscope/core/config.hpp — build configuration shared by every kscope header.
//
// Every configuration macro kscope reads is listed in docs/reference.md
// ("Configuration"). The CMake target kscope::kscope defines KSCOPE_HAS_CUDA; a build without
// CMake may define it by hand, otherwise it is detected from the include path.
#pragma once

#ifndef KSCOPE_HAS_CUDA
#  if defined(__has_include)
#    if __has_include(<cuda_runtime_api.h>)
#      define KSCOPE_HAS_CUDA 1
#    else
#      define KSCOPE_HAS_CUDA 0
#    endif
#  else
#    define KSCOPE_HAS_CUDA 0
#  endif
#endif

// NVTX3 is header-only and ships with the CUDA Toolkit. It is used only when CUDA is.
#ifndef KSCOPE_HAS_NVTX
#  if KSCOPE_HAS_CUDA && defined(__has_include)
#    if __has_include(<nvtx3/nvToolsExt.h>)
#      define KSCOPE_HAS_NVTX 1
#    else
#      define KSCOPE_HAS_NVTX 0
#    endif
#  else
#    define KSCOPE_HAS_NVTX 0
#  endif
#endif

// KSCOPE_DISABLE: every scope becomes an empty object and every macro expands to nothing
// that costs time. Analysis functions (stats, roofline, reports) keep working.

// Header-only is the default: every function is defined in its header, `inline`.
//
// KSCOPE_SEPARATE_COMPILATION (defined for the whole program): the heavy headers (the
// features, report, verdict, session, bench, device) give declarations only, so a file
// that includes kscope/kscope.hpp parses class definitions and templates, not thousands
// of function bodies. Exactly one file of the program then defines KSCOPE_IMPLEMENTATION
// before including kscope/kscope.hpp, and gets every definition, compiled once (the CMake
// target kscope::compiled is that file). Scopes, the recorder and the core stay header-only
// in both modes: their hot paths must inline into the caller.
#if defined(KSCOPE_IMPLEMENTATION) && !defined(KSCOPE_SEPARATE_COMPILATION)
#  define KSCOPE_SEPARATE_COMPILATION 1
#endif
#if defined(KSCOPE_SEPARATE_COMPILATION) && !defined(KSCOPE_IMPLEMENTATION)
#  define KSCOPE_DETAIL_DEFINITIONS 0
#elif defined(__CUDA_ARCH__)
// A CUDA compiler's device pass over a .cu file: it parses the host code too, but never
// compiles a host function for the GPU, so the bodies would only cost it time (nvcc's
// device compiler spent 28 of 63 s on the umbrella header, header-only). The host pass,
// which does compile them, gets every body as usual.
#  define KSCOPE_DETAIL_DEFINITIONS 0
#else
#  define KSCOPE_DETAIL_DEFINITIONS 1
#endif
// How a function whose definition sits in a KSCOPE_DETAIL_DEFINITIONS block is declared:
// `inline` in header-only mode, an ordinary external function in the compiled one and
// wherever the bodies are left out (the device pass: an inline function must have one).
#if defined(KSCOPE_SEPARATE_COMPILATION) || !KSCOPE_DETAIL_DEFINITIONS
#  define KSCOPE_DECL
#else
#  define KSCOPE_DECL inline
#endif

#define KSCOPE_VERSION_MAJOR 0
#define KSCOPE_VERSION_MINOR 1
#define KSCOPE_VERSION_PATCH 0
#define KSCOPE_VERSION_STRING "0.1.0"

#define KSCOPE_DETAIL_CONCAT_IMPL(a, b) a##b
#define KSCOPE_DETAIL_CONCAT(a, b) KSCOPE_DETAIL_CONCAT_IMPL(a, b)

#if defined(__GNUC__) || defined(__clang__)
#  define KSCOPE_LIKELY(x) __builtin_expect(!!(x), 1)
#  define KSCOPE_UNLIKELY(x) __builtin_expect(!!(x), 0)
// Keeps a rarely taken path out of the caller, so the caller stays small enough to inline.
#  define KSCOPE_NOINLINE __attribute__((noinline))
// For the scope's open and close (scope/scope.hpp says why it is forced).
#  define KSCOPE_FORCE_INLINE __attribute__((always_inline))
#elif defined(_MSC_VER)
#  define KSCOPE_LIKELY(x) (x)
#  define KSCOPE_UNLIKELY(x) (x)
#  define KSCOPE_NOINLINE __declspec(noinline)
#  define KSCOPE_FORCE_INLINE __forceinline
#else
#  define KSCOPE_LIKELY(x) (x)
#  define KSCOPE_UNLIKELY(x) (x)
#  define KSCOPE_NOINLINE
#  define KSCOPE_FORCE_INLINE
#endif
