// kscope/device/device_info.hpp — the one description of a GPU, and its theoretical roofs.
//
// Pure: no CUDA header, so report and benchmark data (bench/result.hpp) can hold a
// device_info on any machine. device.hpp adds what needs the CUDA runtime:
// query_device(), which fills a device_info from the live GPU, and measure_peaks().
//
//   DRAM bytes/s = memory clock x bus width x 2 (double data rate) / 8,
//   ops/s        = ops per clock per SM (detail/peak_table.hpp) x SMs x SM clock,
// per data type with tensor cores and plain CUDA cores kept apart; NaN = unknown. Every
// peak kscope prints (reports, benchmarks, the CLI) is derived here and nowhere else.
//
//   kscope::device_info gpu;                 // or kscope::query_device(0)
//   gpu.present = true; gpu.cc_major = 9; gpu.sm_count = 132; gpu.sm_clock_khz = 1'980'000;
//   kscope::device_peaks peaks = kscope::theoretical_peaks(gpu);
#pragma once

#include "../core/config.hpp"
#include "../core/detail/json_writer.hpp"
#include "../core/detail/number_format.hpp"
#include "../core/dtype.hpp"
#include "../core/roofline.hpp"
#include "detail/peak_table.hpp"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace kscope {

// ---- theoretical peaks (pure) ---------------------------------------------------------

