// async_alloc.cu: all-gather whose buffers come from cudaMallocAsync and go back
// with cudaFreeAsync on a stream of the program's own; no EVOLVE-BLOCKs.
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { fprintf(stderr, "CUDA %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); MPI_Abort(MPI_COMM_WORLD, 1); } } while (0)
#define NK(call) do { ncclResult_t r_ = (call); if (r_ != ncclSuccess) { fprintf(stderr, "NCCL %s at %s:%d\n", ncclGetErrorString(r_), __FILE__, __LINE__); MPI_Abort(MPI_COMM_WORLD, 1); } } while (0)

__global__ void fill(float *x, size_t n, float base)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] = base + (float)(i % 1000);
}

static size_t arg_n(int argc, char **argv)
{
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "--n") == 0)
            return (size_t)atol(argv[i + 1]);
    return 1 << 20;
}

static ncclComm_t init_comm(int *rank, int *nranks)
{
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, nranks);
    int ndev = 1;
    CK(cudaGetDeviceCount(&ndev));
    CK(cudaSetDevice(*rank % ndev));
    ncclUniqueId id;
    if (*rank == 0)
        NK(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    ncclComm_t comm;
    NK(ncclCommInitRank(&comm, *nranks, id, *rank));
    return comm;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, nranks;
    ncclComm_t comm = init_comm(&rank, &nranks);
    size_t n = arg_n(argc, argv);
    cudaStream_t stream;
    CK(cudaStreamCreate(&stream));
    float *shard = nullptr, *gathered = nullptr;
    cudaStream_t as;
    CK(cudaStreamCreate(&as));
    CK(cudaMallocAsync(&shard, n * sizeof(float), as));
    CK(cudaMallocAsync(&gathered, n * nranks * sizeof(float), as));
    CK(cudaStreamSynchronize(as));
    fill<<<64, 256>>>(shard, n, 1000.0f * rank);
    CK(cudaDeviceSynchronize());

    NK(ncclAllGather(shard, gathered, n, ncclFloat32, comm, stream));
    CK(cudaStreamSynchronize(stream));

    std::vector<float> host(n * nranks);
    CK(cudaMemcpy(host.data(), gathered, host.size() * sizeof(float), cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int r = 0; r < nranks; r++)
        for (size_t i = 0; i < n; i++)
            bad += host[r * n + i] != 1000.0f * r + (float)(i % 1000);
    printf("Verification: %s\n", bad ? "FAIL wrong elements" : "PASS");
    auto t0 = std::chrono::steady_clock::now();
    for (int it = 0; it < 10; it++)
        NK(ncclAllGather(shard, gathered, n, ncclFloat32, comm, stream));
    CK(cudaStreamSynchronize(stream));
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / 10;
    if (rank == 0)
        printf("CUCO_RESULT {\"time_ms\": %.6f, \"iters\": 10}\n", ms);
    CK(cudaFreeAsync(shard, as));
    CK(cudaFreeAsync(gathered, as));
    CK(cudaStreamSynchronize(as));
    CK(cudaStreamDestroy(as));
    NK(ncclCommDestroy(comm));
    MPI_Finalize();
    return bad != 0;
}
