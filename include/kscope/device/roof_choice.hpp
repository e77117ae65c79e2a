// kscope/device/roof_choice.hpp — which compute roof a piece of work is placed under,
// given the dtype it was tagged with. Session scopes (a "dtype" tag) and benchmarks
// (bench::dtype) both call choose_roof(), so one dtype gets one roof everywhere.
//
// The rule:
//   - A dtype that parse_data_type() reads (core/dtype.hpp: "bf16", "half", "float",
//     "__nv_bfloat16", ...) gets the fastest roof the device has for that type: tensor
//     cores where the peak table lists them (bf16 -> bf16 tensor; fp64 on A100/H100 ->
//     fp64 tensor), plain CUDA cores otherwise (fp32 -> fp32 plain). A type the device
//     has no rate for (fp8 before Ada, any type on an architecture not in the table)
//     gets no roof: NaN and an empty label, never a guess from another type.
//   - No dtype, or one it does not read ("complex128", "int4", "(mixed)"), gets fp32 on
//     plain cores: the roof of an ordinary CUDA-core kernel. `dtype_known` is false then,
//     so a caller can say so.
// The fastest roof is chosen on purpose: a roof is an upper bound, and a kernel that
// leaves the tensor cores idle should read as far from what the device could do.
// Measured peaks (measure_peaks) do not change the choice, only the numbers reported
// beside it.
//
//   kscope::roof_choice roof = kscope::choose_roof(kscope::theoretical_peaks(gpu), "half");
//   // roof.label == "fp16 tensor" on a V100 or newer
#pragma once

#include "../core/dtype.hpp"
#include "device_info.hpp"

#include <cmath>
#include <limits>
#include <string>
#include <string_view>

namespace kscope {

// The compute roof a dtype is placed under, with its theoretical and (when measured)
// sustained rates; NaN when unknown. See the rule above.
//   kscope::roof_choice roof = kscope::choose_roof(peaks, "bf16");
//   kscope::try_place(w, seconds, roof.theoretical_flops_per_s, peaks.theoretical_bytes_per_s);
struct roof_choice {
  std::string label;                  // "bf16 tensor"; empty when the device has no roof for the type
  data_type type = data_type::fp32;
  core_kind cores = core_kind::plain;
  bool dtype_known = false;           // the dtype text named a data type parse_data_type() reads
  double theoretical_flops_per_s = std::numeric_limits<double>::quiet_NaN();
  double measured_flops_per_s = std::numeric_limits<double>::quiet_NaN();
};

// The roof for a dtype tag on a device's peaks (theoretical_peaks or measure_peaks).
//   kscope::roof_choice untagged = kscope::choose_roof(peaks, "");   // "fp32 plain"
[[nodiscard]] KSCOPE_DECL roof_choice choose_roof(const device_peaks& peaks, std::string_view dtype);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL roof_choice choose_roof(const device_peaks& peaks, std::string_view dtype) {
  roof_choice best;
  best.dtype_known = parse_data_type(dtype, best.type);
  for (core_kind cores : {core_kind::tensor, core_kind::plain}) {
    if (!best.dtype_known && cores == core_kind::tensor) continue;
    const compute_roof* r = peaks.find(best.type, cores);
    if (!r || !std::isfinite(r->theoretical_flops_per_s)) continue;
    if (std::isfinite(best.theoretical_flops_per_s) && !(r->theoretical_flops_per_s > best.theoretical_flops_per_s))
      continue;
    best.cores = cores;
    best.label = std::string(to_string(best.type)) + " " + to_string(cores);
    best.theoretical_flops_per_s = r->theoretical_flops_per_s;
    best.measured_flops_per_s = r->measured_flops_per_s;
  }
  return best;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace kscope
