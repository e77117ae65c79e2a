// device/availability.hpp on the CPU: the classification of "why no GPU" from known facts
// (no driver, the toolkit's stub, no device, devices hidden by CUDA_VISIBLE_DEVICES, a
// driver too old, another error, success, no CUDA), the driver-branch table, and the live
// probe of this machine agreeing with query_device() and asking CUDA once.
#include <kscope/device/availability.hpp>
#include <kscope/device/device.hpp>

#include <doctest/doctest.h>

#include <string>

namespace availability_test {  // one per file: the unit tests build as one program

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The facts of a machine with a CUDA 13.0 runtime linked in; each case changes a few.
kscope::gpu_probe cuda13() {
  kscope::gpu_probe p;
  p.runtime_version = 13000;
  return p;
}

constexpr int insufficient_driver = 35;  // cudaErrorInsufficientDriver
constexpr int no_device = 100;           // cudaErrorNoDevice

}  // namespace

TEST_CASE("no driver: libcuda.so.1 does not load, whatever the runtime says") {
  kscope::gpu_probe p = cuda13();
  // What CUDA 13 says on a machine with no driver at all (this VM).
  p.runtime_error = insufficient_driver;
  p.runtime_error_name = "cudaErrorInsufficientDriver";
  p.runtime_error_text = "CUDA driver version is insufficient for CUDA runtime version";
  p.driver_load_error = "libcuda.so.1: cannot open shared object file: No such file or directory";
  const kscope::gpu_availability a = kscope::classify_gpu_availability(p);
  CHECK_FALSE(a.available());
  CHECK(a.absence == kscope::gpu_absence::no_driver);
  CHECK(a.reason == "no NVIDIA driver");
  CHECK(a.message == "no NVIDIA driver: libcuda.so.1 not found (not installed, or not mounted into this container)");
  // The runtime's misleading words are not repeated.
  CHECK_FALSE(contains(a.message, "insufficient"));
  CHECK_FALSE(contains(a.message, "cudaErrorInsufficientDriver"));
  CHECK(a.runtime_version == 13000);
  CHECK(a.device_count == 0);

  SUBCASE("a library that exists but fails to load: dlopen's reason, without its file name twice") {
    p.driver_load_error = "libcuda.so.1: wrong ELF class: ELFCLASS32";
    CHECK(kscope::classify_gpu_availability(p).message ==
          "no NVIDIA driver: libcuda.so.1 cannot be loaded (wrong ELF class: ELFCLASS32)");
  }
  SUBCASE("no device error and no driver: still no driver") {
    p.runtime_error = no_device;
    CHECK(kscope::classify_gpu_availability(p).absence == kscope::gpu_absence::no_driver);
  }
}

TEST_CASE("no driver: the toolkit's stub libcuda loads but is not a driver") {
  kscope::gpu_probe p = cuda13();
  p.runtime_error = 34;  // cudaErrorStubLibrary
  p.runtime_error_name = "cudaErrorStubLibrary";
  p.driver_loads = true;  // the stub is found as libcuda.so.1
  const kscope::gpu_availability a = kscope::classify_gpu_availability(p);
  CHECK(a.absence == kscope::gpu_absence::no_driver);
  CHECK(a.reason == "no NVIDIA driver");
  CHECK(contains(a.message, "the libcuda.so.1 found is the CUDA toolkit's stub, not a driver"));
}

