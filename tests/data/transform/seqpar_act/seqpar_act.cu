// seqpar_act: a sequence-parallel SwiGLU activation, the launch wrapped in a
// host helper: each rank holds `tokens` rows of gate|up pairs (2*d floats a
// row), ncclAllGather collects every rank's rows, and `swiglu` writes d
// floats a row (silu(gate) * up). The manifest declares the kernel
// rows_independent with args "x y:d" (y is half as wide as the gathered
// rows). Prints `Verification: PASS` when sampled rows of every rank match a
// host reference, then CUCO_RESULT with one step.
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CUDA_TRY(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); MPI_Abort(MPI_COMM_WORLD, 1); } } while (0)
#define NCCL_TRY(x) do { ncclResult_t r_ = (x); if (r_ != ncclSuccess) { fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, ncclGetErrorString(r_)); MPI_Abort(MPI_COMM_WORLD, 1); } } while (0)

struct Ctx {
    ncclComm_t comm;
    cudaStream_t stream;
    int rank, nranks, tokens, d;
    float *x_local, *x_all, *y;
};

static float host_value(unsigned long long i)
{
    return (float)((i * 7919ull) % 4001ull) / 1000.0f - 2.0f;
}

__global__ void fill(float *p, size_t n, unsigned long long first)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = (float)(((first + i) * 7919ull) % 4001ull) / 1000.0f - 2.0f;
}

// One block per row of x (gate | up, 2*d floats); row r of y gets d floats.
__global__ void swiglu(const float *x, float *y, int rows, int d)
{
    int r = blockIdx.x;
    if (r >= rows)
        return;
    for (int i = threadIdx.x; i < d; i += blockDim.x) {
        float g = x[(size_t)r * 2 * d + i], u = x[(size_t)r * 2 * d + d + i];
        y[(size_t)r * d + i] = g / (1.0f + expf(-g)) * u;
    }
}

static void activate(const float *x, float *y, int rows, int d, cudaStream_t s)
{
    int blocks = rows;
    swiglu<<<blocks, 128, 0, s>>>(x, y, rows, d);
}

static void step(Ctx *c)
{
    NCCL_TRY(ncclAllGather(c->x_local, c->x_all, (size_t)c->tokens * 2 * c->d, ncclFloat32, c->comm, c->stream));
    activate(c->x_all, c->y, c->tokens * c->nranks, c->d, c->stream);
}

static int check_row(const Ctx *c, int r)
{
    std::vector<float> got(c->d);
    CUDA_TRY(cudaMemcpy(got.data(), c->y + (size_t)r * c->d, c->d * sizeof(float), cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int i = 0; i < c->d; i++) {
        double g = host_value((unsigned long long)r * 2 * c->d + i);
        double u = host_value((unsigned long long)r * 2 * c->d + c->d + i);
        double want = g / (1.0 + std::exp(-g)) * u;
        bad += std::fabs(got[i] - want) > 1e-4 * std::fabs(want) + 1e-5;
    }
    return bad;
}

static int arg(int argc, char **argv, const char *name, int dflt)
{
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], name))
            return atoi(argv[i + 1]);
    return dflt;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    Ctx c{};
    MPI_Comm_rank(MPI_COMM_WORLD, &c.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &c.nranks);
    int ndev = 1;
    CUDA_TRY(cudaGetDeviceCount(&ndev));
    CUDA_TRY(cudaSetDevice(c.rank % ndev));
    ncclUniqueId id;
    if (c.rank == 0)
        NCCL_TRY(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    NCCL_TRY(ncclCommInitRank(&c.comm, c.nranks, id, c.rank));
    c.tokens = arg(argc, argv, "--tokens", 1024);
    c.d = arg(argc, argv, "--d", 1024);
    int iters = arg(argc, argv, "--iters", 10);
    size_t local = (size_t)c.tokens * 2 * c.d;
    CUDA_TRY(cudaStreamCreate(&c.stream));
    CUDA_TRY(cudaMalloc(&c.x_local, local * sizeof(float)));
    CUDA_TRY(cudaMalloc(&c.x_all, local * c.nranks * sizeof(float)));
    CUDA_TRY(cudaMalloc(&c.y, (size_t)c.tokens * c.nranks * c.d * sizeof(float)));
    fill<<<256, 256, 0, c.stream>>>(c.x_local, local, (unsigned long long)c.rank * local);
    CUDA_TRY(cudaGetLastError());
    step(&c);
    CUDA_TRY(cudaStreamSynchronize(c.stream));
    int bad = 0;
    for (int r = 0; r < c.nranks; r++)
        for (int t : {0, c.tokens / 2, c.tokens - 1})
            bad += check_row(&c, r * c.tokens + t);
    int bad_all = 0;
    MPI_Allreduce(&bad, &bad_all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (c.rank == 0)
        printf("Verification: %s\n", bad_all ? "FAIL wrong activations" : "PASS");
    MPI_Barrier(MPI_COMM_WORLD);
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; i++)
        step(&c);
    CUDA_TRY(cudaStreamSynchronize(c.stream));
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (c.rank == 0)
        printf("CUCO_RESULT {\"time_ms\": %.6f, \"iters\": %d}\n", ms / (iters > 0 ? iters : 1), iters);
    cudaFree(c.x_local);
    cudaFree(c.x_all);
    cudaFree(c.y);
    NCCL_TRY(ncclCommDestroy(c.comm));
    MPI_Finalize();
    return bad_all != 0;
}
