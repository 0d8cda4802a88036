// A real CUDA kernel and ggml-cuda's three ways into NVIDIA's libraries: the runtime
// (cudaGetDeviceCount, a kernel launch), cuBLAS (a handle) and the driver API (cuDeviceGet,
// cuMemCreate, as ggml's virtual-memory pool calls them), so that the library needs libcudart,
// libcublas and libcuda.so.1 at run time and its fat binary holds the kernel for the plan's
// architectures.
#include <cstdio>
#include <cuda.h>
#include <cuda_runtime.h>
#include <cublas_v2.h>

#include "ggml.h"

__global__ void ggml_cuda_scale(float * x, float s, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        x[i] = x[i] * s + 1.0f;
    }
}

// ggml_cuda_info runs the kernel on the first device and says what happened: the CUDA error
// (209, no kernel image, on a GPU the fat binary does not cover) or the result.
extern "C" const char * ggml_cuda_info(void) {
    static char buf[256];
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess || n == 0) {
        snprintf(buf, sizeof buf, "cuda: no device (CUDA error %d: %s)", (int) err, cudaGetErrorString(err));
        return buf;
    }
    CUdevice dev;
    CUresult cr = cuDeviceGet(&dev, 0);
    CUmemAllocationProp prop = {};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    size_t gran = 0;
    if (cr == CUDA_SUCCESS) {
        cr = cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    }
    CUmemGenericAllocationHandle h;
    if (cr == CUDA_SUCCESS) {
        cr = cuMemCreate(&h, gran, &prop, 0);
        if (cr == CUDA_SUCCESS) {
            cuMemRelease(h);
        }
    }
    cublasHandle_t blas;
    cublasStatus_t bs = cublasCreate(&blas);
    if (bs == CUBLAS_STATUS_SUCCESS) {
        cublasDestroy(blas);
    }
    float * d = nullptr;
    float h_x[4] = {1, 2, 3, 4};
    cudaMalloc(&d, sizeof h_x);
    cudaMemcpy(d, h_x, sizeof h_x, cudaMemcpyHostToDevice);
    ggml_cuda_scale<<<1, 4>>>(d, 2.0f, 4);
    err = cudaGetLastError();
    if (err == cudaSuccess) {
        err = cudaMemcpy(h_x, d, sizeof h_x, cudaMemcpyDeviceToHost);
    }
    cudaFree(d);
    if (err != cudaSuccess) {
        snprintf(buf, sizeof buf, "cuda: %d device(s); kernel: CUDA error %d: %s", n, (int) err, cudaGetErrorString(err));
        return buf;
    }
    snprintf(buf, sizeof buf, "cuda: %d device(s); driver %s; cublas %s; kernel: %.0f %.0f %.0f %.0f",
             n, cr == CUDA_SUCCESS ? "ok" : "error", bs == CUBLAS_STATUS_SUCCESS ? "ok" : "error", h_x[0], h_x[1], h_x[2], h_x[3]);
    return buf;
}
