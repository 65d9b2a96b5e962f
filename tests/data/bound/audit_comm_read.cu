// audit_comm_read.cu: the all-reduced buffer is copied back through a
// helper parameter and compared with the expected sum: the received data is
// read, so the audit has no communication finding.
#include <cmath>
#include <cstdio>
#include <vector>
#include <cuda_runtime.h>
#include <nccl.h>

static void reduce(const float *in, float *out, size_t n, ncclComm_t comm, cudaStream_t s)
{
    ncclAllReduce(in, out, n, ncclFloat, ncclSum, comm, s);
}

static void fetch(std::vector<float> &host, const float *dev, size_t n)
{
    cudaMemcpy(host.data(), dev, n * sizeof(float), cudaMemcpyDeviceToHost);
}

int run(ncclComm_t comm, cudaStream_t s, int nranks)
{
    size_t n = 1024;
    float *x = nullptr, *y = nullptr;
    cudaMalloc(&x, n * sizeof(float));
    cudaMalloc(&y, n * sizeof(float));
    std::vector<float> ones(n, 1.0f), got(n);
    cudaMemcpy(x, ones.data(), n * sizeof(float), cudaMemcpyHostToDevice);
    reduce(x, y, n, comm, s);
    cudaStreamSynchronize(s);
    fetch(got, y, n);
    long bad = 0;
    for (size_t i = 0; i < n; i++)
        if (std::fabs(got[i] - (float)nranks) > 1e-6f)
            bad++;
    printf("Verification: %s\n", bad == 0 ? "PASS" : "FAIL");
    cudaFree(x);
    cudaFree(y);
    return bad == 0;
}
