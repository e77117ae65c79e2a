// kscope/session.hpp — moved to <kscope/session/session.hpp>; this forward stays for one release.
#pragma once
#include "session/session.hpp"
