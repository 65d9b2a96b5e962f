// audit_comm_inplace.cu: an in-place all-reduce of a member buffer whose
// result nothing reads afterwards; the check compares a copy of the input
// made from the host. The success line is decided by a comparison, but what was
// communicated is never read: a communication finding.
#include <cmath>
#include <cstdio>
#include <vector>
#include <cuda_runtime.h>
#include <nccl.h>

struct buffers {
    float *data;
    float *before;
};

int run(ncclComm_t comm, cudaStream_t s)
{
    size_t n = 1024;
    buffers b;
    cudaMalloc(&b.data, n * sizeof(float));
    cudaMalloc(&b.before, n * sizeof(float));
    std::vector<float> zeros(n, 0.0f);
    cudaMemset(b.data, 0, n * sizeof(float));
    cudaMemcpy(b.before, zeros.data(), n * sizeof(float), cudaMemcpyHostToDevice);
    ncclAllReduce(b.data, b.data, n, ncclFloat, ncclSum, comm, s);
    cudaStreamSynchronize(s);
    std::vector<float> got(n);
    cudaMemcpy(got.data(), b.before, n * sizeof(float), cudaMemcpyDeviceToHost);
    long bad = 0;
    for (size_t i = 0; i < n; i++)
        if (std::fabs(got[i]) > 1e-6f)
            bad++;
    printf("Verification: %s\n", bad == 0 ? "PASS" : "FAIL");
    cudaFree(b.data);
    cudaFree(b.before);
    return bad == 0;
}
