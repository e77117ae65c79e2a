// KSCOPE_DISABLE turns scopes into empty objects: nothing reaches the session.
#define KSCOPE_DISABLE 1
#include <kscope/scope/scope.hpp>

#include <doctest/doctest.h>

#include <type_traits>

TEST_CASE("with KSCOPE_DISABLE scopes are empty and record nothing") {
  kscope::session::global().reset();
  {
    KSCOPE_SCOPE("disabled_phase");
    KSCOPE_FUNCTION();
    kscope::scope s{"disabled_named"};
    s.set_work({1, 1});
    s.tag("k", "v");
    CHECK_FALSE(s.active());
    auto r = kscope::start_range("disabled_range");
    kscope::end_range(std::move(r));
  }
  static_assert(std::is_empty<kscope::scope>::value, "a disabled scope holds no state");
  CHECK(kscope::session::global().report().scopes.empty());
}
