// phase_switch.cu: a data-parallel step written with templates, a switch over
// the phases of a step and lambdas: the gradient's element type is a
// template parameter whose NCCL type comes from a traits struct, each phase
// is a case of one switch (the training case a braced block, the evaluation
// case a plain one), an optional trace sits in #ifdef, and the parameters
// are broadcast from rank 0 through a lambda before training.
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CK_CUDA(x)                                                                                 \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));         \
            std::exit(1);                                                                          \
        }                                                                                          \
    } while (0)
#define CK_NCCL(x)                                                                                 \
    do {                                                                                           \
        ncclResult_t r_ = (x);                                                                     \
        if (r_ != ncclSuccess) {                                                                   \
            std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, ncclGetErrorString(r_));         \
            std::exit(1);                                                                          \
        }                                                                                          \
    } while (0)

template <typename T> struct NcclTypeOf;
template <> struct NcclTypeOf<float> {
    static constexpr ncclDataType_t value = ncclFloat;
};
template <> struct NcclTypeOf<double> {
    static constexpr ncclDataType_t value = ncclDouble;
};

enum class Phase { Warmup, Train, Eval };

__host__ __device__ inline double grad_value(size_t i, int rank, int step)
{
    return (double)((i * 5 + (size_t)rank * 11 + (size_t)step * 3) % 19) / 32.0;
}
__host__ __device__ inline double param_start(size_t i) { return (double)(i % 23) / 4.0; }

template <typename T> __global__ void fill_start(T *p, size_t n, int rank)
{
    /* rank 0's values are the real ones: the broadcast must bring them */
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = rank == 0 ? (T)param_start(i) : (T)-1;
}

template <typename T> __global__ void fill_grad(T *g, size_t n, int rank, int step)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        g[i] = (T)grad_value(i, rank, step);
}

template <typename T> __global__ void descend(T *p, const T *g, size_t n, T lr)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] -= lr * g[i];
}

// the next micro-batch's forward: it reads neither the gradient nor the parameters
__global__ void forward(const float *x, float *act, size_t m, int rounds)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < m; i += (size_t)gridDim.x * blockDim.x) {
        float v = x[i], a = 0.0f;
        for (int r = 0; r < rounds; r++)
            a = fmaf(a, 0.5f, v);
        act[i] = a;
    }
}

template <typename T> struct State {
    T *params, *grad;
    float *input, *act, *loss;
    size_t n, m;
};

template <typename T>
static void run_phase(Phase phase, State<T> &st, int rounds, int step, int rank, ncclComm_t comm,
                      cudaStream_t s)
{
    const T lr = (T)0.01;
    switch (phase) {
    case Phase::Warmup:
        forward<<<512, 256, 0, s>>>(st.input, st.act, st.m, rounds);
        break;
    case Phase::Train: {
        fill_grad<T><<<256, 256, 0, s>>>(st.grad, st.n, rank, step);
        CK_NCCL(ncclAllReduce(st.grad, st.grad, st.n, NcclTypeOf<T>::value, ncclSum, comm, s));
        forward<<<512, 256, 0, s>>>(st.input, st.act, st.m, rounds);
#ifdef TRACE_STEPS
        std::fprintf(stderr, "rank %d step %d\n", rank, step);
#endif
        descend<T><<<256, 256, 0, s>>>(st.params, st.grad, st.n, lr);
        break;
    }
    case Phase::Eval:
        CK_NCCL(ncclAllReduce(st.act, st.loss, 1, ncclFloat, ncclSum, comm, s));
        forward<<<512, 256, 0, s>>>(st.input, st.act, st.m, rounds);
        break;
    }
}

