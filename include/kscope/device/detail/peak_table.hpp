// kscope/device/detail/peak_table.hpp — dense operations per clock per SM, per architecture.
//
// Theoretical compute peak = ops per clock per SM (this table) x SM count x SM clock.
// The table holds what NVIDIA publishes, divided back to one SM and one clock: every
// entry reproduces a datasheet or whitepaper figure (named in the comment beside it)
// from that product's SM count and the clock NVIDIA used for it. tests/device_test.cpp
// checks each one against its source within 5 %.
//
// Conventions:
//   - "ops" are floating-point operations (an FMA counts 2) for floating types and
//     integer multiply-adds counted the same way for int8 (NVIDIA's "TOPS").
//   - dense only: NVIDIA's "with sparsity" figures are twice these.
//   - core_kind::plain = CUDA cores (FFMA, DFMA, packed HFMA2 for fp16/bf16, DP4A for
//     int8); core_kind::tensor = tensor cores (HMMA/IMMA/DMMA, wgmma, tcgen05).
//   - tensor rates are the full-rate ones: fp16/bf16/tf32/fp8 with FP32 accumulate as
//     on the data-centre and professional parts. GeForce boards of Turing, Ampere
//     GA10x, Ada and Blackwell sm_120 run FP32-accumulate tensor math (all of tf32 and
//     bf16, and fp16/fp8 GEMMs that accumulate in fp32) at HALF these rates; the CUDA
//     attributes cannot tell a GeForce board from its professional sibling, so kscope
//     documents this instead of guessing from the product name.
//   - NaN = unknown or unsupported. kscope never guesses a rate: an architecture or a
//     type that is not listed yields NaN, and reports print "unknown".
//   - Hopper and Blackwell datasheets quote tensor-core figures at a lower "tensor"
//     boost clock than the CUDA-core figures (H100 SXM: 1830 vs 1980 MHz). A live
//     device reports only its maximum SM clock (cudaDevAttrClockRate, 1980 MHz on
//     H100/H200), and kscope multiplies by that, so its theoretical tensor peaks on
//     those parts are ~8 % above the datasheet (1070 vs 989 dense bf16 TFLOP/s on
//     H100/H200): an upper bound the chip reaches only if it holds the max clock.
#pragma once

#include "../../core/dtype.hpp"

#include <cmath>
#include <limits>

