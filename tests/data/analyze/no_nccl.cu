// A plain CUDA program without NCCL.
#include <cstdio>
__global__ void add(const float *x, float *y, int n) { int i = threadIdx.x; if (i < n) y[i] += x[i]; }
int main()
{
    float *x, *y;
    cudaMalloc(&x, 64 * sizeof(float));
    cudaMalloc(&y, 64 * sizeof(float));
    add<<<1, 64>>>(x, y, 64);
    cudaDeviceSynchronize();
    printf("done\n");
    return 0;
}
