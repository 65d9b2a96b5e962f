// kept_calls.cu: a data-parallel training step's host code with the
// collectives public trainers add around the gradient all-reduce: a
// found-inf check as mixed-precision training does it (ncclMax), a loss
// averaged by a pre-multiplied sum (ncclRedOpCreatePreMulSum), metrics
// reduced to rank 0 (ncclReduce), a call through a table of collectives (as
// test harnesses keep them) and one in a macro. The device path takes only
// the gradient sum; the others stay host NCCL.
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define NCCLCHECK(cmd) do { ncclResult_t r_ = (cmd); if (r_ != ncclSuccess) { std::printf("NCCL failure %s:%d '%s'\n", __FILE__, __LINE__, ncclGetErrorString(r_)); std::exit(1); } } while (0)
#define CUDACHECK(cmd) do { cudaError_t e_ = (cmd); if (e_ != cudaSuccess) { std::printf("CUDA failure %s:%d '%s'\n", __FILE__, __LINE__, cudaGetErrorString(e_)); std::exit(1); } } while (0)
// the step's norm, summed over ranks (a macro, as some trainers write it)
#define SUM_NORM(buf) ncclAllReduce(buf, buf, 1, ncclFloat, ncclSum, comm, stream)

typedef ncclResult_t (*reduce_fn)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                                  cudaStream_t);
struct CollTable {
    const char *name;
    reduce_fn run;
};
static const CollTable table[] = {{"allreduce", ncclAllReduce}};

__global__ void make_grads(float *g, size_t n, int rank, int step)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        g[i] = (float)((i + step) % 31) * (rank + 1);
}

// overflow flag (1 when a gradient is not finite), the sum of squares, the loss
__global__ void grad_stats(const float *g, size_t n, float *inf_flag, float *norm, float *loss, int rank)
{
    __shared__ float part[256];
    float s = 0.0f;
    int bad = 0;
    for (size_t i = threadIdx.x; i < n; i += blockDim.x) {
        s += g[i] * g[i];
        bad |= !isfinite(g[i]);
    }
    part[threadIdx.x] = s;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w /= 2) {
        if (threadIdx.x < w)
            part[threadIdx.x] += part[threadIdx.x + w];
        __syncthreads();
    }
    if (bad)
        *inf_flag = 1.0f;
    if (threadIdx.x == 0) {
        *norm = part[0];
        *loss = 2.0f * (rank + 1);
        if (!bad && rank == 1)
            *inf_flag = 0.5f; // one rank's flag differs, so the max is seen
    }
}

struct Step {
    ncclComm_t comm;
    cudaStream_t stream;
    float *grads, *stats; // stats: inf flag, norm, loss, metric
    size_t n;
    ncclRedOp_t mean;
};

static void step_run(Step &s, int rank, int step)
{
    ncclComm_t comm = s.comm;
    cudaStream_t stream = s.stream;
    make_grads<<<128, 256, 0, stream>>>(s.grads, s.n, rank, step);
    CUDACHECK(cudaMemsetAsync(s.stats, 0, 4 * sizeof(float), stream));
    NCCLCHECK(ncclAllReduce(s.grads, s.grads, s.n, ncclFloat, ncclSum, comm, stream));
    grad_stats<<<1, 256, 0, stream>>>(s.grads, s.n, s.stats, s.stats + 1, s.stats + 2, rank);
    NCCLCHECK(ncclAllReduce(s.stats, s.stats, 1, ncclFloat, ncclMax, comm, stream));
    NCCLCHECK(SUM_NORM(s.stats + 1));
    NCCLCHECK(ncclAllReduce(s.stats + 2, s.stats + 2, 1, ncclFloat, s.mean, comm, stream));
    NCCLCHECK(table[0].run(s.stats + 2, s.stats + 3, 1, ncclFloat, ncclSum, comm, stream));
    NCCLCHECK(ncclReduce(s.stats + 3, s.stats + 3, 1, ncclFloat, ncclSum, 0, comm, stream));
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, world = 1, ndev = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    CUDACHECK(cudaGetDeviceCount(&ndev));
    CUDACHECK(cudaSetDevice(rank % ndev));
    size_t n = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : (1u << 20);
    int steps = argc > 2 ? (int)std::strtol(argv[2], nullptr, 10) : 10;
    ncclUniqueId id;
    if (rank == 0)
        NCCLCHECK(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    Step s;
    s.n = n;
    NCCLCHECK(ncclCommInitRank(&s.comm, world, id, rank));
    CUDACHECK(cudaStreamCreate(&s.stream));
    CUDACHECK(cudaMalloc(&s.grads, n * sizeof(float)));
    CUDACHECK(cudaMalloc(&s.stats, 4 * sizeof(float)));
    float inv = 1.0f / (float)world;
    NCCLCHECK(ncclRedOpCreatePreMulSum(&s.mean, &inv, ncclFloat, ncclScalarHostImmediate, s.comm));

    // checked step: every result against the host's arithmetic
    step_run(s, rank, 3);
    CUDACHECK(cudaStreamSynchronize(s.stream));
    std::vector<float> g(n);
    float st[4];
    CUDACHECK(cudaMemcpy(g.data(), s.grads, n * sizeof(float), cudaMemcpyDeviceToHost));
    CUDACHECK(cudaMemcpy(st, s.stats, sizeof st, cudaMemcpyDeviceToHost));
    float ranks_sum = world * (world + 1) / 2.0f;
    double norm = 0.0;
    size_t wrong = 0;
    for (size_t i = 0; i < n; i++) {
        float want = (float)((i + 3) % 31) * ranks_sum;
        wrong += g[i] != want;
        norm += (double)want * want;
    }
    const char *why = wrong ? "gradients differ" : nullptr;
    if (!why && st[0] != (world > 1 ? 0.5f : 0.0f))
        why = "found-inf flag (max) differs";
    if (!why && std::fabs(st[1] - world * norm) > 1e-3 * world * norm)
        why = "norm sum differs";
    if (!why && std::fabs(st[2] - (world + 1.0f)) > 1e-5f * (world + 1.0f))
        why = "mean loss differs";
    // the table's sum of the mean loss, then reduced again to rank 0
    float metric = (float)world * world * st[2];
    if (!why && rank == 0 && std::fabs(st[3] - metric) > 1e-5f * metric)
        why = "reduced metric differs";
    int bad = why != nullptr, any_bad = 0;
    MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0)
        std::printf("Verification: %s%s\n", any_bad ? "FAIL " : "PASS", any_bad ? (why ? why : "on another rank") : "");

    MPI_Barrier(MPI_COMM_WORLD);
    auto t0 = std::chrono::steady_clock::now();
    for (int k = 0; k < steps; k++)
        step_run(s, rank, k);
    CUDACHECK(cudaStreamSynchronize(s.stream));
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / steps;
    if (rank == 0)
        std::printf("CUCO_RESULT {\"time_ms\": %.6f, \"iters\": %d}\n", ms, steps);

    NCCLCHECK(ncclRedOpDestroy(s.mean, s.comm));
    CUDACHECK(cudaFree(s.grads));
    CUDACHECK(cudaFree(s.stats));
    NCCLCHECK(ncclCommDestroy(s.comm));
    MPI_Finalize();
    return any_bad;
}