namespace kscope {
namespace detail {

// One architecture: dense ops per clock per SM, indexed [data_type][core_kind].
struct arch_rates {
  int major, minor;
  const char* name;    // "Hopper (sm_90)"
  const char* source;  // the documents the entries come from
  double ops[7][2];    // [data_type][0 plain, 1 tensor]
};

inline constexpr double unknown_rate = std::numeric_limits<double>::quiet_NaN();

// Rows: fp64, fp32, tf32, fp16, bf16, fp8, int8; columns: {plain, tensor}.
// Reading a row: "V100 SXM2, 80 SMs at 1530 MHz: 7.8 FP64 TFLOPS" -> 7.8e12 / (80 x
// 1.53e9) = 64 per SM per clock.
inline constexpr arch_rates arch_rate_table[] = {
    // Volta GV100. Sources: "NVIDIA Tesla V100 GPU Architecture" whitepaper (2017),
    // Table 1, Tesla V100 SXM2, 80 SMs, 1530 MHz boost: FP64 7.8, FP32 15.7, Tensor
    // (fp16 in, fp32 accumulate) 125 TFLOPS; FP16 on CUDA cores 31.4 TFLOPS and INT8
    // 62 TOPS (DP4A on CUDA cores; Volta has no integer tensor cores) from the V100
    // column of the "NVIDIA A100 Tensor Core GPU Architecture" whitepaper (2020), Table 1.
    {7, 0, "Volta (sm_70)", "NVIDIA Tesla V100 GPU Architecture whitepaper; A100 whitepaper Table 1 (V100 column)",
     {/* fp64 */ {64, unknown_rate},
      /* fp32 */ {128, unknown_rate},
      /* tf32 */ {unknown_rate, unknown_rate},
      /* fp16 */ {256, 1024},
      /* bf16 */ {unknown_rate, unknown_rate},
      /* fp8  */ {unknown_rate, unknown_rate},
      /* int8 */ {512, unknown_rate}}},
    // Turing TU10x. Source: "NVIDIA Turing GPU Architecture" whitepaper (2018), Quadro
    // RTX 6000 (72 SMs, 1770 MHz): FP32 16.3, FP16 (CUDA cores) 32.6, FP16 tensor 130.5
    // TFLOPS, INT8 tensor 261 TOPS, FP64 at 1/32 of FP32; NVIDIA T4 datasheet (40 SMs,
    // 1590 MHz): FP32 8.1, mixed-precision tensor 65 TFLOPS, INT8 130 TOPS.
    {7, 5, "Turing (sm_75)", "NVIDIA Turing GPU Architecture whitepaper; NVIDIA T4 datasheet",
     {/* fp64 */ {4, unknown_rate},
      /* fp32 */ {128, unknown_rate},
      /* tf32 */ {unknown_rate, unknown_rate},
      /* fp16 */ {256, 1024},
      /* bf16 */ {unknown_rate, unknown_rate},
      /* fp8  */ {unknown_rate, unknown_rate},
      /* int8 */ {unknown_rate, 2048}}},
    // Ampere GA100. Source: "NVIDIA A100 Tensor Core GPU Architecture" whitepaper
    // (2020), Table 1, A100 SXM4 (108 SMs, 1410 MHz): FP64 9.7, FP64 tensor 19.5, FP32
    // 19.5, FP16 (non-tensor) 78, BF16 (non-tensor) 39, TF32 tensor 156, FP16/BF16
    // tensor 312 TFLOPS, INT8 tensor 624 TOPS (all dense).
    {8, 0, "Ampere (sm_80)", "NVIDIA A100 Tensor Core GPU Architecture whitepaper, Table 1",
     {/* fp64 */ {64, 128},
      /* fp32 */ {128, unknown_rate},
      /* tf32 */ {unknown_rate, 1024},
      /* fp16 */ {512, 2048},
      /* bf16 */ {256, 2048},
      /* fp8  */ {unknown_rate, unknown_rate},
      /* int8 */ {unknown_rate, 4096}}},
    // Ampere GA10x. Sources: "NVIDIA Ampere GA102 GPU Architecture" whitepaper (2020),
    // GeForce RTX 3090 (82 SMs, 1695 MHz): FP32 35.6, FP16/BF16 (non-tensor) 35.6, FP16
    // tensor with FP16 accumulate 142 TFLOPS, FP64 at 1/64 of FP32; NVIDIA A40 datasheet
    // (84 SMs, 1740 MHz; full-rate FP32 accumulate): FP32 37.4, TF32 tensor 74.8,
    // BF16/FP16 tensor 149.7 TFLOPS, INT8 tensor 299.3 TOPS (dense).
    {8, 6, "Ampere (sm_86)", "NVIDIA Ampere GA102 GPU Architecture whitepaper; NVIDIA A40 datasheet",
     {/* fp64 */ {4, unknown_rate},
      /* fp32 */ {256, unknown_rate},
      /* tf32 */ {unknown_rate, 512},
      /* fp16 */ {256, 1024},
      /* bf16 */ {256, 1024},
      /* fp8  */ {unknown_rate, unknown_rate},
      /* int8 */ {unknown_rate, 2048}}},
    // Ampere GA10B (Jetson AGX Orin). Source: "NVIDIA Jetson AGX Orin Series Technical
    // Brief" v1.2 (2022): 16 SMs (2048 CUDA cores, 64 tensor cores) at 1.3 GHz, 5.3 FP32
    // TFLOPS, 170 INT8 sparse TOPS (85 dense). Other rates are not published there.
    {8, 7, "Ampere (sm_87)", "NVIDIA Jetson AGX Orin Series Technical Brief v1.2",
     {/* fp64 */ {unknown_rate, unknown_rate},
      /* fp32 */ {256, unknown_rate},
      /* tf32 */ {unknown_rate, unknown_rate},
      /* fp16 */ {unknown_rate, unknown_rate},
      /* bf16 */ {unknown_rate, unknown_rate},
      /* fp8  */ {unknown_rate, unknown_rate},
      /* int8 */ {unknown_rate, 4096}}},
    // Ada AD10x. Sources: "NVIDIA Ada GPU Architecture" whitepaper (2022), GeForce RTX
    // 4090 (128 SMs, 2520 MHz): FP32 82.6, FP16/BF16 (non-tensor) 82.6, FP64 1.3
    // TFLOPS; NVIDIA L40S datasheet (142 SMs, 2520 MHz; full-rate FP32 accumulate):
    // FP32 91.6, TF32 tensor 183, BF16/FP16 tensor 362, FP8 tensor 733 TFLOPS, INT8
    // tensor 733 TOPS (dense; the datasheet's sparse figures are twice these).
    {8, 9, "Ada (sm_89)", "NVIDIA Ada GPU Architecture whitepaper; NVIDIA L40S datasheet",
     {/* fp64 */ {4, unknown_rate},
      /* fp32 */ {256, unknown_rate},
      /* tf32 */ {unknown_rate, 512},
      /* fp16 */ {256, 1024},
      /* bf16 */ {256, 1024},
      /* fp8  */ {unknown_rate, 2048},
      /* int8 */ {unknown_rate, 2048}}},
    // Hopper GH100. Sources: "NVIDIA H100 Tensor Core GPU Architecture" whitepaper
    // (2022), Table 3, and the H100 SXM datasheet, H100 SXM5 (132 SMs): at 1980 MHz FP64
    // 33.5, FP64 tensor 66.9, FP32 66.9, FP16/BF16 (non-tensor) 133.8 TFLOPS; at the
    // 1830 MHz tensor boost clock TF32 494.7, FP16/BF16 989.4, FP8 1978.9 TFLOPS, INT8
    // 1978.9 TOPS (dense). H200 and H100 PCIe/NVL share the SM.
    {9, 0, "Hopper (sm_90)", "NVIDIA H100 Tensor Core GPU Architecture whitepaper, Table 3; H100 SXM datasheet",
     {/* fp64 */ {128, 256},
      /* fp32 */ {256, unknown_rate},
      /* tf32 */ {unknown_rate, 2048},
      /* fp16 */ {512, 4096},
      /* bf16 */ {512, 4096},
      /* fp8  */ {unknown_rate, 8192},
      /* int8 */ {unknown_rate, 8192}}},
    // Blackwell GB100 (B200). Source: NVIDIA HGX B200 / DGX B200 datasheets, per GPU:
    // FP64 and FP64 tensor 37, FP32 75 TFLOPS; TF32 tensor 2.2, FP16/BF16 4.5, FP8 9
    // PFLOPS and INT8 9 POPS with sparsity (1.1, 2.25, 4.5, 4.5 dense). With the B200's
    // 148 SMs these are 128 / 256 per SM per clock at ~1.96 GHz and 4096 / 8192 / 16384
    // at ~1.86 GHz. FP16/BF16 on CUDA cores is not in the datasheet: unknown.
    {10, 0, "Blackwell (sm_100)", "NVIDIA HGX B200 / DGX B200 datasheets",
     {/* fp64 */ {128, 128},
      /* fp32 */ {256, unknown_rate},
      /* tf32 */ {unknown_rate, 4096},
      /* fp16 */ {unknown_rate, 8192},
      /* bf16 */ {unknown_rate, 8192},
      /* fp8  */ {unknown_rate, 16384},
      /* int8 */ {unknown_rate, 16384}}},
    // Blackwell GB20x (RTX Blackwell). Source: "NVIDIA RTX Blackwell GPU Architecture"
    // whitepaper (2025), GeForce RTX 5090 (170 SMs, 2407 MHz): FP32 104.8, FP64 1.6
    // TFLOPS; FP16 tensor (FP16 accumulate) 419, FP8 tensor 838 TFLOPS, INT8 838 TOPS
    // dense (838 / 1676 / 1676 with sparsity); TF32 and BF16 are FP32-accumulate and
    // run at half rate on GeForce (104.8 and 209.5 dense), the full rates listed here
    // are those of the RTX PRO Blackwell parts.
    {12, 0, "Blackwell (sm_120)", "NVIDIA RTX Blackwell GPU Architecture whitepaper",
     {/* fp64 */ {4, unknown_rate},
      /* fp32 */ {256, unknown_rate},
      /* tf32 */ {unknown_rate, 512},
      /* fp16 */ {unknown_rate, 1024},
      /* bf16 */ {unknown_rate, 1024},
      /* fp8  */ {unknown_rate, 2048},
      /* int8 */ {unknown_rate, 2048}}},
};

// The row for a compute capability, or nullptr when kscope has none.
[[nodiscard]] KSCOPE_DECL const arch_rates* find_arch_rates(int major, int minor) noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL const arch_rates* find_arch_rates(int major, int minor) noexcept {
  for (const arch_rates& row : arch_rate_table) {
    if (row.major == major && row.minor == minor) return &row;
  }
  return nullptr;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// Dense ops per clock per SM; NaN when unknown or unsupported.
[[nodiscard]] KSCOPE_DECL double dense_ops_per_clock_per_sm(int major, int minor, data_type type,
                                                       core_kind cores) noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL double dense_ops_per_clock_per_sm(int major, int minor, data_type type,
                                                       core_kind cores) noexcept {
  const arch_rates* row = find_arch_rates(major, minor);
  const auto t = static_cast<unsigned>(type);
  const auto k = static_cast<unsigned>(cores);
  if (!row || t >= 7 || k >= 2) return unknown_rate;
  return row->ops[t][k];
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail
}  // namespace kscope
