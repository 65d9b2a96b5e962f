// nccl_alloc.cu: a data-parallel step written against NCCL 2.27/2.28 the way
// the NCCL user guide recommends: the buffers that travel over the network are
// allocated with ncclMemAlloc (so NVLS / CUMEM can use them) and registered as
// symmetric windows; the local-only buffers stay on cudaMalloc. Each step
//   1. makes the gradient, sums it over the ranks in place, runs an
//      independent forward kernel, then applies the SGD update;
//   2. makes this rank's shard, all-gathers it into the full buffer, runs an
//      independent kernel, then folds the gathered buffer into an accumulator.
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CUDACHECK(cmd)                                                                             \
    do {                                                                                           \
        cudaError_t e = cmd;                                                                       \
        if (e != cudaSuccess) {                                                                    \
            printf("Failed: Cuda error %s:%d '%s'\n", __FILE__, __LINE__, cudaGetErrorString(e));  \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                          \
        }                                                                                          \
    } while (0)

#define NCCLCHECK(cmd)                                                                             \
    do {                                                                                           \
        ncclResult_t r = cmd;                                                                      \
        if (r != ncclSuccess) {                                                                    \
            printf("Failed, NCCL error %s:%d '%s'\n", __FILE__, __LINE__, ncclGetErrorString(r));  \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                          \
        }                                                                                          \
    } while (0)

namespace {

struct Config {
    size_t n = 4099;   // gradient / parameter length
    size_t m = 8192;   // forward length and per-rank shard length
    int steps = 3;
    int rounds = 64;
};

struct Trainer {
    int rank = 0, nranks = 1;
    Config cfg;
    ncclComm_t comm = nullptr;
    cudaStream_t stream = nullptr;

    // communication buffers: NCCL-allocated and registered
    float *grad = nullptr;    // n
    float *shard = nullptr;   // m
    float *full = nullptr;    // m * nranks
    ncclWindow_t grad_win = nullptr, shard_win = nullptr, full_win = nullptr;

    // local buffers: plain cudaMalloc
    float *params = nullptr;  // n
    float *input = nullptr;   // m
    float *act = nullptr;     // m
    float *act2 = nullptr;    // m
    float *acc = nullptr;     // m * nranks
};

__host__ __device__ inline float grad_value(size_t i, int rank, int step)
{
    return (float)((i * 7 + (size_t)rank * 13 + (size_t)step * 5) % 17) / 64.0f;
}

__host__ __device__ inline float shard_value(size_t i, int rank, int step)
{
    return (float)((i * 3 + (size_t)rank * 11 + (size_t)step * 2) % 23) / 32.0f;
}

__global__ void fill_pattern(float *p, size_t len)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < len; i += (size_t)gridDim.x * blockDim.x)
        p[i] = (float)(i % 29) / 8.0f;
}

__global__ void fill_zero(float *p, size_t len)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < len; i += (size_t)gridDim.x * blockDim.x)
        p[i] = 0.0f;
}

__global__ void compute_grad(float *g, size_t n, int rank, int step)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        g[i] = grad_value(i, rank, step);
}

__global__ void compute_shard(float *s, size_t m, int rank, int step)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < m; i += (size_t)gridDim.x * blockDim.x)
        s[i] = shard_value(i, rank, step);
}

__global__ void forward_kernel(const float *x, float *y, size_t m, int rounds)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < m; i += (size_t)gridDim.x * blockDim.x) {
        float v = x[i], a = 0.0f;
        for (int r = 0; r < rounds; r++)
            a = fmaf(a, 0.5f, v);
        y[i] = a;
    }
}

__global__ void sgd_update(float *p, const float *g, size_t n, float lr)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] -= lr * g[i];
}

__global__ void accumulate(float *acc, const float *full, size_t len)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < len; i += (size_t)gridDim.x * blockDim.x)
        acc[i] += full[i];
}

constexpr int kThreads = 256;

inline int grid_for(size_t len)
{
    size_t b = (len + kThreads - 1) / kThreads;
    return b > 1024 ? 1024 : (int)b;
}

