// Launches one kernel and prints the CUDA error it gets, to check preflight's kernel verdicts
// against what the driver really does.
#include <cstdio>
extern "C" __global__ void axpy(float a, const float *x, float *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
int main() {
    float *x, *y;
    cudaMalloc(&x, 1024 * sizeof(float));
    cudaMalloc(&y, 1024 * sizeof(float));
    axpy<<<4, 256>>>(2.0f, x, y, 1024);
    cudaError_t err = cudaDeviceSynchronize();
    if (err == cudaSuccess) err = cudaGetLastError();
    printf("launch: %d %s\n", (int)err, cudaGetErrorString(err));
    return err == cudaSuccess ? 0 : 1;
}