TEST_CASE("a driver but no device") {
  kscope::gpu_probe p = cuda13();
  p.driver_loads = true;
  p.driver_version = 13000;
  p.runtime_error = no_device;
  p.runtime_error_name = "cudaErrorNoDevice";
  p.runtime_error_text = "no CUDA-capable device is detected";
  const kscope::gpu_availability a = kscope::classify_gpu_availability(p);
  CHECK(a.absence == kscope::gpu_absence::no_device);
  CHECK(a.reason == "no NVIDIA GPU");
  CHECK(a.message == "no NVIDIA GPU: the NVIDIA driver (CUDA 13.0) is installed but sees no device");

  SUBCASE("zero devices without an error reads the same") {
    p.runtime_error = 0;
    p.device_count = 0;
    CHECK(kscope::classify_gpu_availability(p).message == a.message);
  }
  SUBCASE("CUDA_VISIBLE_DEVICES set: named, with its value") {
    p.visible_devices = "-1";
    const kscope::gpu_availability hidden = kscope::classify_gpu_availability(p);
    CHECK(hidden.absence == kscope::gpu_absence::devices_hidden);
    CHECK(hidden.reason == "no NVIDIA GPU visible (CUDA_VISIBLE_DEVICES)");
    CHECK(hidden.message ==
          "no NVIDIA GPU visible: CUDA_VISIBLE_DEVICES=\"-1\" leaves this process no device; the NVIDIA driver "
          "(CUDA 13.0) is installed");
  }
  SUBCASE("set but empty: still named") {
    p.visible_devices = "";
    CHECK(contains(kscope::classify_gpu_availability(p).message, "CUDA_VISIBLE_DEVICES=\"\""));
  }
  SUBCASE("the driver's version unknown: not invented") {
    p.driver_version = 0;
    CHECK(kscope::classify_gpu_availability(p).message ==
          "no NVIDIA GPU: the NVIDIA driver is installed but sees no device");
  }
}

TEST_CASE("a driver too old for the runtime: both CUDA versions and the branch to install") {
  kscope::gpu_probe p = cuda13();
  p.driver_loads = true;
  p.driver_version = 12020;
  p.runtime_error = insufficient_driver;
  p.runtime_error_name = "cudaErrorInsufficientDriver";
  const kscope::gpu_availability a = kscope::classify_gpu_availability(p);
  CHECK(a.absence == kscope::gpu_absence::driver_too_old);
  CHECK(a.reason == "NVIDIA driver too old for CUDA 13.0");
  CHECK(a.message ==
        "NVIDIA driver too old: it supports CUDA 12.2, this program was built with CUDA 13.0: update the driver "
        "to R580 or newer");
  CHECK(a.driver_version == 12020);

  SUBCASE("a CUDA 12.4 program on a CUDA 11.8 driver") {
    p.runtime_version = 12040;
    p.driver_version = 11080;
    CHECK(kscope::classify_gpu_availability(p).message ==
          "NVIDIA driver too old: it supports CUDA 11.8, this program was built with CUDA 12.4: update the driver "
          "to R525 or newer");
  }
  SUBCASE("same major version and still refused: the runtime's CUDA version, not a branch") {
    p.runtime_version = 13020;
    p.driver_version = 13000;
    CHECK(kscope::classify_gpu_availability(p).message ==
          "NVIDIA driver too old: it supports CUDA 13.0, this program was built with CUDA 13.2: update the driver "
          "to one that supports CUDA 13.2");
  }
  SUBCASE("the driver's version unreadable") {
    p.driver_version = 0;
    CHECK(kscope::classify_gpu_availability(p).message ==
          "NVIDIA driver too old for this program's CUDA 13.0: update the driver to R580 or newer");
  }
  SUBCASE("a runtime newer than the branch table") {
    p.runtime_version = 14000;
    CHECK(kscope::classify_gpu_availability(p).message ==
          "NVIDIA driver too old: it supports CUDA 12.2, this program was built with CUDA 14.0: update the driver "
          "to one that supports CUDA 14.0");
  }
}

TEST_CASE("any other error is passed through by name") {
  kscope::gpu_probe p = cuda13();
  p.driver_loads = true;
  p.driver_version = 13000;
  p.runtime_error = 803;
  p.runtime_error_name = "cudaErrorSystemDriverMismatch";
  p.runtime_error_text = "system has unsupported display driver / cuda driver combination";
  const kscope::gpu_availability a = kscope::classify_gpu_availability(p);
  CHECK(a.absence == kscope::gpu_absence::cuda_error);
  CHECK(a.reason == "no usable NVIDIA GPU (cudaErrorSystemDriverMismatch)");
  CHECK(a.message ==
        "no usable NVIDIA GPU: cudaGetDeviceCount failed: cudaErrorSystemDriverMismatch (system has unsupported "
        "display driver / cuda driver combination)");
  SUBCASE("without a name: the number") {
    p.runtime_error_name.clear();
    p.runtime_error_text.clear();
    CHECK(kscope::classify_gpu_availability(p).message == "no usable NVIDIA GPU: cudaGetDeviceCount failed: CUDA error 803");
  }
}

