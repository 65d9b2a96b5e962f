// readers.cuh: the kernels the overlap benchmarks time as readers of a
// buffer (window_read.cu, write_then_read.cu), and the fill they share.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

enum { READER_THREADS = 256 };

__global__ void fill(float *p, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = (float)(i % 5);
}

// every block sums all n elements (out[block]): an attention over all keys,
// re-reads from L2; launch with READER_THREADS threads
__global__ void sum_all(const float *p, size_t n, float *out)
{
    __shared__ float part[READER_THREADS];
    float s = 0.0f;
    for (size_t k = threadIdx.x; k < n; k += blockDim.x)
        s += p[k];
    part[threadIdx.x] = s;
    __syncthreads();
    for (int w = READER_THREADS / 2; w > 0; w /= 2) {
        if ((int)threadIdx.x < w)
            part[threadIdx.x] += part[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        out[blockIdx.x] = part[0];
}

// one pass: the grid sums the buffer, one partial a thread
__global__ void one_pass(const float4 *p, size_t n4, float *out)
{
    float s = 0.0f;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4; i += (size_t)gridDim.x * blockDim.x) {
        float4 v = p[i];
        s += v.x + v.y + v.z + v.w;
    }
    if (s == -1.0f)
        out[0] = s;
}
