// kscope/device/detail/cublas_loader.hpp — cuBLAS reached through dlopen, never linked.
//
// measure_peaks() times a cuBLAS GEMM for the sustained tensor-core roofs. A program
// that includes kscope must start where cuBLAS is absent (kscope never breaks the host
// program: docs/decisions.md), so the library is opened at run time and the four entry points it needs are looked up
// by name. Nothing here includes a cuBLAS or CUDA header: the few enum values used are
// ABI constants (they cannot change without breaking every compiled cuBLAS program) and
// tests/device_test.cpp checks them against <cublas_api.h> where that header exists.
//
// Search order (the first that opens and has every symbol wins):
//   1. the KSCOPE_CUBLAS_LIBRARY environment variable (a file name or path);
//   2. the KSCOPE_CUBLAS_LIBRARY macro, when defined at compile time (a string);
//   3. libcublas.so.13, libcublas.so.12, libcublas.so (the dynamic loader's path);
//   4. the same names in KSCOPE_CUDA_LIBRARY_DIR (the toolkit CMake found).
// The library is never closed: unloading cuBLAS while the CUDA runtime may still hold
// its kernels is not worth the risk, and it is loaded at most once per process.
#pragma once

#include "../../core/config.hpp"
#include "../../core/detail/once.hpp"
#include "../../core/detail/symbol_table.hpp"  // its entry points; dlfcn.h and KSCOPE_DETAIL_HAS_DLOPEN

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

namespace kscope {
namespace detail {

// ABI values of the cuBLAS / CUDA enums the GEMM measurements pass (cublas_api.h,
// library_types.h). C enums are int-sized on every platform CUDA supports.
namespace cublas_abi {
inline constexpr int status_success = 0;   // CUBLAS_STATUS_SUCCESS
inline constexpr int op_n = 0;             // CUBLAS_OP_N
inline constexpr int op_t = 1;             // CUBLAS_OP_T
inline constexpr int gemm_default = -1;    // CUBLAS_GEMM_DEFAULT
inline constexpr int compute_32f = 68;     // CUBLAS_COMPUTE_32F
inline constexpr int compute_32f_fast_tf32 = 77;  // CUBLAS_COMPUTE_32F_FAST_TF32
inline constexpr int compute_64f = 70;     // CUBLAS_COMPUTE_64F
inline constexpr int r_32f = 0;            // CUDA_R_32F
inline constexpr int r_64f = 1;            // CUDA_R_64F
inline constexpr int r_16f = 2;            // CUDA_R_16F
inline constexpr int r_16bf = 14;          // CUDA_R_16BF
}  // namespace cublas_abi

// The entry points kscope uses. cublasHandle_t is a pointer (struct cublasContext*)
// and cudaStream_t is a pointer too, so both travel as void*.
struct cublas_api {
  using create_fn = int (*)(void** handle);                 // cublasCreate_v2
  using destroy_fn = int (*)(void* handle);                 // cublasDestroy_v2
  using set_stream_fn = int (*)(void* handle, void* stream);  // cublasSetStream_v2
  using gemm_ex_fn = int (*)(void* handle, int transa, int transb, int m, int n, int k, const void* alpha,
                             const void* a, int a_type, int lda, const void* b, int b_type, int ldb,
                             const void* beta, void* c, int c_type, int ldc, int compute_type,
                             int algo);                      // cublasGemmEx
  using status_string_fn = const char* (*)(int status);     // cublasGetStatusString (optional)

  create_fn create = nullptr;
  destroy_fn destroy = nullptr;
  set_stream_fn set_stream = nullptr;
  gemm_ex_fn gemm_ex = nullptr;
  status_string_fn status_string = nullptr;
  std::string path;   // the library that was opened
  std::string error;  // why none could be used (empty when ok())

  [[nodiscard]] bool ok() const noexcept;

  // "CUBLAS_STATUS_..." text for a status, or the number when the name is unknown.
  [[nodiscard]] std::string describe(int status) const;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL bool cublas_api::ok() const noexcept { return create && destroy && set_stream && gemm_ex; }
#endif  // KSCOPE_DETAIL_DEFINITIONS

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string cublas_api::describe(int status) const {
  const char* text = status_string ? status_string(status) : nullptr;
  return text ? std::string(text) : "cuBLAS status " + std::to_string(status);
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// Candidate file names in search order (see the top of this header).
KSCOPE_DECL std::vector<std::string> cublas_candidates();

// Opens cuBLAS once per process; later calls return the same result. A fork while another
// thread is loading it waits for the load (hundreds of milliseconds) instead of leaving
// the child a load it would wait on forever (core/detail/once.hpp).
//   const auto& blas = kscope::detail::cublas();
//   if (!blas.ok()) report(blas.error);
KSCOPE_DECL const cublas_api& cublas();

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::vector<std::string> cublas_candidates() {
  std::vector<std::string> names;
  if (const char* env = std::getenv("KSCOPE_CUBLAS_LIBRARY"); env && *env) names.emplace_back(env);
#ifdef KSCOPE_CUBLAS_LIBRARY
  names.emplace_back(KSCOPE_CUBLAS_LIBRARY);
#endif
  const char* sonames[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so"};
  for (const char* soname : sonames) names.emplace_back(soname);
#ifdef KSCOPE_CUDA_LIBRARY_DIR
  for (const char* soname : sonames) names.emplace_back(std::string(KSCOPE_CUDA_LIBRARY_DIR) + "/" + soname);
#endif
  return names;
}

KSCOPE_DECL const cublas_api& cublas() {
  static lazy_global<const cublas_api> api{lock_rank::init_code_loading};  // never destroyed
  return api.get([] {
    // Built, then moved to the heap by assignment (nvcc 13.0's cicc aborts on some
    // `new T(expression)` forms in C++20: availability.hpp).
    const auto kept = [](cublas_api&& built) {
      auto* out = new cublas_api;
      *out = std::move(built);
      return out;
    };
    cublas_api result;
#if KSCOPE_DETAIL_HAS_DLOPEN
    std::string tried;
    for (const std::string& name : cublas_candidates()) {
      void* library = ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (!library) {
        const char* why = ::dlerror();
        tried += "\n  " + name + ": " + (why ? why : "cannot open");
        continue;
      }
      cublas_api candidate;
      const symbol_entry entries[] = {
          required_symbol("cublasCreate_v2", candidate.create),
          required_symbol("cublasDestroy_v2", candidate.destroy),
          required_symbol("cublasSetStream_v2", candidate.set_stream),
          required_symbol("cublasGemmEx", candidate.gemm_ex),
          optional_symbol("cublasGetStatusString", candidate.status_string),
      };
      if (resolve_symbols(library, entries) != nullptr) {  // candidate.ok() is false
        tried += "\n  " + name + ": opened, but cublasCreate_v2/cublasDestroy_v2/cublasSetStream_v2/cublasGemmEx missing";
        ::dlclose(library);
        continue;
      }
      candidate.path = name;
      return kept(std::move(candidate));
    }
    result.error = "cuBLAS not found (set KSCOPE_CUBLAS_LIBRARY to its path); tried:" + tried;
#else
    result.error = "cuBLAS not loaded: this platform has no dlopen";
#endif
    return kept(std::move(result));
  });
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail
}  // namespace kscope
