/* kernels.cu: the computation of the trainer, launched through wrappers. */
#include "kernels.h"

__global__ static void fill_kernel(float *x, size_t n, int rank)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] = (float)((i + 3 * (size_t)rank) % 13);
}

__global__ static void scale_kernel(float *x, size_t n, float by)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] *= by;
}

void launch_fill(float *x, size_t n, int rank, cudaStream_t s) { fill_kernel<<<128, 256, 0, s>>>(x, n, rank); }

static void scale_on(float *x, size_t n, float by, cudaStream_t s) { scale_kernel<<<128, 256, 0, s>>>(x, n, by); }

cudaError_t launch_scale(float *x, size_t n, float by, cudaStream_t s)
{
    scale_on(x, n, by, s);
    return cudaGetLastError();
}
