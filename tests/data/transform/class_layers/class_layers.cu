// class_layers.cu: two tensor-parallel linear layers written as a small C++
// library (namespace tp). RowParallelLinear holds this rank's slice of the
// input features; its local GEMV gives a partial output that the ranks sum
// with an in-place all-reduce before the bias is added. ColumnParallelLinear
// holds this rank's slice of the output features; the shards are collected
// with an all-gather and an activation reads the gathered vector. Between
// each collective and its consumer an independent kernel runs on another
// object's buffer (a prefetch/scale of the next layer's weights, a norm of an
// auxiliary activation). Members are used without this->, buffers are owned
// by the layer objects (cudaMalloc in the constructor, cudaFree in the
// destructor), and errors throw.
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#define CUDA_CHECK(x)                                                                              \
    do {                                                                                           \
        cudaError_t err_ = (x);                                                                    \
        if (err_ != cudaSuccess)                                                                   \
            throw std::runtime_error(std::string(#x) + ": " + cudaGetErrorString(err_));           \
    } while (0)
#define NCCL_CHECK(x)                                                                              \
    do {                                                                                           \
        ncclResult_t res_ = (x);                                                                   \
        if (res_ != ncclSuccess)                                                                   \
            throw std::runtime_error(std::string(#x) + ": " + ncclGetErrorString(res_));           \
    } while (0)

namespace tp {

constexpr int kInLocal = 16; // input features per rank (row parallel) / full input (column parallel)

__host__ __device__ inline float x_value(int k, int rank, int step)
{
    return (float)((k * 3 + rank * 5 + step * 7) % 11) / 8.0f;
}
__host__ __device__ inline float w_value(size_t j, int k, int rank)
{
    return (float)((j * 5 + (size_t)k * 3 + (size_t)rank) % 13) / 16.0f - 0.25f;
}
__host__ __device__ inline float b_value(size_t j) { return (float)(j % 7) / 4.0f; }

__global__ void fill_weights(float *w, size_t rows, int cols, int rank, size_t row0)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < rows * cols;
         i += (size_t)gridDim.x * blockDim.x)
        w[i] = w_value(row0 + i / cols, (int)(i % cols), rank);
}

__global__ void fill_bias(float *b, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        b[i] = b_value(i);
}

__global__ void fill_input(float *x, int n, int rank, int step)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] = x_value(i, rank, step);
}

// out[j] = sum_k w[j, k] * x[k]  (w row-major rows x cols)
__global__ void local_gemv(const float *w, const float *x, float *out, size_t rows, int cols)
{
    for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < rows; j += (size_t)gridDim.x * blockDim.x) {
        float acc = 0.0f;
        for (int k = 0; k < cols; k++)
            acc = fmaf(w[j * cols + k], x[k], acc);
        out[j] = acc;
    }
}

__global__ void bias_add(const float *partial, const float *bias, float *y, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        y[i] = partial[i] + bias[i];
}

// next layer's weights: staged and scaled while the all-reduce runs
__global__ void prefetch_scale(const float *w, float *staged, size_t n, float scale, int rounds)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float v = w[i], a = 0.0f;
        for (int r = 0; r < rounds; r++)
            a = fmaf(a, 0.5f, v);
        staged[i] = a * scale;
    }
}

// an auxiliary activation's RMS-like normalisation, independent of the layer
__global__ void aux_norm(const float *a, float *out, size_t n, int rounds)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float v = a[i], acc = 0.0f;
        for (int r = 0; r < rounds; r++)
            acc = fmaf(acc, 0.25f, v * v);
        out[i] = acc;
    }
}

__global__ void relu_scale(const float *in, float *out, size_t n, float scale)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = fmaxf(in[i], 0.0f) * scale;
}

class Comm {
public:
    Comm(int rank, int nranks) : rank_(rank), nranks_(nranks)
    {
        ncclUniqueId id;
        if (rank == 0)
            NCCL_CHECK(ncclGetUniqueId(&id));
        MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
        NCCL_CHECK(ncclCommInitRank(&comm_, nranks, id, rank));
    }
    ~Comm() { ncclCommDestroy(comm_); }
    Comm(const Comm &) = delete;
    Comm &operator=(const Comm &) = delete;
    ncclComm_t get() const { return comm_; }
    int rank() const { return rank_; }
    int size() const { return nranks_; }

private:
    ncclComm_t comm_ = nullptr;
    int rank_, nranks_;
};

class RowParallelLinear {
public:
    RowParallelLinear(Comm &comm, int in, int out);
    ~RowParallelLinear();
    RowParallelLinear(const RowParallelLinear &) = delete;
    RowParallelLinear &operator=(const RowParallelLinear &) = delete;
    void forward(const float *x, float *y, cudaStream_t s, const float *next_w, float *staged, size_t next_n,
                 int rounds);
    int out() const { return out_; }

private:
    float *w_ = nullptr;
    float *partial_ = nullptr;
    float *bias_ = nullptr;
    int in_, out_;
    Comm &comm_;
};

