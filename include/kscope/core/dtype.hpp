// kscope/core/dtype.hpp — the data types kscope knows compute rates for, and the one
// reader of the names people write for them.
//
// A dtype reaches kscope as text: a scope's "dtype" tag, bench::dtype("half"). Every
// reader goes through parse_data_type(), so "half", "float16", "__half" and "FP16" mean
// fp16 for a scope and for a benchmark alike. Which roof a type is placed under is
// decided once, in device/roof_choice.hpp.
//
//   kscope::data_type t{};
//   if (kscope::parse_data_type("__nv_bfloat16", t)) std::puts(kscope::to_string(t));  // "bf16"
#pragma once

#include "config.hpp"
#include <cstddef>
#include <string_view>

namespace kscope {

// Data types with a compute roof (the columns of device/detail/peak_table.hpp).
//   double bf16 = kscope::theoretical_flops_per_s(9, 0, 132, 1'980'000,
//                                                 kscope::data_type::bf16, kscope::core_kind::tensor);
enum class data_type { fp64, fp32, tf32, fp16, bf16, fp8, int8 };

// Which units a compute roof is for: plain CUDA cores or tensor cores.
//   peaks.find(kscope::data_type::fp32, kscope::core_kind::plain);
enum class core_kind { plain, tensor };

// Every data_type, in table order, for loops over roofs.
//   for (kscope::data_type t : kscope::all_data_types) std::puts(kscope::to_string(t));
inline constexpr data_type all_data_types[] = {data_type::fp64, data_type::fp32, data_type::tf32, data_type::fp16,
                                               data_type::bf16, data_type::fp8,  data_type::int8};

// The canonical name: "fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "int8".
//   std::string label = kscope::to_string(kscope::data_type::bf16);
[[nodiscard]] KSCOPE_DECL const char* to_string(data_type t) noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL const char* to_string(data_type t) noexcept {
  switch (t) {
    case data_type::fp64: return "fp64";
    case data_type::fp32: return "fp32";
    case data_type::tf32: return "tf32";
    case data_type::fp16: return "fp16";
    case data_type::bf16: return "bf16";
    case data_type::fp8: return "fp8";
    case data_type::int8: return "int8";
  }
  return "unknown";
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// "plain" or "tensor".
[[nodiscard]] KSCOPE_DECL const char* to_string(core_kind k) noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL const char* to_string(core_kind k) noexcept {
  return k == core_kind::tensor ? "tensor" : "plain";
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

namespace detail {

struct data_type_name {
  std::string_view name;  // lower case
  data_type type;
};

// The canonical names first, then the spellings of C++/CUDA (float, __half,
// __nv_bfloat16, int8_t), NumPy and PyTorch (float16, bfloat16, float8_e4m3fn) and the
// short forms of kernel libraries (f16, bf16, e4m3, s8). Both fp8 encodings (e4m3, e5m2)
// run at one rate, and so do signed and unsigned 8-bit integers, so each family maps to
// one roof.
inline constexpr data_type_name data_type_names[] = {
    {"fp64", data_type::fp64}, {"f64", data_type::fp64}, {"double", data_type::fp64}, {"float64", data_type::fp64},
    {"fp32", data_type::fp32}, {"f32", data_type::fp32}, {"float", data_type::fp32}, {"float32", data_type::fp32},
    {"single", data_type::fp32},
    {"tf32", data_type::tf32}, {"tensorfloat32", data_type::tf32},
    {"fp16", data_type::fp16}, {"f16", data_type::fp16}, {"half", data_type::fp16}, {"float16", data_type::fp16},
    {"__half", data_type::fp16},
    {"bf16", data_type::bf16}, {"bfloat16", data_type::bf16}, {"__nv_bfloat16", data_type::bf16},
    {"fp8", data_type::fp8}, {"f8", data_type::fp8}, {"float8", data_type::fp8}, {"e4m3", data_type::fp8},
    {"e5m2", data_type::fp8}, {"fp8_e4m3", data_type::fp8}, {"fp8_e5m2", data_type::fp8},
    {"float8_e4m3fn", data_type::fp8}, {"float8_e5m2", data_type::fp8}, {"__nv_fp8_e4m3", data_type::fp8},
    {"__nv_fp8_e5m2", data_type::fp8},
    {"int8", data_type::int8}, {"i8", data_type::int8}, {"s8", data_type::int8}, {"int8_t", data_type::int8},
    {"char", data_type::int8}, {"signed char", data_type::int8}, {"uint8", data_type::int8}, {"u8", data_type::int8},
    {"uint8_t", data_type::int8}, {"unsigned char", data_type::int8},
};

constexpr bool is_blank(char c) noexcept { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
constexpr char ascii_lower(char c) noexcept { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

}  // namespace detail

// Reads a dtype name: the canonical ones (to_string) and the aliases above, ignoring
// ASCII case and surrounding blanks. Returns false, leaving `out` as it was, for anything
// else: an empty string, "complex128", "int4". What an unrecognised dtype is placed under
// is device/roof_choice.hpp's rule.
//   kscope::data_type t = kscope::data_type::fp32;
//   bool known = kscope::parse_data_type("half", t);   // true, t == data_type::fp16
[[nodiscard]] KSCOPE_DECL bool parse_data_type(std::string_view text, data_type& out) noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL bool parse_data_type(std::string_view text, data_type& out) noexcept {
  while (!text.empty() && detail::is_blank(text.front())) text.remove_prefix(1);
  while (!text.empty() && detail::is_blank(text.back())) text.remove_suffix(1);
  for (const detail::data_type_name& entry : detail::data_type_names) {
    if (entry.name.size() != text.size()) continue;
    bool same = true;
    for (std::size_t i = 0; i < text.size() && same; ++i) same = detail::ascii_lower(text[i]) == entry.name[i];
    if (same) {
      out = entry.type;
      return true;
    }
  }
  return false;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace kscope
