// audit_comm_forward.cu: an all-gather into 'full', then an in-place
// broadcast of part of 'full' into 'full'; the check reads only 'shard'.
// The broadcast's send argument reads the all-gather's output (a read for
// the all-gather), but is not a read of what the broadcast itself receives:
// nothing reads that, a communication finding on the broadcast only.
#include <cmath>
#include <cstdio>
#include <vector>
#include <cuda_runtime.h>
#include <nccl.h>

int run(ncclComm_t comm, cudaStream_t s, int rank)
{
    size_t n = 1024;
    float *shard = nullptr, *full = nullptr;
    cudaMalloc(&shard, n * sizeof(float));
    cudaMalloc(&full, 2 * n * sizeof(float));
    ncclAllGather(shard, full, n, ncclFloat, comm, s);
    ncclBroadcast(full + n, full, n, ncclFloat, 0, comm, s);
    std::vector<float> got(n), want(n, (float)rank);
    cudaMemcpy(got.data(), shard, n * sizeof(float), cudaMemcpyDeviceToHost);
    long bad = 0;
    for (size_t i = 0; i < n; i++)
        if (std::fabs(got[i] - want[i]) > 1e-6f)
            bad++;
    printf("Verification: %s\n", bad == 0 ? "PASS" : "FAIL");
    cudaFree(shard);
    cudaFree(full);
    return bad == 0;
}