static int count_wrong(const std::vector<double> &p, int nranks, int steps)
{
    int wrong = 0;
    size_t stride = p.size() > 4096 ? p.size() / 1024 : 1;
    for (size_t i = 0; i < p.size(); i += stride) {
        double want = param_start(i);
        for (int k = 0; k < steps; k++) {
            double sum = 0.0;
            for (int r = 0; r < nranks; r++)
                sum += grad_value(i, r, k);
            want -= 0.01 * sum;
        }
        if (std::fabs(p[i] - want) > 1e-9 * (1.0 + std::fabs(want)))
            wrong++;
    }
    return wrong;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, nranks = 1, ndev = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    size_t n = 4099, m = 8192;
    int steps = 3, rounds = 64;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!std::strcmp(argv[i], "--n"))
            n = (size_t)std::atol(argv[i + 1]);
        else if (!std::strcmp(argv[i], "--m"))
            m = (size_t)std::atol(argv[i + 1]);
        else if (!std::strcmp(argv[i], "--steps"))
            steps = std::atoi(argv[i + 1]);
        else if (!std::strcmp(argv[i], "--rounds"))
            rounds = std::atoi(argv[i + 1]);
    }
    CK_CUDA(cudaGetDeviceCount(&ndev));
    CK_CUDA(cudaSetDevice(rank % ndev));
    ncclUniqueId id;
    if (rank == 0)
        CK_NCCL(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    ncclComm_t comm;
    CK_NCCL(ncclCommInitRank(&comm, nranks, id, rank));
    cudaStream_t s;
    CK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

    State<double> st;
    st.n = n;
    st.m = m;
    CK_CUDA(cudaMalloc(&st.params, n * sizeof(double)));
    CK_CUDA(cudaMalloc(&st.grad, n * sizeof(double)));
    CK_CUDA(cudaMalloc(&st.input, m * sizeof(float)));
    CK_CUDA(cudaMalloc(&st.act, m * sizeof(float)));
    CK_CUDA(cudaMalloc(&st.loss, sizeof(float)));
    CK_CUDA(cudaMemsetAsync(st.input, 0, m * sizeof(float), s));

    auto sync_params = [&](double *p, size_t count) {
        CK_NCCL(ncclBroadcast(p, p, count, ncclDouble, 0, comm, s));
    };
    auto train = [&](int first) {
        fill_start<double><<<256, 256, 0, s>>>(st.params, n, rank);
        sync_params(st.params, n);
        run_phase(Phase::Warmup, st, rounds, 0, rank, comm, s);
        for (int k = 0; k < steps; k++)
            run_phase(Phase::Train, st, rounds, first + k, rank, comm, s);
        run_phase(Phase::Eval, st, rounds, 0, rank, comm, s);
    };

    std::vector<double> host(n);
    train(0);
    CK_CUDA(cudaStreamSynchronize(s));
    CK_CUDA(cudaMemcpy(host.data(), st.params, n * sizeof(double), cudaMemcpyDeviceToHost));
    int wrong = count_wrong(host, nranks, steps), all = 0;

    cudaEvent_t a, b;
    CK_CUDA(cudaEventCreate(&a));
    CK_CUDA(cudaEventCreate(&b));
    MPI_Barrier(MPI_COMM_WORLD);
    CK_CUDA(cudaEventRecord(a, s));
    train(0);
    CK_CUDA(cudaEventRecord(b, s));
    CK_CUDA(cudaEventSynchronize(b));
    float ms = 0.0f;
    CK_CUDA(cudaEventElapsedTime(&ms, a, b));
    CK_CUDA(cudaMemcpy(host.data(), st.params, n * sizeof(double), cudaMemcpyDeviceToHost));
    wrong += count_wrong(host, nranks, steps);
    MPI_Allreduce(&wrong, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        if (all == 0)
            std::printf("Verification: PASS\n");
        else
            std::printf("Verification: FAIL %d parameters wrong\n", all);
        std::printf("CUCO_RESULT {\"time_ms\": %.6f, \"iters\": %d}\n", ms / steps, steps);
    }
    CK_CUDA(cudaEventDestroy(a));
    CK_CUDA(cudaEventDestroy(b));
    CK_CUDA(cudaFree(st.params));
    CK_CUDA(cudaFree(st.grad));
    CK_CUDA(cudaFree(st.input));
    CK_CUDA(cudaFree(st.act));
    CK_CUDA(cudaFree(st.loss));
    CK_NCCL(ncclCommDestroy(comm));
    CK_CUDA(cudaStreamDestroy(s));
    MPI_Finalize();
    return 0;
}
