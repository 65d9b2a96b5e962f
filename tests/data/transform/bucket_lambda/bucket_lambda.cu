// bucket_lambda.cu: data-parallel training step with gradient bucketing, in
// C++17 style. Gradients and parameters live in four buckets held in
// std::array, kernels are launched through a generic lambda, and the
// all-reduces are issued either as one NCCL group after a backward kernel
// that writes every bucket (step_grouped) or one by one, each right after
// its own bucket's backward kernel (step_split). Between the gradient sum and
// the optimizer runs the next micro-batch's forward kernel, which touches
// none of the buckets. Even steps use the grouped variant, odd steps the
// split one.
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#define CUDA_CHECK(call)                                                                   \
    do {                                                                                   \
        cudaError_t e_ = (call);                                                           \
        if (e_ != cudaSuccess) {                                                           \
            std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,             \
                         cudaGetErrorString(e_));                                          \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                  \
        }                                                                                  \
    } while (0)

#define NCCL_CHECK(call)                                                                   \
    do {                                                                                   \
        ncclResult_t r_ = (call);                                                          \
        if (r_ != ncclSuccess) {                                                           \
            std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,             \
                         ncclGetErrorString(r_));                                          \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                  \
        }                                                                                  \
    } while (0)

constexpr int kBuckets = 4;
constexpr float kLr = 0.01f;
constexpr int kRounds = 64;

__host__ __device__ inline float grad_value(size_t i, int rank, int step, int bucket)
{
    return static_cast<float>((i * 7 + static_cast<size_t>(rank) * 13 + static_cast<size_t>(step) * 5 +
                               static_cast<size_t>(bucket) * 3) % 17) / 64.0f;
}

__host__ __device__ inline float param_init(size_t i, int bucket)
{
    return static_cast<float>(i % 29) / 8.0f + static_cast<float>(bucket);
}

__global__ void init_params(float *p, size_t n, int bucket)
{
    for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<size_t>(gridDim.x) * blockDim.x)
        p[i] = param_init(i, bucket);
}

__global__ void init_input(float *x, size_t m)
{
    for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < m;
         i += static_cast<size_t>(gridDim.x) * blockDim.x)
        x[i] = static_cast<float>(i % 13) / 4.0f;
}

// backward pass of the whole model: writes the gradient of every bucket
__global__ void backward_all(float *g0, float *g1, float *g2, float *g3, size_t n, int rank, int step)
{
    for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<size_t>(gridDim.x) * blockDim.x) {
        g0[i] = grad_value(i, rank, step, 0);
        g1[i] = grad_value(i, rank, step, 1);
        g2[i] = grad_value(i, rank, step, 2);
        g3[i] = grad_value(i, rank, step, 3);
    }
}

// backward pass of one bucket's layers
__global__ void backward_bucket(float *g, size_t n, int rank, int step, int bucket)
{
    for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<size_t>(gridDim.x) * blockDim.x)
        g[i] = grad_value(i, rank, step, bucket);
}

// next micro-batch's forward pass: reads the input, writes activations
__global__ void forward(const float *x, float *act, size_t m, int rounds)
{
    for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < m;
         i += static_cast<size_t>(gridDim.x) * blockDim.x) {
        float v = x[i], a = 0.0f;
        for (int r = 0; r < rounds; ++r)
            a = fmaf(a, 0.5f, v);
        act[i] = a;
    }
}

__global__ void sgd(float *p, const float *g, size_t n, float lr)
{
    for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<size_t>(gridDim.x) * blockDim.x)
        p[i] -= lr * g[i];
}

static int blocks_for(size_t n)
{
    return static_cast<int>(std::min<size_t>((n + 255) / 256, 1024));
}

static void step_grouped(std::array<float *, kBuckets> &grads, std::array<float *, kBuckets> &params,
                         float *input, float *act, size_t n, int rank, int step, ncclComm_t comm,
                         cudaStream_t stream)
{
    const int blocks = blocks_for(n);
    auto launch = [&](auto kernel, auto... args) { kernel<<<blocks, 256, 0, stream>>>(args...); };

    launch(backward_all, grads[0], grads[1], grads[2], grads[3], n, rank, step);
    NCCL_CHECK(ncclGroupStart());
    for (int b = 0; b < kBuckets; ++b)
        NCCL_CHECK(ncclAllReduce(grads[b], grads[b], n, ncclFloat, ncclSum, comm, stream));
    NCCL_CHECK(ncclGroupEnd());
    launch(forward, input, act, n, kRounds);
    for (int b = 0; b < kBuckets; ++b)
        launch(sgd, params[b], grads[b], n, kLr);
}