// DRAM bandwidth from the memory clock (kHz, as cudaDevAttrMemoryClockRate reports it)
// and the bus width: clock x 2 transfers per clock x width / 8. NaN for a non-positive
// or non-finite input.
//   double h200 = kscope::theoretical_bytes_per_s(3'201'000, 6016);  // 4.81e12
[[nodiscard]] KSCOPE_DECL double theoretical_bytes_per_s(double memory_clock_khz, double bus_width_bits) noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL double theoretical_bytes_per_s(double memory_clock_khz, double bus_width_bits) noexcept {
  if (!(memory_clock_khz > 0) || !(bus_width_bits > 0) || !std::isfinite(memory_clock_khz) ||
      !std::isfinite(bus_width_bits)) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  return memory_clock_khz * 1e3 * 2.0 * bus_width_bits / 8.0;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// Dense compute peak for an architecture (compute capability), SM count and SM clock
// (kHz): ops per clock per SM x SMs x clock. NaN when the table does not know the
// architecture or the architecture lacks that data type on those cores.
//   double a100_bf16 = kscope::theoretical_flops_per_s(8, 0, 108, 1'410'000,
//                                                      kscope::data_type::bf16,
//                                                      kscope::core_kind::tensor);  // 312e12
[[nodiscard]] KSCOPE_DECL double theoretical_flops_per_s(int cc_major, int cc_minor, int sm_count, double sm_clock_khz,
                                                    data_type type, core_kind cores) noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL double theoretical_flops_per_s(int cc_major, int cc_minor, int sm_count, double sm_clock_khz,
                                                    data_type type, core_kind cores) noexcept {
  if (sm_count <= 0 || !(sm_clock_khz > 0) || !std::isfinite(sm_clock_khz)) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  return detail::dense_ops_per_clock_per_sm(cc_major, cc_minor, type, cores) * sm_count * sm_clock_khz * 1e3;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// "Hopper (sm_90)" for architectures in the peak table, "sm_XY (not in kscope's peak
// table)" otherwise.
//   std::string arch = kscope::architecture_name(9, 0);
[[nodiscard]] KSCOPE_DECL std::string architecture_name(int cc_major, int cc_minor);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string architecture_name(int cc_major, int cc_minor) {
  if (const detail::arch_rates* row = detail::find_arch_rates(cc_major, cc_minor)) return row->name;
  return "sm_" + std::to_string(cc_major) + std::to_string(cc_minor) + " (not in kscope's peak table)";
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// ---- the device -----------------------------------------------------------------------

// The GPU a report or a benchmark ran on: kscope's only description of a device, filled
// by query_device() (device.hpp) and carried as is by session reports and bench_report.
// present == false means there is no usable device; `problem` then says why (no driver,
// no GPU, bad ordinal, built without CUDA).
//   kscope::device_info gpu = kscope::query_device();
//   if (!gpu.present) std::printf("%s\n", gpu.problem.c_str());
struct device_info {
  bool present = false;
  std::string problem;            // empty when present
  int ordinal = -1;               // the CUDA device ordinal asked for
  int device_count = 0;           // devices visible to this process
  std::string name;               // "NVIDIA H200"
  int cc_major = 0, cc_minor = 0;  // compute capability
  int sm_count = 0;
  std::int64_t l2_bytes = 0;
  std::uint64_t memory_bytes = 0;  // total global memory
  int sm_clock_khz = 0;            // maximum SM clock (cudaDevAttrClockRate)
  int memory_clock_khz = 0;        // peak memory clock (cudaDevAttrMemoryClockRate)
  int memory_bus_width_bits = 0;   // cudaDevAttrGlobalMemoryBusWidth
  int driver_version = 0;          // CUDA version the driver supports: 13000 = 13.0; 0 = no driver
  int runtime_version = 0;         // CUDA runtime linked in: 13000 = 13.0; 0 = none
  std::string uuid;                // "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as nvidia-smi prints
  std::string pci_bus_id;          // "0000:3b:00.0"
};

// The device's theoretical DRAM bandwidth (NaN without a device).
//   double bw = kscope::theoretical_bytes_per_s(gpu);
[[nodiscard]] KSCOPE_DECL double theoretical_bytes_per_s(const device_info& d) noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL double theoretical_bytes_per_s(const device_info& d) noexcept {
  return d.present ? theoretical_bytes_per_s(d.memory_clock_khz, d.memory_bus_width_bits)
                   : std::numeric_limits<double>::quiet_NaN();
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// The rated (maximum) SM clock in MHz, the clock every theoretical compute peak uses;
// NaN when unknown.
//   double mhz = kscope::rated_sm_clock_mhz(gpu);   // 1980 on an H200
[[nodiscard]] KSCOPE_DECL double rated_sm_clock_mhz(const device_info& d) noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL double rated_sm_clock_mhz(const device_info& d) noexcept {
  return d.sm_clock_khz > 0 ? d.sm_clock_khz / 1e3 : std::numeric_limits<double>::quiet_NaN();
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// The device's theoretical compute peak for a data type and core kind (NaN: unknown).
//   double bf16 = kscope::theoretical_flops_per_s(gpu, kscope::data_type::bf16, kscope::core_kind::tensor);
[[nodiscard]] KSCOPE_DECL double theoretical_flops_per_s(const device_info& d, data_type type, core_kind cores) noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL double theoretical_flops_per_s(const device_info& d, data_type type, core_kind cores) noexcept {
  return d.present ? theoretical_flops_per_s(d.cc_major, d.cc_minor, d.sm_count, d.sm_clock_khz, type, cores)
                   : std::numeric_limits<double>::quiet_NaN();
}
#endif  // KSCOPE_DETAIL_DEFINITIONS


namespace detail {

// 13000 -> "13.0", 12040 -> "12.4"; 0 -> "none".
KSCOPE_DECL std::string cuda_version_text(int version);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string cuda_version_text(int version) {
  if (version <= 0) return "none";
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail


// One line for the top of a report.
//   "NVIDIA H200: Hopper (sm_90), 132 SMs at 1980 MHz, 140 GiB, 3201 MHz x 6016-bit memory
//    (4.81 TB/s), 60 MiB L2; driver 13.0, runtime 13.0; GPU-1a2b..."
//   "no NVIDIA driver: libcuda.so.1 not found (...), so this process has no GPU; driver none,
//    runtime 13.0"
[[nodiscard]] KSCOPE_DECL std::string describe(const device_info& d);

// Writes the device as a JSON object (the "gpu" context block of reports).
//   std::string out; kscope::detail::json_writer w(out); kscope::write_json(w, gpu);
KSCOPE_DECL void write_json(detail::json_writer& w, const device_info& d);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string describe(const device_info& d) {
  const std::string versions =
      "driver " + detail::cuda_version_text(d.driver_version) + ", runtime " + detail::cuda_version_text(d.runtime_version);
  if (!d.present) return d.problem + "; " + versions;
  // Numbers through format_fixed: '.' whatever the host program's C locale.
  using detail::format_fixed;
  return d.name + ": " + architecture_name(d.cc_major, d.cc_minor) + ", " + std::to_string(d.sm_count) + " SMs at " +
         format_fixed(d.sm_clock_khz / 1e3, 0) + " MHz, " +
         format_fixed(static_cast<double>(d.memory_bytes) / (1024.0 * 1024 * 1024), 1) + " GiB, " +
         format_fixed(d.memory_clock_khz / 1e3, 0) + " MHz x " + std::to_string(d.memory_bus_width_bits) +
         "-bit memory (" + detail::format_si(theoretical_bytes_per_s(d), "B/s") + "), " +
         format_fixed(static_cast<double>(d.l2_bytes) / (1024.0 * 1024), 0) + " MiB L2; " + versions + "; " + d.uuid;
}

KSCOPE_DECL void write_json(detail::json_writer& w, const device_info& d) {
  w.begin_object();
  w.member("present", d.present);
  if (!d.present) w.member("problem", d.problem);
  w.member("ordinal", d.ordinal);
  w.member("device_count", d.device_count);
  if (d.present) {
    w.member("name", d.name);
    w.member("compute_capability", std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor));
    w.member("architecture", architecture_name(d.cc_major, d.cc_minor));
    w.member("sm_count", d.sm_count);
    w.member("sm_clock_khz", d.sm_clock_khz);
    w.member("memory_clock_khz", d.memory_clock_khz);
    w.member("memory_bus_width_bits", d.memory_bus_width_bits);
    w.member("memory_bytes", static_cast<unsigned long long>(d.memory_bytes));
    w.member("l2_bytes", static_cast<long long>(d.l2_bytes));
    w.member("theoretical_bytes_per_s", theoretical_bytes_per_s(d));
    w.member("uuid", d.uuid);
    w.member("pci_bus_id", d.pci_bus_id);
  }
  w.member("driver_version", detail::cuda_version_text(d.driver_version));
  w.member("runtime_version", detail::cuda_version_text(d.runtime_version));
  w.end_object();
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// The device as a JSON document.
//   std::string json = kscope::to_json(kscope::query_device());
[[nodiscard]] KSCOPE_DECL std::string to_json(const device_info& d);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string to_json(const device_info& d) {
  std::string out;
  detail::json_writer w(out);
  write_json(w, d);
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// ---- roofs: theoretical and measured side by side -------------------------------------

// One compute roof of a device: a data type on plain or tensor cores, its theoretical
// peak and, after measure_peaks(), the sustained rate a kernel or GEMM reached.
//   const kscope::compute_roof* r = peaks.find(kscope::data_type::bf16, kscope::core_kind::tensor);
struct compute_roof {
  data_type type = data_type::fp32;
  core_kind cores = core_kind::plain;
  double theoretical_flops_per_s = std::numeric_limits<double>::quiet_NaN();  // NaN: unknown
  double measured_flops_per_s = std::numeric_limits<double>::quiet_NaN();     // NaN: not measured
  std::string method;  // how it was measured ("cublasGemmEx bf16 8192^3 ...")
  std::string error;   // why the measurement failed; empty if it worked or was not tried
};

// The roofs of one device. measured_* are NaN until measure_peaks() fills them; every
// measurement that failed adds a line to `failures` (and to its roof's error).
//   kscope::device_peaks peaks = kscope::theoretical_peaks(kscope::query_device());
struct device_peaks {
  device_info device;
  double theoretical_bytes_per_s = std::numeric_limits<double>::quiet_NaN();
  double measured_bytes_per_s = std::numeric_limits<double>::quiet_NaN();
  std::string bandwidth_method;
  std::string bandwidth_error;
  std::vector<compute_roof> compute;   // every roof the table knows, then any other measured
  std::vector<std::string> failures;   // "bf16 tensor: cublasGemmEx failed: ..."

  // The roof for a type and core kind, or nullptr.
  [[nodiscard]] const compute_roof* find(data_type type, core_kind cores) const noexcept;
  [[nodiscard]] compute_roof& find_or_add(data_type type, core_kind cores);
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL const compute_roof* device_peaks::find(data_type type, core_kind cores) const noexcept {
  for (const compute_roof& r : compute) {
    if (r.type == type && r.cores == cores) return &r;
  }
  return nullptr;
}

KSCOPE_DECL compute_roof& device_peaks::find_or_add(data_type type, core_kind cores) {
  for (compute_roof& r : compute) {
    if (r.type == type && r.cores == cores) return r;
  }
  compute_roof r;
  r.type = type;
  r.cores = cores;
  compute.push_back(r);
  return compute.back();
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// The theoretical roofs of a device, no measurement (pure; works without CUDA).
//   auto peaks = kscope::theoretical_peaks(gpu);
[[nodiscard]] KSCOPE_DECL device_peaks theoretical_peaks(const device_info& d);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL device_peaks theoretical_peaks(const device_info& d) {
  device_peaks peaks;
  peaks.device = d;
  peaks.theoretical_bytes_per_s = theoretical_bytes_per_s(d);
  for (data_type type : all_data_types) {
    for (core_kind cores : {core_kind::plain, core_kind::tensor}) {
      const double peak = theoretical_flops_per_s(d, type, cores);
      if (std::isnan(peak)) continue;
      compute_roof& r = peaks.find_or_add(type, cores);
      r.theoretical_flops_per_s = peak;
    }
  }
  return peaks;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS


// Roofs to draw (plot.hpp): for each requested (type, cores) the theoretical roof and,
// when measured, the measured one (with the measured bandwidth when there is one).
// Roofs with an unknown peak are left out.
//   auto roofs = kscope::roof_lines(peaks, {{kscope::data_type::bf16, kscope::core_kind::tensor}});
[[nodiscard]] KSCOPE_DECL std::vector<roof_line> roof_lines(
    const device_peaks& peaks,
    const std::vector<std::pair<data_type, core_kind>>& which = {{data_type::fp32, core_kind::plain},
                                                                 {data_type::bf16, core_kind::tensor}});

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::vector<roof_line> roof_lines(const device_peaks& peaks,
    const std::vector<std::pair<data_type, core_kind>>& which) {
  std::vector<roof_line> lines;
  for (const auto& [type, cores] : which) {
    const compute_roof* r = peaks.find(type, cores);
    if (!r) continue;
    const std::string label = std::string(to_string(type)) + " " + to_string(cores);
    if (std::isfinite(r->theoretical_flops_per_s) && std::isfinite(peaks.theoretical_bytes_per_s)) {
      lines.push_back(roof_line{label, r->theoretical_flops_per_s, peaks.theoretical_bytes_per_s, false});
    }
    if (std::isfinite(r->measured_flops_per_s)) {
      const double bandwidth =
          std::isfinite(peaks.measured_bytes_per_s) ? peaks.measured_bytes_per_s : peaks.theoretical_bytes_per_s;
      if (std::isfinite(bandwidth)) lines.push_back(roof_line{label + " (measured)", r->measured_flops_per_s, bandwidth, true});
    }
  }
  return lines;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// The roofs as a small text table: theoretical, measured, their ratio, and how.
//   std::printf("%s", kscope::describe(kscope::measure_peaks()).c_str());
[[nodiscard]] KSCOPE_DECL std::string describe(const device_peaks& p);

// Writes the roofs as JSON: {"device": {...}, "bandwidth": {...}, "compute": [...],
// "failures": [...]}; unknown or unmeasured numbers are null.
//   std::string out; kscope::detail::json_writer w(out); kscope::write_json(w, peaks);
KSCOPE_DECL void write_json(detail::json_writer& w, const device_peaks& p);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string describe(const device_peaks& p) {
  std::string out = describe(p.device) + "\n";
  char line[256];
  const auto row = [&](const std::string& name, double theoretical, double measured, const char* unit,
                       const std::string& how) {
    const double ratio = measured / theoretical;
    std::string percent = std::isfinite(ratio) ? std::to_string(static_cast<int>(std::lround(100 * ratio))) + " %" : "";
    std::snprintf(line, sizeof line, "  %-14s %-16s %-16s %-6s ", name.c_str(),
                  detail::format_si(theoretical, unit).c_str(),
                  std::isnan(measured) ? "-" : detail::format_si(measured, unit).c_str(), percent.c_str());
    out += line;
    out += how;
    out += '\n';
  };
  std::snprintf(line, sizeof line, "  %-14s %-16s %-16s %-6s %s\n", "roof", "theoretical", "measured", "ratio", "how");
  out += line;
  row("DRAM", p.theoretical_bytes_per_s, p.measured_bytes_per_s, "B/s",
      p.bandwidth_error.empty() ? p.bandwidth_method : "failed: " + p.bandwidth_error);
  for (const compute_roof& r : p.compute) {
    row(std::string(to_string(r.type)) + " " + to_string(r.cores), r.theoretical_flops_per_s, r.measured_flops_per_s,
        r.type == data_type::int8 ? "OP/s" : "FLOP/s", r.error.empty() ? r.method : "failed: " + r.error);
  }
  return out;
}

KSCOPE_DECL void write_json(detail::json_writer& w, const device_peaks& p) {
  w.begin_object();
  w.key("device");
  write_json(w, p.device);
  w.key("bandwidth").begin_object();
  w.member("theoretical_bytes_per_s", p.theoretical_bytes_per_s);
  w.member("measured_bytes_per_s", p.measured_bytes_per_s);
  w.member("method", p.bandwidth_method);
  w.member("error", p.bandwidth_error);
  w.end_object();
  w.key("compute").begin_array();
  for (const compute_roof& r : p.compute) {
    w.begin_object();
    w.member("data_type", to_string(r.type));
    w.member("cores", to_string(r.cores));
    w.member("theoretical_flops_per_s", r.theoretical_flops_per_s);
    w.member("measured_flops_per_s", r.measured_flops_per_s);
    w.member("method", r.method);
    w.member("error", r.error);
    w.end_object();
  }
  w.end_array();
  w.key("failures").begin_array();
  for (const std::string& f : p.failures) w.value(f);
  w.end_array();
  w.end_object();
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// The roofs as a JSON document.
//   std::string json = kscope::to_json(kscope::measure_peaks());
[[nodiscard]] KSCOPE_DECL std::string to_json(const device_peaks& p);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string to_json(const device_peaks& p) {
  std::string out;
  detail::json_writer w(out);
  write_json(w, p);
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace kscope