RowParallelLinear::RowParallelLinear(Comm &comm, int in, int out) : in_(in), out_(out), comm_(comm)
{
    CUDA_CHECK(cudaMalloc(&w_, (size_t)in_ * out_ * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&partial_, (size_t)out_ * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&bias_, (size_t)out_ * sizeof(float)));
    fill_weights<<<256, 256>>>(w_, out_, in_, comm_.rank(), 0);
    fill_bias<<<256, 256>>>(bias_, out_);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaDeviceSynchronize());
}

RowParallelLinear::~RowParallelLinear()
{
    cudaFree(w_);
    cudaFree(partial_);
    cudaFree(bias_);
}

void RowParallelLinear::forward(const float *x, float *y, cudaStream_t s, const float *next_w, float *staged,
                                size_t next_n, int rounds)
{
    const size_t n = (size_t)out_;
    local_gemv<<<512, 256, 0, s>>>(w_, x, partial_, n, in_);
    NCCL_CHECK(ncclAllReduce(partial_, partial_, n, ncclFloat, ncclSum, comm_.get(), s));
    prefetch_scale<<<512, 256, 0, s>>>(next_w, staged, next_n, 0.5f, rounds);
    bias_add<<<256, 256, 0, s>>>(partial_, bias_, y, n);
}

class ColumnParallelLinear {
public:
    ColumnParallelLinear(Comm &comm, int in, int out);
    ~ColumnParallelLinear();
    ColumnParallelLinear(const ColumnParallelLinear &) = delete;
    ColumnParallelLinear &operator=(const ColumnParallelLinear &) = delete;
    void forward(const float *x, float *y, cudaStream_t s, const float *aux, float *aux_out, size_t aux_n,
                 int rounds);
    const float *weights() const { return w_; }
    size_t weight_count() const { return (size_t)in_ * out_local_; }
    size_t out_total() const { return out_local_ * (size_t)comm_.size(); }

private:
    float *w_ = nullptr;
    float *shard_ = nullptr;
    float *gathered_ = nullptr;
    int in_;
    size_t out_local_;
    Comm &comm_;
};

ColumnParallelLinear::ColumnParallelLinear(Comm &comm, int in, int out) : in_(in), comm_(comm)
{
    out_local_ = (size_t)out / comm_.size();
    CUDA_CHECK(cudaMalloc(&w_, (size_t)in_ * out_local_ * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&shard_, out_local_ * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&gathered_, out_local_ * comm_.size() * sizeof(float)));
    // rank r owns output rows [r*out_local_, (r+1)*out_local_); the weights do not depend on the rank
    fill_weights<<<256, 256>>>(w_, out_local_, in_, 0, (size_t)comm_.rank() * out_local_);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaDeviceSynchronize());
}

ColumnParallelLinear::~ColumnParallelLinear()
{
    cudaFree(w_);
    cudaFree(shard_);
    cudaFree(gathered_);
}

void ColumnParallelLinear::forward(const float *x, float *y, cudaStream_t s, const float *aux, float *aux_out,
                                   size_t aux_n, int rounds)
{
    local_gemv<<<512, 256, 0, s>>>(w_, x, shard_, out_local_, in_);
    NCCL_CHECK(ncclAllGather(shard_, gathered_, out_local_, ncclFloat, comm_.get(), s));
    aux_norm<<<512, 256, 0, s>>>(aux, aux_out, aux_n, rounds);
    relu_scale<<<256, 256, 0, s>>>(gathered_, y, out_local_ * comm_.size(), 2.0f);
}

} // namespace tp

struct Options {
    int n = 4096;
    int steps = 3;
    int rounds = 64;
};

static Options parse(int argc, char **argv)
{
    Options o;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string k = argv[i];
        long v = std::atol(argv[i + 1]);
        if (k == "--n")
            o.n = (int)v;
        else if (k == "--steps")
            o.steps = (int)v;
        else if (k == "--rounds")
            o.rounds = (int)v;
    }
    return o;
}

struct Buffers {
    float *x_row = nullptr, *x_col = nullptr, *y_row = nullptr, *y_col = nullptr, *staged = nullptr,
          *aux_out = nullptr;
};

static void run_steps(tp::RowParallelLinear &row, tp::ColumnParallelLinear &col, const Buffers &b,
                      const Options &o, int rank, cudaStream_t s)
{
    for (int step = 0; step < o.steps; step++) {
        tp::fill_input<<<1, 64, 0, s>>>(b.x_row, tp::kInLocal, rank, step);
        tp::fill_input<<<1, 64, 0, s>>>(b.x_col, tp::kInLocal, 0, step + 1);
        row.forward(b.x_row, b.y_row, s, col.weights(), b.staged, col.weight_count(), o.rounds);
        col.forward(b.x_col, b.y_col, s, b.y_row, b.aux_out, (size_t)row.out(), o.rounds);
    }
}