void setup(Trainer &t)
{
    int ndev = 1;
    CUDACHECK(cudaGetDeviceCount(&ndev));
    CUDACHECK(cudaSetDevice(t.rank % ndev));

    ncclUniqueId id;
    if (t.rank == 0)
        NCCLCHECK(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
    NCCLCHECK(ncclCommInitRank(&t.comm, t.nranks, id, t.rank));
    CUDACHECK(cudaStreamCreateWithFlags(&t.stream, cudaStreamNonBlocking));

    const size_t n = t.cfg.n, m = t.cfg.m;
    const size_t grad_bytes = n * sizeof(float);
    const size_t shard_bytes = m * sizeof(float);
    const size_t full_bytes = m * (size_t)t.nranks * sizeof(float);

    NCCLCHECK(ncclMemAlloc((void **)&t.grad, grad_bytes));
    NCCLCHECK(ncclMemAlloc((void **)&t.shard, shard_bytes));
    NCCLCHECK(ncclMemAlloc((void **)&t.full, full_bytes));
    NCCLCHECK(ncclCommWindowRegister(t.comm, t.grad, grad_bytes, &t.grad_win, NCCL_WIN_COLL_SYMMETRIC));
    NCCLCHECK(ncclCommWindowRegister(t.comm, t.shard, shard_bytes, &t.shard_win, NCCL_WIN_COLL_SYMMETRIC));
    NCCLCHECK(ncclCommWindowRegister(t.comm, t.full, full_bytes, &t.full_win, NCCL_WIN_COLL_SYMMETRIC));

    CUDACHECK(cudaMalloc((void **)&t.params, n * sizeof(float)));
    CUDACHECK(cudaMalloc((void **)&t.input, m * sizeof(float)));
    CUDACHECK(cudaMalloc((void **)&t.act, m * sizeof(float)));
    CUDACHECK(cudaMalloc((void **)&t.act2, m * sizeof(float)));
    CUDACHECK(cudaMalloc((void **)&t.acc, m * (size_t)t.nranks * sizeof(float)));
    fill_pattern<<<grid_for(m), kThreads, 0, t.stream>>>(t.input, m);
}

void reset(Trainer &t)
{
    const size_t n = t.cfg.n, m = t.cfg.m;
    fill_pattern<<<grid_for(n), kThreads, 0, t.stream>>>(t.params, n);
    fill_zero<<<grid_for(m * t.nranks), kThreads, 0, t.stream>>>(t.acc, m * t.nranks);
}

void train_step(Trainer &t, int k)
{
    const size_t n = t.cfg.n, m = t.cfg.m;

    // data-parallel gradient sum
    compute_grad<<<grid_for(n), kThreads, 0, t.stream>>>(t.grad, n, t.rank, k);
    NCCLCHECK(ncclAllReduce(t.grad, t.grad, n, ncclFloat, ncclSum, t.comm, t.stream));
    forward_kernel<<<grid_for(m), kThreads, 0, t.stream>>>(t.input, t.act, m, t.cfg.rounds);
    sgd_update<<<grid_for(n), kThreads, 0, t.stream>>>(t.params, t.grad, n, 0.01f);

    // sharded state gathered on every rank
    compute_shard<<<grid_for(m), kThreads, 0, t.stream>>>(t.shard, m, t.rank, k);
    NCCLCHECK(ncclAllGather(t.shard, t.full, m, ncclFloat, t.comm, t.stream));
    forward_kernel<<<grid_for(m), kThreads, 0, t.stream>>>(t.act, t.act2, m, t.cfg.rounds);
    accumulate<<<grid_for(m * t.nranks), kThreads, 0, t.stream>>>(t.acc, t.full, m * t.nranks);
}

void teardown(Trainer &t)
{
    NCCLCHECK(ncclCommWindowDeregister(t.comm, t.full_win));
    NCCLCHECK(ncclCommWindowDeregister(t.comm, t.shard_win));
    NCCLCHECK(ncclCommWindowDeregister(t.comm, t.grad_win));
    NCCLCHECK(ncclMemFree(t.full));
    NCCLCHECK(ncclMemFree(t.shard));
    NCCLCHECK(ncclMemFree(t.grad));
    CUDACHECK(cudaFree(t.params));
    CUDACHECK(cudaFree(t.input));
    CUDACHECK(cudaFree(t.act));
    CUDACHECK(cudaFree(t.act2));
    CUDACHECK(cudaFree(t.acc));
    CUDACHECK(cudaStreamDestroy(t.stream));
    NCCLCHECK(ncclCommDestroy(t.comm));
}

// host check of sampled params and accumulator entries
long count_wrong(const Trainer &t)
{
    const size_t n = t.cfg.n, m = t.cfg.m, total = m * (size_t)t.nranks;
    const int steps = t.cfg.steps;
    std::vector<float> hp(n), ha(total);
    CUDACHECK(cudaMemcpy(hp.data(), t.params, n * sizeof(float), cudaMemcpyDeviceToHost));
    CUDACHECK(cudaMemcpy(ha.data(), t.acc, total * sizeof(float), cudaMemcpyDeviceToHost));
    long wrong = 0;

    size_t stride = n > 4096 ? n / 1024 : 1;
    for (size_t i = 0; i < n; i += stride) {
        double want = (double)(i % 29) / 8.0;
        for (int k = 0; k < steps; k++) {
            double sum = 0.0;
            for (int r = 0; r < t.nranks; r++)
                sum += grad_value(i, r, k);
            want -= 0.01 * sum;
        }
        if (std::fabs(hp[i] - want) > 1e-3 * (1.0 + std::fabs(want)))
            wrong++;
    }

    stride = total > 4096 ? total / 1024 : 1;
    for (size_t j = 0; j < total; j += stride) {
        int r = (int)(j / m);
        size_t i = j % m;
        double want = 0.0;
        for (int k = 0; k < steps; k++)
            want += shard_value(i, r, k);
        if (std::fabs(ha[j] - want) > 1e-3 * (1.0 + std::fabs(want)))
            wrong++;
    }
    return wrong;
}

} // namespace

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    Trainer t;
    MPI_Comm_rank(MPI_COMM_WORLD, &t.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &t.nranks);
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!std::strcmp(argv[i], "--n"))
            t.cfg.n = (size_t)std::atol(argv[i + 1]);
        else if (!std::strcmp(argv[i], "--m"))
            t.cfg.m = (size_t)std::atol(argv[i + 1]);
        else if (!std::strcmp(argv[i], "--steps"))
            t.cfg.steps = std::atoi(argv[i + 1]);
        else if (!std::strcmp(argv[i], "--rounds"))
            t.cfg.rounds = std::atoi(argv[i + 1]);
    }

    setup(t);

    // correctness pass
    reset(t);
    for (int k = 0; k < t.cfg.steps; k++)
        train_step(t, k);
    CUDACHECK(cudaStreamSynchronize(t.stream));
    long wrong = count_wrong(t);

    // timed pass
    reset(t);
    cudaEvent_t start, stop;
    CUDACHECK(cudaEventCreate(&start));
    CUDACHECK(cudaEventCreate(&stop));
    MPI_Barrier(MPI_COMM_WORLD);
    CUDACHECK(cudaEventRecord(start, t.stream));
    for (int k = 0; k < t.cfg.steps; k++)
        train_step(t, k);
    CUDACHECK(cudaEventRecord(stop, t.stream));
    CUDACHECK(cudaEventSynchronize(stop));
    float ms = 0.0f;
    CUDACHECK(cudaEventElapsedTime(&ms, start, stop));
    wrong += count_wrong(t);

    long all = 0;
    MPI_Allreduce(&wrong, &all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (t.rank == 0) {
        if (all == 0)
            std::printf("Verification: PASS\n");
        else
            std::printf("Verification: FAIL %ld values wrong\n", all);
        std::printf("CUCO_RESULT {\"time_ms\": %.6f, \"iters\": %d}\n", ms / t.cfg.steps, t.cfg.steps);
    }
    CUDACHECK(cudaEventDestroy(start));
    CUDACHECK(cudaEventDestroy(stop));
    teardown(t);
    MPI_Finalize();
    return 0;
}
