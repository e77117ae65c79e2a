// kscope/scope/nvtx.hpp — how scopes look in Nsight Systems: the NVTX domain their ranges
// go to, and a scope's category and colour.
//
//   int main() {
//     kscope::set_nvtx_domain("myengine");   // before the first scope (or KSCOPE_NVTX_DOMAIN)
//     serve();
//   }
//
//   constexpr kscope::nvtx_category attention{1, "attention"};
//   void prefill(cudaStream_t stream) {
//     KSCOPE_SCOPE_STYLED("prefill", attention, kscope::nvtx_color::rgb(0x76B900));
//     kscope::scope s{"kv_copy", stream, {attention, kscope::nvtx_color::rgb(0x0071C5)}};
//     s.set_work({flops, bytes});   // sent to the tool as a payload when the scope closes
//     s.tag("batch", "8");          // likewise
//   }
//
// The domain. Every range kscope opens is in one NVTX domain, "kscope" unless the program
// or the environment names another, so that Nsight Systems can show (or filter) a program's
// own phases apart from other libraries'. Who decides, first to last:
//   1. kscope::set_nvtx_domain(name), called before the first range;
//   2. KSCOPE_NVTX_DOMAIN=name in the environment (empty or blank: as if unset);
//   3. "kscope".
// The program's call wins over the environment, as kscope::set_enabled wins over KSCOPE=0:
// a program that names its domain may rely on the name (an nsys filter, a dashboard), and
// the line that says the environment's name was not used shows the conflict. The choice is
// final once the first range is pushed (the domain is created then, and every call site's
// registered name belongs to it): a later set_nvtx_domain with another name returns false,
// ranges stay where they were, and one warning line says so. A name is used trimmed of
// surrounding blanks; an empty one, one of more than 128 bytes, or one holding a control
// character is refused with one warning line and the previous choice stays. Warning lines
// go to stderr once each and into the session report's warnings.
//
// Categories and colours. A category is a number the tool groups and filters ranges by;
// kscope names it (nvtxDomainNameCategoryA) the first time a range carries it, with the
// name given then. Ids go from 1 to max_nvtx_category_id (0: no category); a larger id
// leaves the range without a category, with one warning line. A colour is ARGB; 0 means
// none (the tool picks), nvtx_color::rgb makes an opaque one.
//
// Declared work and tags (scope::set_work, scope::tag) are usually known only after the
// range was pushed, so they travel at the close: kscope marks the range's end with an NVTX
// mark of the same name, category and colour carrying them as an NVTX extended payload
// (flops, bytes, tags), or, when the tool does not take payloads, in the mark's message
// ("prefill flops=2e+09 bytes=1e+06 batch=8"). With no tool attached nothing of this runs.
// scope/detail/nvtx.hpp says why a mark and not a payload on the pop.
#pragma once

#include "../core/config.hpp"

#include <cstdint>
#include <string>
#include <string_view>

namespace kscope {

// The largest category id kscope names (each id's "named" flag is one bit of a fixed set).
inline constexpr std::uint32_t max_nvtx_category_id = 4095;

// A category: an id, and the name the tool shows for it (read when the id is first seen;
// null leaves it unnamed). The name of an id is the one given first.
struct nvtx_category {
  std::uint32_t id = 0;  // 0: none
  const char* name = nullptr;
};

// A range's colour, ARGB. 0: none.
struct nvtx_color {
  std::uint32_t value = 0;

  // 0xRRGGBB, opaque.
  [[nodiscard]] static constexpr nvtx_color rgb(std::uint32_t rrggbb) noexcept {
    return nvtx_color{0xFF000000u | (rrggbb & 0x00FFFFFFu)};
  }
  // 0xAARRGGBB as given.
  [[nodiscard]] static constexpr nvtx_color argb(std::uint32_t aarrggbb) noexcept { return nvtx_color{aarrggbb}; }
};

// What a scope's or range's NVTX range carries besides its name.
struct nvtx_style {
  nvtx_category category{};
  nvtx_color color{};

  constexpr nvtx_style() noexcept = default;
  constexpr nvtx_style(nvtx_category c, nvtx_color k = {}) noexcept : category(c), color(k) {}  // NOLINT: implicit on purpose
  constexpr nvtx_style(nvtx_color k, nvtx_category c = {}) noexcept : category(c), color(k) {}  // NOLINT
};

#if !defined(KSCOPE_DISABLE)

// Names the NVTX domain of every range (see the file comment). True when `name` is the
// domain's name from now on; false, with one warning line, when it is not usable or comes
// after the first range under another name.
KSCOPE_DECL bool set_nvtx_domain(std::string_view name) noexcept;

// The domain's name: the one in use once a range was pushed, else the one that would be
// used now. Never creates the domain.
[[nodiscard]] KSCOPE_DECL std::string nvtx_domain_name();

#else  // KSCOPE_DISABLE: this file's scopes push no range. Per translation unit (an unnamed
       // namespace), so that it never stands in for the real one of another file.
namespace {
inline bool set_nvtx_domain(std::string_view) noexcept { return false; }
[[nodiscard]] inline std::string nvtx_domain_name() { return {}; }
}  // namespace
#endif

}  // namespace kscope
