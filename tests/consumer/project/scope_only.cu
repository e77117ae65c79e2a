// scope_only.cpp's program as a CUDA file: nvcc compiles the headers it uses, header-only,
// beside device code (the packaging cases with the CUDA language that check a way of finding
// kscope; main.cu is the compiled mode's).
#include "scope_only.cpp"

__global__ void consumer_kernel(float* x) { x[threadIdx.x] *= 2.0f; }
