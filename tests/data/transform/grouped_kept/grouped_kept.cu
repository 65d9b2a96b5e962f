// grouped_kept.cu: a mixed-precision optimizer step's host code in the
// style of bucketed data-parallel trainers: the gradient buckets are summed
// in one NCCL group together with the step's bookkeeping, which runs on a
// side stream: the found-inf flag (ncclMax) and the smallest loss scale of
// the ranks (ncclMin). The sums go to the device; the max and the min stay
// host NCCL inside the group.
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

static void nccl_check(ncclResult_t r, const char *what, int line)
{
    if (r != ncclSuccess) {
        std::fprintf(stderr, "%s (line %d): %s\n", what, line, ncclGetErrorString(r));
        std::exit(1);
    }
}
static void cuda_check(cudaError_t r, const char *what, int line)
{
    if (r != cudaSuccess) {
        std::fprintf(stderr, "%s (line %d): %s\n", what, line, cudaGetErrorString(r));
        std::exit(1);
    }
}

enum { kBuckets = 3 };

struct Optimizer {
    ncclComm_t comm;
    cudaStream_t main_stream, side_stream;
    cudaEvent_t grads_ready, stats_done;
    float *bucket[kBuckets];
    size_t bucket_len[kBuckets];
    float *found_inf; // one float
    float *loss_scale; // one float
};

__global__ void backward_fill(float *g, size_t n, int rank, int step, int b)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        g[i] = (float)((i * 7 + step + b) % 23) * (rank + 1);
}

__global__ void check_overflow(const float *g, size_t n, float *found_inf, float *loss_scale, int rank)
{
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        *found_inf = rank == 1 ? 1.0f : 0.0f; // one rank saw an overflow
        *loss_scale = 65536.0f / (float)(rank + 1);
    }
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        if (!isfinite(g[i]))
            *found_inf = 2.0f;
}

static void optimizer_step(Optimizer &o, int rank, int step)
{
    for (int b = 0; b < kBuckets; b++)
        backward_fill<<<64, 256, 0, o.main_stream>>>(o.bucket[b], o.bucket_len[b], rank, step, b);
    check_overflow<<<8, 256, 0, o.main_stream>>>(o.bucket[0], o.bucket_len[0], o.found_inf, o.loss_scale, rank);
    cuda_check(cudaEventRecord(o.grads_ready, o.main_stream), "record", __LINE__);
    cuda_check(cudaStreamWaitEvent(o.side_stream, o.grads_ready, 0), "wait", __LINE__);
    nccl_check(ncclGroupStart(), "group start", __LINE__);
    for (int b = 0; b < kBuckets; b++)
        nccl_check(ncclAllReduce(o.bucket[b], o.bucket[b], o.bucket_len[b], ncclFloat32, ncclSum, o.comm,
                                 o.main_stream),
                   "bucket sum", __LINE__);
    nccl_check(ncclAllReduce(o.found_inf, o.found_inf, 1, ncclFloat32, ncclMax, o.comm, o.side_stream),
               "found-inf max", __LINE__);
    nccl_check(ncclAllReduce(o.loss_scale, o.loss_scale, 1, ncclFloat32, ncclMin, o.comm, o.side_stream),
               "loss scale min", __LINE__);
    nccl_check(ncclGroupEnd(), "group end", __LINE__);
    cuda_check(cudaEventRecord(o.stats_done, o.side_stream), "record", __LINE__);
    cuda_check(cudaStreamWaitEvent(o.main_stream, o.stats_done, 0), "wait", __LINE__);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, world = 1, ndev = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    cuda_check(cudaGetDeviceCount(&ndev), "devices", __LINE__);
    cuda_check(cudaSetDevice(rank % ndev), "set device", __LINE__);
    size_t n = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : (1u << 20);
    int steps = argc > 2 ? (int)std::strtol(argv[2], nullptr, 10) : 10;
    ncclUniqueId id;
    if (rank == 0)
        nccl_check(ncclGetUniqueId(&id), "unique id", __LINE__);
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    Optimizer o;
    nccl_check(ncclCommInitRank(&o.comm, world, id, rank), "init", __LINE__);
    cuda_check(cudaStreamCreateWithFlags(&o.main_stream, cudaStreamNonBlocking), "stream", __LINE__);
    cuda_check(cudaStreamCreateWithFlags(&o.side_stream, cudaStreamNonBlocking), "stream", __LINE__);
    cuda_check(cudaEventCreateWithFlags(&o.grads_ready, cudaEventDisableTiming), "event", __LINE__);
    cuda_check(cudaEventCreateWithFlags(&o.stats_done, cudaEventDisableTiming), "event", __LINE__);
    for (int b = 0; b < kBuckets; b++) {
        o.bucket_len[b] = n / (size_t)(b + 1) + 3; // uneven buckets
        cuda_check(cudaMalloc(&o.bucket[b], o.bucket_len[b] * sizeof(float)), "bucket", __LINE__);
    }
    cuda_check(cudaMalloc(&o.found_inf, sizeof(float)), "flag", __LINE__);
    cuda_check(cudaMalloc(&o.loss_scale, sizeof(float)), "scale", __LINE__);

    // checked step: each bucket's sum, the max and the min against the host's
    optimizer_step(o, rank, 5);
    cuda_check(cudaStreamSynchronize(o.main_stream), "sync", __LINE__);
    float ranks_sum = world * (world + 1) / 2.0f;
    const char *why = nullptr;
    for (int b = 0; b < kBuckets && !why; b++) {
        std::vector<float> g(o.bucket_len[b]);
        cuda_check(cudaMemcpy(g.data(), o.bucket[b], g.size() * sizeof(float), cudaMemcpyDeviceToHost), "copy",
                   __LINE__);
        for (size_t i = 0; i < g.size() && !why; i++)
            if (g[i] != (float)((i * 7 + 5 + b) % 23) * ranks_sum)
                why = "a gradient bucket differs";
    }
    float flag = 0.0f, scale = 0.0f;
    cuda_check(cudaMemcpy(&flag, o.found_inf, sizeof flag, cudaMemcpyDeviceToHost), "copy", __LINE__);
    cuda_check(cudaMemcpy(&scale, o.loss_scale, sizeof scale, cudaMemcpyDeviceToHost), "copy", __LINE__);
    if (!why && flag != (world > 1 ? 1.0f : 0.0f))
        why = "found-inf flag (max) differs";
    if (!why && scale != 65536.0f / (float)world)
        why = "loss scale (min) differs";
    int bad = why != nullptr, any_bad = 0;
    MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0)
        std::printf("Verification: %s%s\n", any_bad ? "FAIL " : "PASS", any_bad ? (why ? why : "on another rank") : "");

    MPI_Barrier(MPI_COMM_WORLD);
    auto t0 = std::chrono::steady_clock::now();
    for (int k = 0; k < steps; k++)
        optimizer_step(o, rank, k);
    cuda_check(cudaStreamSynchronize(o.main_stream), "sync", __LINE__);
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / steps;
    if (rank == 0)
        std::printf("CUCO_RESULT {\"time_ms\": %.6f, \"iters\": %d}\n", ms, steps);

    for (int b = 0; b < kBuckets; b++)
        cuda_check(cudaFree(o.bucket[b]), "free", __LINE__);
    cuda_check(cudaFree(o.found_inf), "free", __LINE__);
    cuda_check(cudaFree(o.loss_scale), "free", __LINE__);
    nccl_check(ncclCommDestroy(o.comm), "destroy", __LINE__);
    MPI_Finalize();
    return any_bad;
}
