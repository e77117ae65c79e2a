// kscope/scope.hpp — moved to <kscope/scope/scope.hpp>; this forward stays for one release.
#pragma once
#include "scope/scope.hpp"
