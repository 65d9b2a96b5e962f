// raii_buffers.cu: a data-parallel training step in modern C++: every device
// buffer is an RAII DeviceBuffer<T> (allocated in its constructor, freed in
// its destructor, reached through data()), the communicator and stream are
// owned by small classes, and errors throw. Each step makes the gradient,
// sums it over the ranks in place, runs the next micro-batch's forward
// kernel (which does not touch the gradient) and applies the update.
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#define CUDA_OK(x)                                                                                 \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess)                                                                     \
            throw std::runtime_error(std::string(#x) + ": " + cudaGetErrorString(e_));             \
    } while (0)
#define NCCL_OK(x)                                                                                 \
    do {                                                                                           \
        ncclResult_t r_ = (x);                                                                     \
        if (r_ != ncclSuccess)                                                                     \
            throw std::runtime_error(std::string(#x) + ": " + ncclGetErrorString(r_));             \
    } while (0)

template <typename T> class DeviceBuffer {
public:
    explicit DeviceBuffer(size_t n) : n_(n) { CUDA_OK(cudaMalloc(&ptr_, n * sizeof(T))); }
    ~DeviceBuffer()
    {
        if (ptr_)
            cudaFree(ptr_);
    }
    DeviceBuffer(const DeviceBuffer &) = delete;
    DeviceBuffer &operator=(const DeviceBuffer &) = delete;
    DeviceBuffer(DeviceBuffer &&o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), n_(o.n_) {}
    T *data() { return ptr_; }
    const T *data() const { return ptr_; }
    size_t size() const { return n_; }

private:
    T *ptr_ = nullptr;
    size_t n_ = 0;
};

class Stream {
public:
    Stream() { CUDA_OK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking)); }
    ~Stream() { cudaStreamDestroy(s_); }
    cudaStream_t get() const { return s_; }

private:
    cudaStream_t s_ = nullptr;
};

class Communicator {
public:
    Communicator(int rank, int nranks) : rank_(rank), nranks_(nranks)
    {
        ncclUniqueId id;
        if (rank == 0)
            NCCL_OK(ncclGetUniqueId(&id));
        MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
        NCCL_OK(ncclCommInitRank(&comm_, nranks, id, rank));
    }
    ~Communicator() { ncclCommDestroy(comm_); }
    ncclComm_t get() const { return comm_; }
    int rank() const { return rank_; }
    int size() const { return nranks_; }

private:
    ncclComm_t comm_ = nullptr;
    int rank_, nranks_;
};

__host__ __device__ inline float grad_value(size_t i, int rank, int step)
{
    return (float)((i * 7 + (size_t)rank * 13 + (size_t)step * 5) % 17) / 64.0f;
}
__host__ __device__ inline float param_start(size_t i) { return (float)(i % 29) / 8.0f; }

__global__ void init_params(float *p, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = param_start(i);
}

__global__ void make_grad(float *g, size_t n, int rank, int step)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        g[i] = grad_value(i, rank, step);
}

// the next micro-batch's forward: a few hundred FMAs per activation
__global__ void forward(const float *x, float *act, size_t m, int rounds)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < m; i += (size_t)gridDim.x * blockDim.x) {
        float v = x[i], a = 0.0f;
        for (int r = 0; r < rounds; r++)
            a = fmaf(a, 0.5f, v);
        act[i] = a;
    }
}

__global__ void sgd(float *p, const float *g, size_t n, float lr)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] -= lr * g[i];
}

struct Options {
    size_t n = 4099, m = 8192;
    int steps = 3, rounds = 64;
};

static Options parse(int argc, char **argv)
{
    Options o;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string k = argv[i];
        long v = std::atol(argv[i + 1]);
        if (k == "--n")
            o.n = (size_t)v;
        else if (k == "--m")
            o.m = (size_t)v;
        else if (k == "--steps")
            o.steps = (int)v;
        else if (k == "--rounds")
            o.rounds = (int)v;
    }
    return o;
}

static void train(const Communicator &comm, const Stream &stream, DeviceBuffer<float> &params,
                  DeviceBuffer<float> &grad, const DeviceBuffer<float> &input,
                  DeviceBuffer<float> &act, const Options &o, int first_step)
{
    cudaStream_t s = stream.get();
    const float lr = 0.01f;
    for (int k = 0; k < o.steps; k++) {
        make_grad<<<256, 256, 0, s>>>(grad.data(), grad.size(), comm.rank(), first_step + k);
        NCCL_OK(ncclAllReduce(grad.data(), grad.data(), grad.size(), ncclFloat, ncclSum, comm.get(), s));
        forward<<<512, 256, 0, s>>>(input.data(), act.data(), act.size(), o.rounds);
        sgd<<<256, 256, 0, s>>>(params.data(), grad.data(), params.size(), lr);
    }
}

static int count_wrong(const std::vector<float> &p, const Options &o, int nranks, int steps)
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
        if (std::fabs(p[i] - want) > 1e-3 * (1.0 + std::fabs(want)))
            wrong++;
    }
    (void)o;
    return wrong;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, nranks = 1, ndev = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    int status = 0;
    try {
        Options o = parse(argc, argv);
        CUDA_OK(cudaGetDeviceCount(&ndev));
        CUDA_OK(cudaSetDevice(rank % ndev));
        Communicator comm(rank, nranks);
        Stream stream;
        DeviceBuffer<float> params(o.n), grad(o.n), input(o.m), act(o.m);
        init_params<<<256, 256, 0, stream.get()>>>(params.data(), params.size());
        init_params<<<256, 256, 0, stream.get()>>>(input.data(), input.size());
        train(comm, stream, params, grad, input, act, o, 0);
        CUDA_OK(cudaStreamSynchronize(stream.get()));
        std::vector<float> host(o.n);
        CUDA_OK(cudaMemcpy(host.data(), params.data(), o.n * sizeof(float), cudaMemcpyDeviceToHost));
        int wrong = count_wrong(host, o, nranks, o.steps), all = 0;

        // timing: more steps from fresh parameters, checked again after
        init_params<<<256, 256, 0, stream.get()>>>(params.data(), params.size());
        cudaEvent_t a, b;
        CUDA_OK(cudaEventCreate(&a));
        CUDA_OK(cudaEventCreate(&b));
        MPI_Barrier(MPI_COMM_WORLD);
        CUDA_OK(cudaEventRecord(a, stream.get()));
        train(comm, stream, params, grad, input, act, o, 0);
        CUDA_OK(cudaEventRecord(b, stream.get()));
        CUDA_OK(cudaEventSynchronize(b));
        float ms = 0.0f;
        CUDA_OK(cudaEventElapsedTime(&ms, a, b));
        CUDA_OK(cudaMemcpy(host.data(), params.data(), o.n * sizeof(float), cudaMemcpyDeviceToHost));
        wrong += count_wrong(host, o, nranks, o.steps);
        MPI_Allreduce(&wrong, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        if (rank == 0) {
            if (all == 0)
                std::printf("Verification: PASS\n");
            else
                std::printf("Verification: FAIL %d parameters wrong\n", all);
            std::printf("CUCO_RESULT {\"time_ms\": %.6f, \"iters\": %d}\n", ms / o.steps, o.steps);
        }
        CUDA_OK(cudaEventDestroy(a));
        CUDA_OK(cudaEventDestroy(b));
    } catch (const std::exception &ex) {
        std::fprintf(stderr, "rank %d: %s\n", rank, ex.what());
        status = 1;
    }
    MPI_Finalize();
    return status;
}
