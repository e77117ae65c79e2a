// kscope/scope.hpp — entry header: scopes, ranges and KSCOPE_SCOPE, the light include for
// instrumented code (<kscope/scope/scope.hpp>). Its path is stable.
#pragma once
#include "scope/scope.hpp"
