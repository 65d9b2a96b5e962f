/* kernels.h: the launch functions of kernels.cu; the trainer never sees a
 * kernel, only these wrappers. */
#pragma once
#include <cuda_runtime.h>
#include <cstddef>

void launch_fill(float *x, size_t n, int rank, cudaStream_t s);
cudaError_t launch_scale(float *x, size_t n, float by, cudaStream_t s);