static void step_split(std::array<float *, kBuckets> &grads, std::array<float *, kBuckets> &params,
                       float *input, float *act, size_t n, int rank, int step, ncclComm_t comm,
                       cudaStream_t stream)
{
    const int blocks = blocks_for(n);
    auto launch = [&](auto kernel, auto... args) { kernel<<<blocks, 256, 0, stream>>>(args...); };

    // backward runs from the last bucket to the first
    for (int b = kBuckets - 1; b >= 0; --b) {
        launch(backward_bucket, grads[b], n, rank, step, b);
        NCCL_CHECK(ncclAllReduce(grads[b], grads[b], n, ncclFloat, ncclSum, comm, stream));
    }
    launch(forward, input, act, n, kRounds);
    for (int b = 0; b < kBuckets; ++b)
        launch(sgd, params[b], grads[b], n, kLr);
}

static void reset_params(std::array<float *, kBuckets> &params, size_t n, cudaStream_t stream)
{
    int b = 0;
    for (auto p : params)
        init_params<<<blocks_for(n), 256, 0, stream>>>(p, n, b++);
}

static int count_wrong(const std::array<float *, kBuckets> &params, size_t n, int nranks, int steps)
{
    std::vector<float> h(n);
    int wrong = 0;
    const size_t stride = n > 4096 ? n / 1024 : 1;
    for (int b = 0; b < kBuckets; ++b) {
        CUDA_CHECK(cudaMemcpy(h.data(), params[b], n * sizeof(float), cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < n; i += stride) {
            double want = param_init(i, b);
            for (int k = 0; k < steps; ++k) {
                double sum = 0.0;
                for (int r = 0; r < nranks; ++r)
                    sum += grad_value(i, r, k, b);
                want -= static_cast<double>(kLr) * sum;
            }
            if (std::fabs(h[i] - want) > 1e-3 * (1.0 + std::fabs(want)))
                ++wrong;
        }
    }
    return wrong;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, nranks = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);

    size_t n = 4099;
    int steps = 4;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string opt = argv[i];
        if (opt == "--n")
            n = static_cast<size_t>(std::atol(argv[i + 1]));
        else if (opt == "--steps")
            steps = std::atoi(argv[i + 1]);
    }

    int ndev = 1;
    CUDA_CHECK(cudaGetDeviceCount(&ndev));
    CUDA_CHECK(cudaSetDevice(rank % ndev));

    ncclUniqueId id;
    if (rank == 0)
        NCCL_CHECK(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
    ncclComm_t comm;
    NCCL_CHECK(ncclCommInitRank(&comm, nranks, id, rank));

    cudaStream_t stream;
    CUDA_CHECK(cudaStreamCreate(&stream));

    const size_t bytes = n * sizeof(float);
    std::array<float *, kBuckets> grads{};
    std::array<float *, kBuckets> params{};
    for (auto &g : grads)
        CUDA_CHECK(cudaMalloc(&g, bytes));
    for (auto &p : params)
        CUDA_CHECK(cudaMalloc(&p, bytes));
    float *input = nullptr, *act = nullptr;
    CUDA_CHECK(cudaMalloc(&input, bytes));
    CUDA_CHECK(cudaMalloc(&act, bytes));
    init_input<<<blocks_for(n), 256, 0, stream>>>(input, n);

    auto run_steps = [&]() {
        for (int k = 0; k < steps; ++k) {
            if (k % 2 == 0)
                step_grouped(grads, params, input, act, n, rank, k, comm, stream);
            else
                step_split(grads, params, input, act, n, rank, k, comm, stream);
        }
    };

    // correctness pass
    reset_params(params, n, stream);
    run_steps();
    CUDA_CHECK(cudaStreamSynchronize(stream));
    int wrong = count_wrong(params, n, nranks, steps);

    // timed pass
    reset_params(params, n, stream);
    cudaEvent_t t0, t1;
    CUDA_CHECK(cudaEventCreate(&t0));
    CUDA_CHECK(cudaEventCreate(&t1));
    MPI_Barrier(MPI_COMM_WORLD);
    CUDA_CHECK(cudaEventRecord(t0, stream));
    run_steps();
    CUDA_CHECK(cudaEventRecord(t1, stream));
    CUDA_CHECK(cudaEventSynchronize(t1));
    float ms = 0.0f;
    CUDA_CHECK(cudaEventElapsedTime(&ms, t0, t1));
    wrong += count_wrong(params, n, nranks, steps);

    int all_wrong = 0;
    MPI_Allreduce(&wrong, &all_wrong, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        if (all_wrong == 0)
            std::printf("Verification: PASS\n");
        else
            std::printf("Verification: FAIL %d parameters wrong\n", all_wrong);
        std::printf("CUCO_RESULT {\"time_ms\": %.6f, \"iters\": %d}\n", ms / steps, steps);
    }

    CUDA_CHECK(cudaEventDestroy(t0));
    CUDA_CHECK(cudaEventDestroy(t1));
    for (auto g : grads)
        CUDA_CHECK(cudaFree(g));
    for (auto p : params)
        CUDA_CHECK(cudaFree(p));
    CUDA_CHECK(cudaFree(input));
    CUDA_CHECK(cudaFree(act));
    CUDA_CHECK(cudaStreamDestroy(stream));
    NCCL_CHECK(ncclCommDestroy(comm));
    MPI_Finalize();
    return 0;
}
