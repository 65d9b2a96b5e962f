// allreduce_loop.cu: an all-reduce in a loop of steps (scale, then sum over
// ranks), with the step in an EVOLVE-BLOCK; the harness around it is frozen.
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cstring>
#include <vector>

#define CK(call) do { cudaError_t e/*_ = (call); if (e_ != cudaSuccess) { fprintf(stderr, "CUDA %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); MPI_Abort(MPI_COMM_WORLD, 1); } } while (0)
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

__global__ void scale(float *x, size_t n, float s)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] *= s;
}

// EVOLVE-BLOCK-START
struct Step {
    float *buf = nullptr;
};

static void step_setup(Step &s, size_t n)
{
    CK(cudaMalloc((void **)&s.buf, n * sizeof(float)));
}

static void step_run(Step &s, size_t n, ncclComm_t comm, cudaStream_t st, int steps)
{
    for (int k = 0; k < steps; k++) {
        scale<<<64, 256, 0, st>>>(s.buf, n, 0.5f);
        NK(ncclAllReduce(s.buf, s.buf, n, ncclFloat32, ncclSum, comm, st));
    }
}

static void step_teardown(Step &s)
{
    CK(cudaFree(s.buf));
}
// EVOLVE-BLOCK-END

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, nranks;
    ncclComm_t comm = init_comm(&rank, &nranks);
    size_t n = arg_n(argc, argv);
    cudaStream_t stream;
    CK(cudaStreamCreate(&stream));
    Step s;
    step_setup(s, n);
    fill<<<64, 256>>>(s.buf, n, 1.0f);
    CK(cudaDeviceSynchronize());
    step_run(s, n, comm, stream, 3);
    CK(cudaStreamSynchronize(stream));
    std::vector<float> host(n);
    CK(cudaMemcpy(host.data(), s.buf, n * sizeof(float), cudaMemcpyDeviceToHost));
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        double want = (1.0 + (double)(i % 1000));
        for (int k = 0; k < 3; k++)
            want = want * 0.5 * nranks;
        bad += std::abs(host[i] - want) > 1e-3 * std::abs(want);
    }
    printf("Verification: %s\n", bad ? "FAIL wrong sums" : "PASS");
    auto t0 = std::chrono::steady_clock::now();
    step_run(s, n, comm, stream, 10);
    CK(cudaStreamSynchronize(stream));
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / 10;
    if (rank == 0)
        printf("CUCO_RESULT {\"time_ms\": %.6f, \"iters\": 10}\n", ms);
    step_teardown(s);
    NK(ncclCommDestroy(comm));
    MPI_Finalize();
    return bad != 0;
}