// host reference of the last step, on a sample of the outputs
static int count_wrong(const std::vector<float> &y_row, const std::vector<float> &y_col, int nranks,
                       int last_step)
{
    int wrong = 0;
    size_t stride = y_row.size() > 4096 ? y_row.size() / 1024 : 1;
    for (size_t j = 0; j < y_row.size(); j += stride) {
        double want = tp::b_value(j);
        for (int r = 0; r < nranks; r++)
            for (int k = 0; k < tp::kInLocal; k++)
                want += (double)tp::w_value(j, k, r) * tp::x_value(k, r, last_step);
        if (std::fabs(y_row[j] - want) > 1e-3 * (1.0 + std::fabs(want)))
            wrong++;
    }
    stride = y_col.size() > 4096 ? y_col.size() / 1024 : 1;
    for (size_t j = 0; j < y_col.size(); j += stride) {
        double acc = 0.0;
        for (int k = 0; k < tp::kInLocal; k++)
            acc += (double)tp::w_value(j, k, 0) * tp::x_value(k, 0, last_step + 1);
        double want = (acc > 0.0 ? acc : 0.0) * 2.0;
        if (std::fabs(y_col[j] - want) > 1e-3 * (1.0 + std::fabs(want)))
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
    int status = 0;
    try {
        Options o = parse(argc, argv);
        CUDA_CHECK(cudaGetDeviceCount(&ndev));
        CUDA_CHECK(cudaSetDevice(rank % ndev));
        tp::Comm comm(rank, nranks);
        cudaStream_t s;
        CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        {
            const int n = o.n - o.n % nranks; // column-parallel output splits evenly
            tp::RowParallelLinear row(comm, tp::kInLocal, n);
            tp::ColumnParallelLinear col(comm, tp::kInLocal, n);
            Buffers b;
            CUDA_CHECK(cudaMalloc(&b.x_row, tp::kInLocal * sizeof(float)));
            CUDA_CHECK(cudaMalloc(&b.x_col, tp::kInLocal * sizeof(float)));
            CUDA_CHECK(cudaMalloc(&b.y_row, (size_t)n * sizeof(float)));
            CUDA_CHECK(cudaMalloc(&b.y_col, col.out_total() * sizeof(float)));
            CUDA_CHECK(cudaMalloc(&b.staged, col.weight_count() * sizeof(float)));
            CUDA_CHECK(cudaMalloc(&b.aux_out, (size_t)n * sizeof(float)));

            run_steps(row, col, b, o, rank, s);
            CUDA_CHECK(cudaStreamSynchronize(s));
            std::vector<float> y_row(n), y_col(col.out_total());
            CUDA_CHECK(cudaMemcpy(y_row.data(), b.y_row, y_row.size() * sizeof(float), cudaMemcpyDeviceToHost));
            CUDA_CHECK(cudaMemcpy(y_col.data(), b.y_col, y_col.size() * sizeof(float), cudaMemcpyDeviceToHost));
            int wrong = count_wrong(y_row, y_col, nranks, o.steps - 1), all = 0;

            cudaEvent_t t0, t1;
            CUDA_CHECK(cudaEventCreate(&t0));
            CUDA_CHECK(cudaEventCreate(&t1));
            MPI_Barrier(MPI_COMM_WORLD);
            CUDA_CHECK(cudaEventRecord(t0, s));
            run_steps(row, col, b, o, rank, s);
            CUDA_CHECK(cudaEventRecord(t1, s));
            CUDA_CHECK(cudaEventSynchronize(t1));
            float ms = 0.0f;
            CUDA_CHECK(cudaEventElapsedTime(&ms, t0, t1));
            CUDA_CHECK(cudaMemcpy(y_row.data(), b.y_row, y_row.size() * sizeof(float), cudaMemcpyDeviceToHost));
            CUDA_CHECK(cudaMemcpy(y_col.data(), b.y_col, y_col.size() * sizeof(float), cudaMemcpyDeviceToHost));
            wrong += count_wrong(y_row, y_col, nranks, o.steps - 1);
            MPI_Allreduce(&wrong, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
            if (rank == 0) {
                if (all == 0)
                    std::printf("Verification: PASS\n");
                else
                    std::printf("Verification: FAIL %d outputs wrong\n", all);
                std::printf("CUCO_RESULT {\"time_ms\": %.6f, \"iters\": %d}\n", ms / o.steps, o.steps);
            }
            CUDA_CHECK(cudaEventDestroy(t0));
            CUDA_CHECK(cudaEventDestroy(t1));
            cudaFree(b.x_row);
            cudaFree(b.x_col);
            cudaFree(b.y_row);
            cudaFree(b.y_col);
            cudaFree(b.staged);
            cudaFree(b.aux_out);
        }
        CUDA_CHECK(cudaStreamDestroy(s));
    } catch (const std::exception &ex) {
        std::fprintf(stderr, "rank %d: %s\n", rank, ex.what());
        status = 1;
    }
    MPI_Finalize();
    return status;
}
