// seqpar_norm: a sequence-parallel RMSNorm, written C style (globals, free
// functions): each rank holds `tokens` rows of the sequence, ncclAllGather
// collects every rank's rows, and a templated kernel normalizes each
// gathered row (fp32 in, fp16 out). The manifest declares the kernel
// rows_independent (rows=rows, args="x y"), so the transform may run it per
// source rank as the rows land. Prints `Verification: PASS` when sampled rows
// of every rank match a host reference, then CUCO_RESULT with the time of one
// step (gather + norm).
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CHECK_CUDA(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { fprintf(stderr, "%s:%d CUDA: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); MPI_Abort(MPI_COMM_WORLD, 1); } } while (0)
#define CHECK_NCCL(x) do { ncclResult_t r_ = (x); if (r_ != ncclSuccess) { fprintf(stderr, "%s:%d NCCL: %s\n", __FILE__, __LINE__, ncclGetErrorString(r_)); MPI_Abort(MPI_COMM_WORLD, 1); } } while (0)

static ncclComm_t g_comm;
static cudaStream_t g_stream;
static int g_rank, g_nranks, g_tokens, g_dim;
static float *g_x_local, *g_x_all, *g_gamma;
static __half *g_y;

static __host__ __device__ float value_at(unsigned long long i, int salt)
{
    unsigned long long h = (i + 1) * 0x9E3779B97F4A7C15ull ^ (unsigned long long)salt * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 29;
    return (float)(h % 2001) / 1000.0f - 1.0f;
}

__global__ void fill_values(float *p, size_t n, unsigned long long first, int salt)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = value_at(first + i, salt);
}

// One block per row; blocks past `rows` do nothing.
template <typename T>
__global__ void rmsnorm_rows(const float *x, const float *gamma, T *y, int rows, int dim, float eps)
{
    __shared__ float partial[256];
    int r = blockIdx.x;
    if (r >= rows)
        return;
    const float *xr = x + (size_t)r * dim;
    float s = 0.0f;
    for (int i = threadIdx.x; i < dim; i += blockDim.x)
        s += xr[i] * xr[i];
    partial[threadIdx.x] = s;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w /= 2) {
        if ((int)threadIdx.x < w)
            partial[threadIdx.x] += partial[threadIdx.x + w];
        __syncthreads();
    }
    float scale = rsqrtf(partial[0] / dim + eps);
    for (int i = threadIdx.x; i < dim; i += blockDim.x)
        y[(size_t)r * dim + i] = (T)(xr[i] * scale * gamma[i]);
}

static void setup(void)
{
    size_t local = (size_t)g_tokens * g_dim, all = local * g_nranks;
    CHECK_CUDA(cudaStreamCreate(&g_stream));
    CHECK_CUDA(cudaMalloc(&g_x_local, local * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&g_x_all, all * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&g_gamma, g_dim * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&g_y, all * sizeof(__half)));
    fill_values<<<256, 256, 0, g_stream>>>(g_x_local, local, (unsigned long long)g_rank * local, 1);
    fill_values<<<8, 256, 0, g_stream>>>(g_gamma, g_dim, 0, 2);
    CHECK_CUDA(cudaGetLastError());
}

static void step(void)
{
    int rows = g_tokens * g_nranks;
    CHECK_NCCL(ncclAllGather(g_x_local, g_x_all, (size_t)g_tokens * g_dim, ncclFloat, g_comm, g_stream));
    rmsnorm_rows<__half><<<rows, 256, 0, g_stream>>>(g_x_all, g_gamma, g_y, rows, g_dim, 1e-5f);
    CHECK_CUDA(cudaGetLastError());
}

// Mismatches of global row r against the host reference.
static int check_row(int r)
{
    std::vector<__half> got(g_dim);
    CHECK_CUDA(cudaMemcpy(got.data(), g_y + (size_t)r * g_dim, g_dim * sizeof(__half), cudaMemcpyDeviceToHost));
    double ss = 0.0;
    for (int i = 0; i < g_dim; i++) {
        double x = value_at((unsigned long long)r * g_dim + i, 1);
        ss += x * x;
    }
    double scale = 1.0 / std::sqrt(ss / g_dim + 1e-5);
    int bad = 0;
    for (int i = 0; i < g_dim; i++) {
        double want = value_at((unsigned long long)r * g_dim + i, 1) * scale * value_at(i, 2);
        bad += std::fabs((double)__half2float(got[i]) - want) > 2e-3 * std::fabs(want) + 2e-3;
    }
    return bad;
}

static int opt(int argc, char **argv, const char *name, int dflt)
{
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], name))
            return atoi(argv[i + 1]);
    return dflt;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_nranks);
    int ndev = 1;
    CHECK_CUDA(cudaGetDeviceCount(&ndev));
    CHECK_CUDA(cudaSetDevice(g_rank % ndev));
    ncclUniqueId id;
    if (g_rank == 0)
        CHECK_NCCL(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    CHECK_NCCL(ncclCommInitRank(&g_comm, g_nranks, id, g_rank));
    g_tokens = opt(argc, argv, "--tokens", 1024);
    g_dim = opt(argc, argv, "--dim", 1024);
    int iters = opt(argc, argv, "--iters", 10);
    setup();
    for (int i = 0; i < 2; i++)
        step();
    CHECK_CUDA(cudaStreamSynchronize(g_stream));
    int bad = 0;
    for (int r = 0; r < g_nranks; r++)
        for (int t : {0, 1, g_tokens / 2, g_tokens - 1})
            bad += check_row(r * g_tokens + t);
    int bad_all = 0;
    MPI_Allreduce(&bad, &bad_all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (g_rank == 0)
        printf("Verification: %s\n", bad_all ? "FAIL wrong normalized rows" : "PASS");
    MPI_Barrier(MPI_COMM_WORLD);
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; i++)
        step();
    CHECK_CUDA(cudaStreamSynchronize(g_stream));
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (g_rank == 0)
        printf("CUCO_RESULT {\"time_ms\": %.6f, \"iters\": %d}\n", ms / (iters > 0 ? iters : 1), iters);
    CHECK_CUDA(cudaStreamSynchronize(g_stream));
    cudaFree(g_x_local);
    cudaFree(g_x_all);
    cudaFree(g_gamma);
    cudaFree(g_y);
    CHECK_NCCL(ncclCommDestroy(g_comm));
    MPI_Finalize();
    return bad_all != 0;
}
