// Two communicators (world and a split of it), collectives in loops and in a helper.
#include <nccl.h>
#include <cuda_runtime.h>

static void reduce_grads(ncclComm_t c, cudaStream_t st, float *g, size_t n)
{
    ncclAllReduce(g, g, n, ncclFloat, ncclSum, c, st);
}

int main(int argc, char **argv)
{
    ncclUniqueId id;
    ncclComm_t world, half;
    int rank = 0, nranks = 2;
    ncclGetUniqueId(&id);
    ncclCommInitRank(&world, nranks, id, rank);
    ncclCommSplit(world, rank % 2, rank, &half, NULL);
    cudaStream_t s;
    cudaStreamCreate(&s);
    float *shard, *full;
    cudaMalloc((void **)&shard, 1024 * sizeof(float));
    cudaMalloc(&full, 2048 * sizeof(float));
    for (int step = 0; step < 10; step++) {
        ncclAllGather(shard, full, 1024, ncclFloat, world, s);
        int k = 0;
        while (k < 2)
            ncclBroadcast(full + k * 512, full, 512, ncclFloat, 0, half, s), k++;
    }
    reduce_grads(half, s, &shard[0], 1024);
    ncclCommDestroy(half);
    ncclCommDestroy(world);
    return 0;
}
