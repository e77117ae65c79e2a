// Why warp stalls sampled once per process, and what makes every pass sample (GPU needed;
// links libcupti). Issue 39: seven kernels, each launched once as a warm-up, then sampled
// in turn; the first pass named its kernel, every later one found 0 samples in a kernel
// CUPTI gives PCs for, with lazy or eager module loading.
//
// Each scenario runs in its own process (CUPTI's PC-sampling state is per context and
// process-wide):
//   cycle    what kscope did: per pass cuptiPCSamplingEnable, configure, the work,
//            GetData until dry, cuptiPCSamplingDisable.
//   kept     enable once with start/stop control; per pass configure, cuptiPCSamplingStart,
//            the work, cuptiPCSamplingStop, GetData until dry; disable at the end.
//   kept_new like kept, and a kernel launched for the first time between two passes is
//            sampled in the next one.
//   cycle_new like cycle, with that kernel first launched between two passes.
//   cost     launch cost of a loop of tiny kernels: no PC sampling, enabled but stopped
//            (kernel-serialized and continuous), and after a disable.
// Per pass it prints the kernel, the PC records that name a function, the samples in them,
// CUPTI's total and its non-user count.
//
//   nvcc -O2 -arch=sm_90 bench/pc_sampling_passes_probe.cu -lcupti -lcuda -o pc_passes
//   ./pc_passes            # every scenario, each in a child process
#include <cupti.h>
#include <cupti_pcsampling.h>
#include <cuda.h>
#include <cuda_runtime.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace {

