// KSCOPE_DISABLE turns scopes into empty objects: nothing reaches the session.
#define KSCOPE_DISABLE 1
#include <kscope/scope/scope.hpp>
#include <kscope/session/session.hpp>  // after scope.hpp: the disabled stream_t must agree with CUDA's

#include <doctest/doctest.h>

#include <type_traits>

#if KSCOPE_HAS_CUDA
#  include <cuda_runtime_api.h>
// The disabled header names the stream type without CUDA's header; it must be the same type.
static_assert(std::is_same<kscope::stream_t, cudaStream_t>::value, "stream_t is cudaStream_t");
#endif

TEST_CASE("with KSCOPE_DISABLE scopes are empty and record nothing") {
  kscope::session::global().reset();
  {
    KSCOPE_SCOPE("disabled_phase");
    KSCOPE_FUNCTION();
    kscope::scope s{"disabled_named"};
    kscope::scope on_stream{"disabled_stream", kscope::stream_t{}};
    s.set_work({1, 1});
    s.tag("k", "v");
    CHECK_FALSE(s.active());
    auto r = kscope::start_range("disabled_range");
    kscope::end_range(std::move(r));
  }
  static_assert(std::is_empty<kscope::scope>::value, "a disabled scope holds no state");
  CHECK(kscope::session::global().report().scopes.empty());
  // This translation unit never records, so its view of the switch is "off".
  CHECK_FALSE(kscope::is_enabled());
}
