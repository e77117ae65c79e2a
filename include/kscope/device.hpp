// kscope/device.hpp — moved to <kscope/device/device.hpp>; this forward stays for one release.
#pragma once
#include "device/device.hpp"
