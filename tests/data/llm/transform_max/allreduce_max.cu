// allreduce_max.cu: each rank fills a vector, then an ncclAllReduce with
// ncclMax leaves the element-wise maximum on every rank; the result is
// checked on the host. The exchange (buffers and communication) is the
// EVOLVE-BLOCK; setup, timing and verification are frozen.
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

// value of element i on rank r: every rank wins somewhere
__host__ __device__ inline float value(int r, size_t i) { return (float)((i * 7 + (size_t)r * 13) % 101); }

__global__ void fill(float *x, size_t n, int rank)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] = value(rank, i);
}

// EVOLVE-BLOCK-START
struct Exchange {
    ncclComm_t comm;
    float *x;
    size_t n;
};

static void exchange_setup(Exchange *ex, ncclComm_t comm, size_t n, cudaStream_t stream)
{
    ex->comm = comm;
    ex->n = n;
    CK(cudaMalloc(&ex->x, n * sizeof(float)));
}

static void exchange_run(Exchange *ex, cudaStream_t stream)
{
    NK(ncclAllReduce(ex->x, ex->x, ex->n, ncclFloat32, ncclMax, ex->comm, stream));
}

static void exchange_teardown(Exchange *ex, cudaStream_t stream)
{
    CK(cudaFree(ex->x));
}
// EVOLVE-BLOCK-END

static size_t arg_n(int argc, char **argv)
{
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "--n") == 0)
            return (size_t)atol(argv[i + 1]);
    return 1 << 20;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, nranks, ndev = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    CK(cudaGetDeviceCount(&ndev));
    CK(cudaSetDevice(rank % ndev));
    ncclUniqueId id;
    if (rank == 0)
        NK(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    ncclComm_t comm;
    NK(ncclCommInitRank(&comm, nranks, id, rank));
    cudaStream_t stream;
    CK(cudaStreamCreate(&stream));
    size_t n = arg_n(argc, argv);
    Exchange ex;
    exchange_setup(&ex, comm, n, stream);
    fill<<<64, 256, 0, stream>>>(ex.x, n, rank);
    CK(cudaStreamSynchronize(stream));
    MPI_Barrier(MPI_COMM_WORLD);
    auto t0 = std::chrono::steady_clock::now();
    exchange_run(&ex, stream);
    CK(cudaStreamSynchronize(stream));
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::vector<float> h(n);
    CK(cudaMemcpy(h.data(), ex.x, n * sizeof(float), cudaMemcpyDeviceToHost));
    long bad = 0;
    for (size_t i = 0; i < n; i++) {
        float want = value(0, i);
        for (int r = 1; r < nranks; r++)
            want = value(r, i) > want ? value(r, i) : want;
        bad += h[i] != want;
    }
    long all_bad = 0;
    MPI_Allreduce(&bad, &all_bad, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("Verification: %s\n", all_bad ? "FAIL" : "PASS");
        printf("CUCO_RESULT {\"time_ms\": %.4f, \"iters\": 1}\n", ms);
    }
    exchange_teardown(&ex, stream);
    CK(cudaStreamDestroy(stream));
    NK(ncclCommDestroy(comm));
    MPI_Finalize();
    return 0;
}
