// overlap_alias.cu: one training-style step per iteration, written in one
// function: a shard is produced and all-gathered, then three launches that do
// not touch the gathered rows run (two on the main stream, one on a second
// stream), and only then a kernel reads the gathered rows, through a pointer
// alias of the receive buffer. The transform's early_start_late_wait
// schedule must overlap the all-gather with the three launches and keep the
// wait before the aliased read.
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { fprintf(stderr, "CUDA %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); MPI_Abort(MPI_COMM_WORLD, 1); } } while (0)
#define NK(call) do { ncclResult_t r_ = (call); if (r_ != ncclSuccess) { fprintf(stderr, "NCCL %s at %s:%d\n", ncclGetErrorString(r_), __FILE__, __LINE__); MPI_Abort(MPI_COMM_WORLD, 1); } } while (0)

#define GRID(n) (unsigned)(((n) + 255) / 256 < 1024 ? ((n) + 255) / 256 : 1024)
#define LOOP(i, n) for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

__global__ void produce_shard(float *shard, size_t n, int rank, int it) { LOOP(i, n) shard[i] = (float)(rank * 100 + (int)(i % 97) + it); }
__global__ void hidden_a(float *a, size_t n, int it) { LOOP(i, n) a[i] = 0.5f * (float)(i % 13) + (float)it; }
__global__ void hidden_b(float *b, size_t n, int it) { LOOP(i, n) b[i] = (float)(i % 7) - (float)it; }
__global__ void hidden_c(const float *a, float *c, size_t n) { LOOP(i, n) c[i] = 2.0f * a[i]; }
__global__ void consume(const float *rows, const float *c, float *out, size_t total, size_t n)
{
    LOOP(j, total) out[j] += rows[j] + c[j % n];
}

static size_t arg_size(int argc, char **argv, const char *name, size_t dflt)
{
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], name) == 0)
            return (size_t)strtoull(argv[i + 1], NULL, 10);
    return dflt;
}

static void run_steps(float *shard, float *gathered, float *act_a, float *act_b, float *act_c, float *out,
                      size_t n, int rank, int nranks, int iters, ncclComm_t comm, cudaStream_t st,
                      size_t n, int rank, int nranks, int iters, ncclComm_t comm, cudaStream_t st,
                      cudaStream_t aux)
{
    size_t total = n * (size_t)nranks;
    for (int it = 0; it < iters; it++) {
        produce_shard<<<GRID(n), 256, 0, st>>>(shard, n, rank, it);
        NK(ncclAllGather(shard, gathered, n, ncclFloat32, comm, st));
        float *rows = gathered;
        hidden_a<<<GRID(n), 256, 0, st>>>(act_a, n, it);
        hidden_b\<<<GRID(n), 256, 0, aux>>>(act_b, n, it);
        hidden_c<<<GRID(n), 256, 0, st>>>(act_a, act_c, n);
        consume<<<GRID(total), 256, 0, st>>>(rows, act_c, out, total, n);
    }
}

static int verify(const std::vector<float> &out, const std::vector<float> &b, size_t n, int nranks, int iters)
{
    int bad = 0;
    for (size_t j = 0; j < out.size(); j++) {
        size_t r = j / n, i = j % n;
        double want = 0;
        for (int it = 0; it < iters; it++)
            want += (double)(r * 100 + i % 97 + it) + 2.0 * (0.5 * (double)(i % 13) + it);
        bad += std::fabs(out[j] - want) > 1e-4 * std::fabs(want) + 1e-3;
    }
    for (size_t i = 0; i < n; i++)
        bad += b[i] != (float)(i % 7) - (float)(iters - 1);
    (void)nranks;
    return bad;

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
    size_t n = arg_size(argc, argv, "--n", 1 << 20), total = n * (size_t)nranks;
    cudaStream_t st, aux;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&aux, cudaStreamNonBlocking));
    float *shard, *gathered, *act_a, *act_b, *act_c, *out;
    CK(cudaMalloc(&shard, n * sizeof(float)));
    CK(cudaMalloc(&gathered, total * sizeof(float)));
    CK(cudaMalloc(&act_a, n * sizeof(float)));
    CK(cudaMalloc(&act_b, n * sizeof(float)));
    CK(cudaMalloc(&act_c, n * sizeof(float)));
    CK(cudaMalloc(&out, total * sizeof(float)));
    const int iters = 3;
    CK(cudaMemsetAsync(out, 0, total * sizeof(float), st));
    run_steps(shard, gathered, act_a, act_b, act_c, out, n, rank, nranks, iters, comm, st, aux);
    CK(cudaStreamSynchronize(st));
    CK(cudaStreamSynchronize(aux));
    std::vector<float> host(total), hb(n);
    CK(cudaMemcpy(host.data(), out, total * sizeof(float), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hb.data(), act_b, n * sizeof(float), cudaMemcpyDeviceToHost));
    int bad = verify(host, hb, n, nranks, iters);
    int bad_all = 0;
    MPI_Allreduce(&bad, &bad_all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("Verification: %s\n", bad_all ? "FAIL wrong gathered sums" : "PASS");
    auto t0 = std::chrono::steady_clock::now();
    run_steps(shard, gathered, act_a, act_b, act_c, out, n, rank, nranks, 10, comm, st, aux);
    CK(cudaStreamSynchronize(st));
    CK(cudaStreamSynchronize(aux));
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / 10;
    if (rank == 0)
        printf("CUCO_RESULT {\"time_ms\": %.6f, \"iters\": 10}\n", ms);
    CK(cudaFree(shard));
    CK(cudaFree(gathered));
    CK(cudaFree(act_a));
    CK(cudaFree(act_b));
    CK(cudaFree(act_c));
    CK(cudaFree(out));
    NK(ncclCommDestroy(comm));
    MPI_Finalize();
    return bad_all != 0;
}