TEST_CASE("success: a usable GPU has no message") {
  kscope::gpu_probe p = cuda13();
  p.driver_loads = true;
  p.driver_version = 13000;
  p.device_count = 8;
  const kscope::gpu_availability a = kscope::classify_gpu_availability(p);
  CHECK(a.available());
  CHECK(a.absence == kscope::gpu_absence::none);
  CHECK(a.message.empty());
  CHECK(a.reason.empty());
  CHECK(a.device_count == 8);
  // The runtime is what counts: devices it can use mean a GPU, however dlopen fared.
  p.driver_loads = false;
  CHECK(kscope::classify_gpu_availability(p).available());
  // Hidden devices do not matter while some are visible.
  p.visible_devices = "0,1";
  CHECK(kscope::classify_gpu_availability(p).available());
}

TEST_CASE("built without CUDA") {
  kscope::gpu_probe p;
  p.cuda_compiled = false;
  const kscope::gpu_availability a = kscope::classify_gpu_availability(p);
  CHECK(a.absence == kscope::gpu_absence::built_without_cuda);
  CHECK(a.message == "no GPU support: kscope was built without CUDA (KSCOPE_HAS_CUDA=0)");
}

TEST_CASE("minimum driver branch per CUDA major version") {
  CHECK(kscope::minimum_driver_branch(13000) == "R580");
  CHECK(kscope::minimum_driver_branch(13020) == "R580");
  CHECK(kscope::minimum_driver_branch(12090) == "R525");
  CHECK(kscope::minimum_driver_branch(11080) == "R450");
  CHECK(kscope::minimum_driver_branch(10020).empty());
  CHECK(kscope::minimum_driver_branch(0).empty());
  CHECK(std::string(kscope::to_string(kscope::gpu_absence::driver_too_old)) == "driver too old");
}

TEST_CASE("the live probe: one answer per process, the one query_device gives") {
  const kscope::gpu_availability* before = kscope::probed_gpu();
  CHECK((before == nullptr || before == &kscope::probe_gpu()));
  const kscope::gpu_availability& gpu = kscope::probe_gpu();
  MESSAGE("this machine: " << (gpu.available() ? std::string("a usable GPU") : gpu.message));
  // Cached: the same object every time, and probed_gpu() sees it without asking CUDA.
  CHECK(&kscope::probe_gpu() == &gpu);
  CHECK(kscope::probed_gpu() == &gpu);
  const kscope::device_info d = kscope::query_device(0);
  CHECK(d.present == gpu.available());
  CHECK(d.runtime_version == gpu.runtime_version);
  CHECK(d.driver_version == gpu.driver_version);
  if (!gpu.available()) {
    CHECK(d.problem == gpu.message);
    CHECK_FALSE(gpu.reason.empty());
    // The runtime's "insufficient driver" stands only where a driver really is too old.
    if (gpu.absence != kscope::gpu_absence::driver_too_old && gpu.absence != kscope::gpu_absence::cuda_error)
      CHECK_FALSE(contains(gpu.message, "insufficient"));
  }
#if KSCOPE_HAS_CUDA
  CHECK(gpu.runtime_version > 0);
  // Nothing left behind for the host program to trip on. (Without a driver the runtime
  // answers every call, cudaGetLastError too, with its initialization error: nothing to
  // clear there.)
  if (gpu.available()) CHECK(cudaGetLastError() == cudaSuccess);
#else
  CHECK(gpu.absence == kscope::gpu_absence::built_without_cuda);
#endif
}

}  // namespace availability_test
