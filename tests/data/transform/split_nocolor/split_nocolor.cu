// split_nocolor.cu: a subgroup made by ncclCommSplit with NCCL_SPLIT_NOCOLOR
// for the ranks left out (their communicator is NULL), in the style of
// expert- or pipeline-parallel subgroups: the communicators live in globals
// set up by a helper and destroyed by another; the subgroup's calls are
// guarded by a test of its communicator. Even ranks sum their activations
// in the subgroup; every rank sums a gradient over the world.
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define NCCL_CALL(x) do { ncclResult_t r_ = (x); if (r_ != ncclSuccess) { std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, ncclGetErrorString(r_)); std::exit(1); } } while (0)
#define CUDA_CALL(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); std::exit(1); } } while (0)

static ncclComm_t g_world = nullptr, g_even = nullptr;
static int g_rank = 0, g_size = 1;

static void init_comms()
{
    ncclUniqueId id;
    if (g_rank == 0)
        NCCL_CALL(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    NCCL_CALL(ncclCommInitRank(&g_world, g_size, id, g_rank));
    int color = g_rank % 2 == 0 ? 0 : NCCL_SPLIT_NOCOLOR;
    NCCL_CALL(ncclCommSplit(g_world, color, g_rank, &g_even, nullptr));
}

static void finalize_comms()
{
    if (g_even)
        NCCL_CALL(ncclCommDestroy(g_even));
    NCCL_CALL(ncclCommDestroy(g_world));
}

__global__ void fill(float *x, size_t n, float v)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] = v + (float)(i % 5);
}

static void step(float *act, float *grad, float *grad_sum, size_t n, cudaStream_t s)
{
    fill<<<128, 256, 0, s>>>(act, n, (float)(g_rank + 1));
    fill<<<128, 256, 0, s>>>(grad, n, 2.0f * (g_rank + 1));
    if (g_even)
        NCCL_CALL(ncclAllReduce(act, act, n, ncclFloat, ncclSum, g_even, s));
    NCCL_CALL(ncclAllReduce(grad, grad_sum, n, ncclFloat, ncclSum, g_world, s));
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    int ndev = 1;
    CUDA_CALL(cudaGetDeviceCount(&ndev));
    CUDA_CALL(cudaSetDevice(g_rank % ndev));
    size_t n = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : (1u << 20);
    int iters = argc > 2 ? (int)std::strtol(argv[2], nullptr, 10) : 10;
    init_comms();
    float *act, *grad, *grad_sum;
    CUDA_CALL(cudaMalloc(&act, n * sizeof(float)));
    CUDA_CALL(cudaMalloc(&grad, n * sizeof(float)));
    CUDA_CALL(cudaMalloc(&grad_sum, n * sizeof(float)));
    cudaStream_t s;
    CUDA_CALL(cudaStreamCreate(&s));

    step(act, grad, grad_sum, n, s);
    CUDA_CALL(cudaStreamSynchronize(s));
    std::vector<float> a(n), g(n);
    CUDA_CALL(cudaMemcpy(a.data(), act, n * sizeof(float), cudaMemcpyDeviceToHost));
    CUDA_CALL(cudaMemcpy(g.data(), grad_sum, n * sizeof(float), cudaMemcpyDeviceToHost));
    float evens = 0.0f, evens_count = 0.0f, all = 0.0f;
    for (int r = 0; r < g_size; r++) {
        all += 2.0f * (r + 1);
        if (r % 2 == 0) {
            evens += (float)(r + 1);
            evens_count += 1.0f;
        }
    }
    long bad = 0;
    for (size_t i = 0; i < n; i++) {
        float want_a = g_even ? evens + evens_count * (float)(i % 5) : (float)(g_rank + 1) + (float)(i % 5);
        bad += a[i] != want_a;
        bad += g[i] != all + g_size * (float)(i % 5);
    }
    long bad_all = 0;
    MPI_Allreduce(&bad, &bad_all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);

    MPI_Barrier(MPI_COMM_WORLD);
    auto t0 = std::chrono::steady_clock::now();
    for (int k = 0; k < iters; k++)
        step(act, grad, grad_sum, n, s);
    CUDA_CALL(cudaStreamSynchronize(s));
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / iters;
    if (g_rank == 0) {
        std::printf("Verification: %s\n", bad_all ? "FAIL sums differ" : "PASS");
        std::printf("CUCO_RESULT {\"time_ms\": %.6f, \"iters\": %d}\n", ms, iters);
    }
    CUDA_CALL(cudaFree(act));
    CUDA_CALL(cudaFree(grad));
    CUDA_CALL(cudaFree(grad_sum));
    finalize_comms();
    MPI_Finalize();
    return bad_all != 0;
}