#define CHECK_CUDA(call)                                                                                \
  do {                                                                                                  \
    cudaError_t e_ = (call);                                                                            \
    if (e_ != cudaSuccess) {                                                                            \
      std::fprintf(stderr, "%s:%d %s failed: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      std::exit(2);                                                                                     \
    }                                                                                                   \
  } while (0)

const char* cupti_error(CUptiResult r) {
  const char* s = nullptr;
  cuptiGetResultString(r, &s);
  return s ? s : "?";
}

#define CHECK_CUPTI(call)                                                                     \
  do {                                                                                        \
    CUptiResult r_ = (call);                                                                  \
    if (r_ != CUPTI_SUCCESS) {                                                                \
      std::printf("  %s failed: %s\n", #call, cupti_error(r_));                               \
      return false;                                                                           \
    }                                                                                         \
  } while (0)

__global__ void copy_kernel(const float* a, float* b, size_t n) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) b[i] = a[i];
}
__global__ void fma_chain(float* out, int iters) {
  float x = threadIdx.x;
  for (int i = 0; i < iters; ++i) x = fmaf(x, 0.999f, 0.5f);
  out[blockIdx.x * blockDim.x + threadIdx.x] = x;
}
__global__ void barrier_kernel(float* out, int rounds) {
  float x = threadIdx.x;
  for (int r = 0; r < rounds; ++r) {
    if (threadIdx.x < 32)
      for (int i = 0; i < 256; ++i) x = fmaf(x, 0.999f, 0.25f);
    __syncthreads();
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = x;
}
__global__ void chase_kernel(const int* next, int n, int steps, int* out) {
  int i = (blockIdx.x * blockDim.x + threadIdx.x) % n;
  for (int s = 0; s < steps; ++s) i = next[i];
  out[blockIdx.x * blockDim.x + threadIdx.x] = i;
}
__global__ void late_kernel(float* out, int iters) {  // first launched between two passes
  float x = threadIdx.x * 0.5f;
  for (int i = 0; i < iters; ++i) x = sqrtf(x + 1.0f);
  out[blockIdx.x * blockDim.x + threadIdx.x] = x;
}
__global__ void tiny_kernel(float* p) {
  if (threadIdx.x == 0) p[blockIdx.x] += 1.0f;
}

struct buffers {
  float *a = nullptr, *b = nullptr, *out = nullptr;
  int *next = nullptr, *iout = nullptr;
  size_t n = size_t{64} << 20;
  int nodes = 1 << 22;
};

void launch(int which, const buffers& m) {
  switch (which) {
    case 0: copy_kernel<<<1056, 256>>>(m.a, m.b, m.n); break;
    case 1: fma_chain<<<1056, 256>>>(m.out, 100000); break;
    case 2: barrier_kernel<<<1056, 256>>>(m.out, 400); break;
    case 3: chase_kernel<<<264, 256>>>(m.next, m.nodes, 2000, m.iout); break;
    case 4: late_kernel<<<1056, 256>>>(m.out, 20000); break;
  }
}
const char* names[] = {"copy_kernel", "fma_chain", "barrier_kernel", "chase_kernel", "late_kernel"};

struct pc_buffer {
  std::vector<CUpti_PCSamplingPCData> pcs;
  std::vector<CUpti_PCSamplingStallReason> reasons;
  CUpti_PCSamplingData data{};
  size_t stride;
  pc_buffer(size_t max_pcs, size_t num_reasons) : pcs(max_pcs), reasons(max_pcs * num_reasons), stride(num_reasons) {
    data.size = sizeof(CUpti_PCSamplingData);
    data.collectNumPcs = max_pcs;
    data.pPcData = pcs.data();
    reset();
  }
  void reset() {
    data.totalNumPcs = data.remainingNumPcs = data.totalSamples = data.droppedSamples = 0;
    data.nonUsrKernelsTotalSamples = 0;
    for (size_t i = 0; i < pcs.size(); ++i) {
      pcs[i].size = sizeof(CUpti_PCSamplingPCData);
      pcs[i].stallReason = &reasons[i * stride];
      pcs[i].stallReasonCount = 0;
      pcs[i].functionName = nullptr;
    }
  }
};

struct pass_totals {
  std::map<std::string, unsigned long long> samples_by_function;
  unsigned long long total = 0, non_user = 0;
  void read(const CUpti_PCSamplingData& d) {
    total += d.totalSamples;
    non_user += d.nonUsrKernelsTotalSamples;
    for (size_t i = 0; i < d.totalNumPcs && i < d.collectNumPcs; ++i) {
      const CUpti_PCSamplingPCData& pc = d.pPcData[i];
      unsigned long long s = 0;
      for (size_t j = 0; j < pc.stallReasonCount; ++j) s += pc.stallReason[j].samples;
      samples_by_function[pc.functionName ? pc.functionName : "(null)"] += s;
    }
  }
  void print(const char* label) const {
    std::printf("  %-28s CUPTI total %llu, non-user %llu;", label, total, non_user);
    if (samples_by_function.empty()) std::printf(" no PC records");
    for (const auto& [f, s] : samples_by_function) std::printf(" %s: %llu", f.c_str(), s);
    std::printf("\n");
  }
};

struct sampler {
  CUcontext ctx = nullptr;
  size_t reason_count = 0;
  std::vector<uint32_t> indexes;
  std::vector<std::vector<char>> storage;
  std::unique_ptr<pc_buffer> end_buffer, read_buffer;

  bool enable(bool start_stop, CUpti_PCSamplingCollectionMode mode) {
    CUpti_PCSamplingEnableParams e{};
    e.size = CUpti_PCSamplingEnableParamsSize;
    e.ctx = ctx;
    CHECK_CUPTI(cuptiPCSamplingEnable(&e));
    return configure(start_stop, mode);
  }
  bool configure(bool start_stop, CUpti_PCSamplingCollectionMode mode) {
    CUpti_PCSamplingGetNumStallReasonsParams c{};
    c.size = CUpti_PCSamplingGetNumStallReasonsParamsSize;
    c.ctx = ctx;
    c.numStallReasons = &reason_count;
    CHECK_CUPTI(cuptiPCSamplingGetNumStallReasons(&c));
    indexes.assign(reason_count, 0);
    storage.assign(reason_count, std::vector<char>(CUPTI_STALL_REASON_STRING_SIZE));
    std::vector<char*> names(reason_count);
    for (size_t i = 0; i < reason_count; ++i) names[i] = storage[i].data();
    CUpti_PCSamplingGetStallReasonsParams g{};
    g.size = CUpti_PCSamplingGetStallReasonsParamsSize;
    g.ctx = ctx;
    g.numStallReasons = reason_count;
    g.stallReasonIndex = indexes.data();
    g.stallReasons = names.data();
    CHECK_CUPTI(cuptiPCSamplingGetStallReasons(&g));
    if (!end_buffer) end_buffer = std::make_unique<pc_buffer>(20000, reason_count);
    if (!read_buffer) read_buffer = std::make_unique<pc_buffer>(20000, reason_count);
    CUpti_PCSamplingConfigurationInfo info[6] = {};
    info[0].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD;
    info[0].attributeData.samplingPeriodData.samplingPeriod = 12;
    info[1].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_STALL_REASON;
    info[1].attributeData.stallReasonData.stallReasonCount = reason_count;
    info[1].attributeData.stallReasonData.pStallReasonIndex = indexes.data();
    info[2].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_COLLECTION_MODE;
    info[2].attributeData.collectionModeData.collectionMode = mode;
    info[3].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_OUTPUT_DATA_FORMAT;
    info[3].attributeData.outputDataFormatData.outputDataFormat = CUPTI_PC_SAMPLING_OUTPUT_DATA_FORMAT_PARSED;
    info[4].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_DATA_BUFFER;
    info[4].attributeData.samplingDataBufferData.samplingDataBuffer = &end_buffer->data;
    info[5].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_ENABLE_START_STOP_CONTROL;
    info[5].attributeData.enableStartStopControlData.enableStartStopControl = start_stop ? 1 : 0;
    CUpti_PCSamplingConfigurationInfoParams p{};
    p.size = CUpti_PCSamplingConfigurationInfoParamsSize;
    p.ctx = ctx;
    p.numAttributes = 6;
    p.pPCSamplingConfigurationInfo = info;
    CHECK_CUPTI(cuptiPCSamplingSetConfigurationAttribute(&p));
    return true;
  }
  bool start() {
    CUpti_PCSamplingStartParams s{};
    s.size = CUpti_PCSamplingStartParamsSize;
    s.ctx = ctx;
    CHECK_CUPTI(cuptiPCSamplingStart(&s));
    return true;
  }
  bool stop() {
    CUpti_PCSamplingStopParams s{};
    s.size = CUpti_PCSamplingStopParamsSize;
    s.ctx = ctx;
    CHECK_CUPTI(cuptiPCSamplingStop(&s));
    return true;
  }
  bool drain(pass_totals& t) {
    if (end_buffer->data.totalNumPcs > 0) {
      t.read(end_buffer->data);
      end_buffer->reset();
    }
    for (int i = 0; i < 1000; ++i) {
      read_buffer->reset();
      CUpti_PCSamplingGetDataParams g{};
      g.size = CUpti_PCSamplingGetDataParamsSize;
      g.ctx = ctx;
      g.pcSamplingData = &read_buffer->data;
      CHECK_CUPTI(cuptiPCSamplingGetData(&g));
      t.read(read_buffer->data);
      if (read_buffer->data.totalNumPcs == 0 && read_buffer->data.remainingNumPcs == 0) break;
    }
    return true;
  }
  bool disable(pass_totals* t) {
    CUpti_PCSamplingDisableParams d{};
    d.size = CUpti_PCSamplingDisableParamsSize;
    d.ctx = ctx;
    CHECK_CUPTI(cuptiPCSamplingDisable(&d));
    if (t != nullptr && end_buffer->data.totalNumPcs > 0) t->read(end_buffer->data);
    if (end_buffer) end_buffer->reset();
    return true;
  }
};

void setup(buffers& m) {
  CHECK_CUDA(cudaMalloc(&m.a, m.n * 4));
  CHECK_CUDA(cudaMalloc(&m.b, m.n * 4));
  CHECK_CUDA(cudaMalloc(&m.out, 1056 * 256 * 4));
  CHECK_CUDA(cudaMalloc(&m.iout, 1056 * 256 * 4));
  CHECK_CUDA(cudaMalloc(&m.next, m.nodes * 4));
  std::vector<int> next(m.nodes);
  for (int i = 0; i < m.nodes; ++i) next[i] = static_cast<int>((static_cast<long long>(i) * 7919 + 13) % m.nodes);
  CHECK_CUDA(cudaMemcpy(m.next, next.data(), m.nodes * 4, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemset(m.a, 0, m.n * 4));
}

double time_tiny_launches(float* p, int count) {
  CHECK_CUDA(cudaDeviceSynchronize());
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < count; ++i) tiny_kernel<<<1, 32>>>(p);
  CHECK_CUDA(cudaDeviceSynchronize());
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / count;
}

int run(const std::string& scenario) {
  buffers m;
  setup(m);
  sampler s;
  CHECK_CUDA(cudaFree(nullptr));
  if (cuCtxGetCurrent(&s.ctx) != CUDA_SUCCESS || s.ctx == nullptr) return 3;
  std::printf("scenario %s (CUDA_MODULE_LOADING=%s)\n", scenario.c_str(),
              std::getenv("CUDA_MODULE_LOADING") ? std::getenv("CUDA_MODULE_LOADING") : "(default)");
  if (scenario == "cost") {
    for (int i = 0; i < 3; ++i) time_tiny_launches(m.out, 2000);
    std::printf("  launch+run of a tiny kernel, no PC sampling:          %.2f us\n", time_tiny_launches(m.out, 20000));
    if (!s.enable(true, CUPTI_PC_SAMPLING_COLLECTION_MODE_KERNEL_SERIALIZED)) return 1;
    std::printf("  enabled, start/stop control, stopped (serialized):     %.2f us\n", time_tiny_launches(m.out, 20000));
    if (!s.configure(true, CUPTI_PC_SAMPLING_COLLECTION_MODE_CONTINUOUS)) return 1;
    std::printf("  enabled, start/stop control, stopped (continuous):     %.2f us\n", time_tiny_launches(m.out, 20000));
    if (!s.start()) return 1;
    std::printf("  started (continuous):                                  %.2f us\n", time_tiny_launches(m.out, 2000));
    if (!s.stop()) return 1;
    pass_totals t;
    s.drain(t);
    if (!s.disable(nullptr)) return 1;
    std::printf("  after disable:                                         %.2f us\n", time_tiny_launches(m.out, 20000));
    return 0;
  }
  // Every kernel once before any pass (the late one too, unless kept_new).
  const int kernels = 4;
  for (int k = 0; k < kernels; ++k) launch(k, m);
  const bool late = scenario == "kept_new" || scenario == "cycle_new";
  if (!late) launch(4, m);
  CHECK_CUDA(cudaDeviceSynchronize());
  const bool kept = scenario == "kept" || scenario == "kept_new";
  if (kept && !s.enable(true, CUPTI_PC_SAMPLING_COLLECTION_MODE_KERNEL_SERIALIZED)) return 1;
  for (int round = 0; round < 2; ++round) {
    for (int k = 0; k < 5; ++k) {
      if (late && k == 4 && round == 0) {
        launch(4, m);  // first launch between passes
        CHECK_CUDA(cudaDeviceSynchronize());
        continue;
      }
      pass_totals t;
      const auto t0 = std::chrono::steady_clock::now();
      if (!kept && !s.enable(false, CUPTI_PC_SAMPLING_COLLECTION_MODE_KERNEL_SERIALIZED)) return 1;
      if (kept) {
        if (!s.configure(true, CUPTI_PC_SAMPLING_COLLECTION_MODE_KERNEL_SERIALIZED)) return 1;
        if (!s.start()) return 1;
      }
      launch(k, m);
      CHECK_CUDA(cudaDeviceSynchronize());
      if (kept && !s.stop()) return 1;
      if (!s.drain(t)) return 1;
      if (!kept && !s.disable(&t)) return 1;
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      char label[64];
      std::snprintf(label, sizeof label, "round %d %s (%.0f ms)", round, names[k], ms);
      t.print(label);
    }
  }
  if (kept) {
    pass_totals t;
    s.disable(&t);
    // After a disable, enabled again: are the kernels loaded earlier still named?
    if (!s.enable(true, CUPTI_PC_SAMPLING_COLLECTION_MODE_KERNEL_SERIALIZED)) return 1;
    pass_totals again;
    if (!s.start()) return 1;
    launch(0, m);
    CHECK_CUDA(cudaDeviceSynchronize());
    if (!s.stop()) return 1;
    s.drain(again);
    again.print("re-enabled: copy_kernel");
    s.disable(nullptr);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) return run(argv[1]);
  int failures = 0;
  for (const char* loading : {"LAZY", "EAGER"}) {
    for (const char* scenario : {"cycle", "cycle_new", "kept", "kept_new", "cost"}) {
      if (std::string(scenario) == "cost" && std::string(loading) == "EAGER") continue;
      std::fflush(stdout);
      const pid_t pid = fork();
      if (pid == 0) {
        setenv("CUDA_MODULE_LOADING", loading, 1);
        execl("/proc/self/exe", argv[0], scenario, static_cast<char*>(nullptr));
        _exit(127);
      }
      int status = 0;
      waitpid(pid, &status, 0);
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        std::printf("  (scenario %s exited with %d)\n", scenario, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        ++failures;
      }
    }
  }
  return failures == 0 ? 0 : 1;
}
