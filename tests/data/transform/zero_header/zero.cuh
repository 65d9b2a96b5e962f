/* zero.cuh: the sharded optimizer of the trainer (ZeRO stage 1).
 *
 * Every rank holds all parameters and all gradients; each owns one shard of
 * the optimizer step. reduce_gradients() sums the gradients into this rank's
 * shard (ncclReduceScatter), step() updates the shard, and
 * gather_parameters() brings every rank's updated shard back
 * (ncclAllGather). host_sum() adds one float over the ranks through a
 * managed scalar the host reads afterwards (a loss or a norm).
 */
#pragma once
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdio>
#include <cstdlib>

#define ZERO_NCCL(call)                                                                      \
    do {                                                                                     \
        ncclResult_t r_ = (call);                                                            \
        if (r_ != ncclSuccess) {                                                             \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, ncclGetErrorString(r_));      \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)

struct ZeroState {
    ncclComm_t comm;
    cudaStream_t stream;
    int rank, nranks;
    size_t shard;        /* elements per rank */
    float *grad_shard;   /* this rank's summed gradients */
    float *scalar;       /* managed: host_sum's scratch */
};

__global__ void sgd_shard(float *params, const float *grad, size_t n, float scale)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        params[i] -= scale * grad[i];
}

inline void zero_init(ZeroState *z, ncclComm_t comm, cudaStream_t stream, int rank, int nranks, size_t shard)
{
    z->comm = comm;
    z->stream = stream;
    z->rank = rank;
    z->nranks = nranks;
    z->shard = shard;
    cudaMalloc(&z->grad_shard, shard * sizeof(float));
    cudaMallocManaged(&z->scalar, sizeof(float));
}

inline void reduce_gradients(ZeroState *z, const float *grads)
{
    ZERO_NCCL(ncclReduceScatter(grads, z->grad_shard, z->shard, ncclFloat, ncclSum, z->comm, z->stream));
}

inline void step(ZeroState *z, float *params, float lr)
{
    sgd_shard<<<64, 256, 0, z->stream>>>(params + z->rank * z->shard, z->grad_shard, z->shard, lr / z->nranks);
}

inline void gather_parameters(ZeroState *z, float *params)
{
    ZERO_NCCL(ncclAllGather(params + z->rank * z->shard, params, z->shard, ncclFloat, z->comm, z->stream));
}

inline float host_sum(ZeroState *z, float value)
{
    *z->scalar = value;
    ZERO_NCCL(ncclAllReduce(z->scalar, z->scalar, 1, ncclFloat, ncclSum, z->comm, z->stream));
    cudaDeviceSynchronize();
    return *z->scalar;
}

inline void zero_free(ZeroState *z)
{
    cudaFree(z->grad_shard);
    cudaFree(z->scalar);
}
