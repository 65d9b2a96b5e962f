// uptr_mlp.cu: one sequence-parallel transformer MLP step over the ranks,
// written in C++17 with every device buffer owned by a
// std::unique_ptr<float, CudaFree> made by a make_device<T>(n) factory and
// handed to kernels, cuBLAS and NCCL through .get(). The step is a free
// function over a Workspace& that owns the buffers, the cuBLAS handle, the
// communicator and the stream.
//
//   x_full  = AllGather(x_shard)                (tokens of every rank)
//   next_ln = LayerNorm(next_in)                (next micro-batch, independent)
//   hidden  = x_full * W_up_r                   (cublasSgemm, rank's ffn slice)
//   hidden  = gelu(hidden)
//   partial = hidden * W_down_r                 (cublasSgemm, partial sums)
//   out     = ReduceScatter(partial)            (rank's tokens, summed)
//   stats   = rowsum(next_ln)                   (independent)
//   y       = out + x_shard                     (residual, the consumer)
//
// Usage: uptr_mlp [--tokens T] [--hidden H] [--steps S]
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
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
#define BLAS_OK(x)                                                                                 \
    do {                                                                                           \
        cublasStatus_t s_ = (x);                                                                   \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                           \
            throw std::runtime_error(std::string(#x) + ": cuBLAS status " + std::to_string((int)s_)); \
    } while (0)

struct CudaFree {
    void operator()(void *p) const noexcept
    {
        if (p)
            cudaFree(p);
    }
};

template <class T> using device_ptr = std::unique_ptr<T, CudaFree>;

template <class T> std::unique_ptr<T, CudaFree> make_device(size_t n)
{
    T *p = nullptr;
    CUDA_OK(cudaMalloc(reinterpret_cast<void **>(&p), n * sizeof(T)));
    return std::unique_ptr<T, CudaFree>(p);
}

// Deterministic values in [-0.5, 0.5) from an index and a salt.
__host__ __device__ inline float hval(unsigned long long i, unsigned salt)
{
    unsigned long long z = i * 0x9E3779B97F4A7C15ull + salt * 0xD1B54A32D192ED03ull;
    z = (z ^ (z >> 31)) * 0xBF58476D1CE4E5B9ull;
    z ^= z >> 29;
    return (float)((z >> 40) & 0xFFFF) / 65536.0f - 0.5f;
}

__host__ __device__ inline float gelu(float x)
{
    const float k = 0.7978845608f; // sqrt(2/pi)
    return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
}

__global__ void fill(float *p, size_t n, unsigned long long base, unsigned salt, float scale)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = scale * hval(base + i, salt);
}

__global__ void gelu_inplace(float *h, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        h[i] = gelu(h[i]);
}

// One block per row: y = (x - mean) / sqrt(var + eps).
__global__ void layer_norm(const float *__restrict__ x, float *__restrict__ y, int rows, int cols)
{
    __shared__ float red[2][32];
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *xr = x + (size_t)r * cols;
        float s = 0.f, ss = 0.f;
        for (int c = threadIdx.x; c < cols; c += blockDim.x) {
            float v = xr[c];
            s += v;
            ss += v * v;
        }
        for (int o = 16; o > 0; o >>= 1) {
            s += __shfl_down_sync(0xffffffffu, s, o);
            ss += __shfl_down_sync(0xffffffffu, ss, o);
        }
        int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
        if (lane == 0) {
            red[0][warp] = s;
            red[1][warp] = ss;
        }
        __syncthreads();
        if (warp == 0) {
            int nw = blockDim.x >> 5;
            s = lane < nw ? red[0][lane] : 0.f;
            ss = lane < nw ? red[1][lane] : 0.f;
            for (int o = 16; o > 0; o >>= 1) {
                s += __shfl_down_sync(0xffffffffu, s, o);
                ss += __shfl_down_sync(0xffffffffu, ss, o);
            }
            if (lane == 0) {
                red[0][0] = s;
                red[1][0] = ss;
            }
        }
        __syncthreads();
        float mean = red[0][0] / cols;
        float var = red[1][0] / cols - mean * mean;
        float inv = rsqrtf(fmaxf(var, 0.f) + 1e-5f);
        for (int c = threadIdx.x; c < cols; c += blockDim.x)
            y[(size_t)r * cols + c] = (xr[c] - mean) * inv;
        __syncthreads();
    }
}

__global__ void row_sums(const float *__restrict__ x, float *__restrict__ out, int rows, int cols)
{
    for (int r = blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += gridDim.x * blockDim.x) {
        float s = 0.f;
        for (int c = 0; c < cols; c++)
            s += x[(size_t)r * cols + c];
        out[r] = s;
    }
}

__global__ void residual_add(const float *__restrict__ a, const float *__restrict__ b, float *__restrict__ y, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        y[i] = a[i] + b[i];
}

struct Options {
    int tokens = 64;  // tokens per rank
    int hidden = 64;  // model dimension
    int steps = 3;
};

// Everything one rank's MLP step touches. Row-major activations:
// x_shard [T][H], x_full [R*T][H], hidden [R*T][F/R], partial [R*T][H],
// out_shard [T][H]. The rank holds columns [r*F/R, (r+1)*F/R) of W_up and
// the same rows of W_down (tensor parallel over the ffn dimension).
struct Workspace {
    int rank = 0, nranks = 1, tokens = 0, dim = 0, ffn_local = 0;
    ncclComm_t comm = nullptr;
    cudaStream_t stream = nullptr;
    cublasHandle_t blas = nullptr;
    device_ptr<float> x_shard, x_full, w_up, w_down, hidden, partial, out_shard, y;
    device_ptr<float> next_in, next_ln, next_stats;
};

static void setup(Workspace &ws, ncclComm_t comm, int rank, int nranks, const Options &o)
{
    ws.rank = rank;
    ws.nranks = nranks;
    ws.tokens = o.tokens;
    ws.dim = o.hidden;
    ws.ffn_local = 4 * o.hidden / nranks;
    ws.comm = comm;
    CUDA_OK(cudaStreamCreateWithFlags(&ws.stream, cudaStreamNonBlocking));
    BLAS_OK(cublasCreate(&ws.blas));
    BLAS_OK(cublasSetStream(ws.blas, ws.stream));
    BLAS_OK(cublasSetMathMode(ws.blas, CUBLAS_PEDANTIC_MATH));
    const size_t T = ws.tokens, H = ws.dim, F = ws.ffn_local, all = T * nranks;
    ws.x_shard = make_device<float>(T * H);
    ws.x_full = make_device<float>(all * H);
    ws.w_up = make_device<float>(H * F);
    ws.w_down = make_device<float>(F * H);
    ws.hidden = make_device<float>(all * F);
    ws.partial = make_device<float>(all * H);
    ws.out_shard = make_device<float>(T * H);
    ws.y = make_device<float>(T * H);
    ws.next_in = make_device<float>(T * H);
    ws.next_ln = make_device<float>(T * H);
    ws.next_stats = make_device<float>(T);
    // x_shard: global token rows [rank*T, (rank+1)*T); weights: the rank's slices.
    fill<<<256, 256, 0, ws.stream>>>(ws.x_shard.get(), T * H, (unsigned long long)rank * T * H, 1, 1.0f);
    fill<<<256, 256, 0, ws.stream>>>(ws.w_up.get(), H * F, (unsigned long long)rank * H * F, 2, 0.25f);
    fill<<<256, 256, 0, ws.stream>>>(ws.w_down.get(), F * H, (unsigned long long)rank * F * H, 3, 0.25f);
    fill<<<256, 256, 0, ws.stream>>>(ws.next_in.get(), T * H, (unsigned long long)rank * T * H, 4, 1.0f);
    CUDA_OK(cudaGetLastError());
}

static void teardown(Workspace &ws)
{
    CUDA_OK(cudaStreamSynchronize(ws.stream));
    cublasDestroy(ws.blas);
    cudaStreamDestroy(ws.stream);
}

static void mlp_step(Workspace &ws)
{
    const float one = 1.0f, zero = 0.0f;
    const int T = ws.tokens, H = ws.dim, F = ws.ffn_local, all = T * ws.nranks;
    cudaStream_t s = ws.stream;

    NCCL_OK(ncclAllGather(ws.x_shard.get(), ws.x_full.get(), (size_t)T * H, ncclFloat, ws.comm, s));
    layer_norm<<<T, 128, 0, s>>>(ws.next_in.get(), ws.next_ln.get(), T, H);
    // column-major: hidden^T [F x all] = W_up^T [F x H] * x_full^T [H x all]
    BLAS_OK(cublasSgemm(ws.blas, CUBLAS_OP_N, CUBLAS_OP_N, F, all, H, &one, ws.w_up.get(), F,
                        ws.x_full.get(), H, &zero, ws.hidden.get(), F));
    gelu_inplace<<<512, 256, 0, s>>>(ws.hidden.get(), (size_t)all * F);
    // partial^T [H x all] = W_down^T [H x F] * hidden^T [F x all]
    BLAS_OK(cublasSgemm(ws.blas, CUBLAS_OP_N, CUBLAS_OP_N, H, all, F, &one, ws.w_down.get(), H,
                        ws.hidden.get(), F, &zero, ws.partial.get(), H));
    NCCL_OK(ncclReduceScatter(ws.partial.get(), ws.out_shard.get(), (size_t)T * H, ncclFloat, ncclSum, ws.comm, s));
    row_sums<<<(T + 127) / 128, 128, 0, s>>>(ws.next_ln.get(), ws.next_stats.get(), T, H);
    residual_add<<<256, 256, 0, s>>>(ws.out_shard.get(), ws.x_shard.get(), ws.y.get(), (size_t)T * H);
}

// Host reference for the rank's local token t: y = sum_r gelu(x W_up_r) W_down_r + x.
static int check_row(const Workspace &ws, const std::vector<float> &y, int t)
{
    const int H = ws.dim, F = ws.ffn_local, R = ws.nranks;
    const unsigned long long g = (unsigned long long)ws.rank * ws.tokens + t;
    std::vector<double> want(H, 0.0), mag(H, 0.0);
    std::vector<float> x(H);
    for (int i = 0; i < H; i++)
        x[i] = hval(g * H + i, 1);
    for (int r = 0; r < R; r++) {
        const unsigned long long wb = (unsigned long long)r * H * F;
        for (int j = 0; j < F; j++) {
            double h = 0.0;
            for (int i = 0; i < H; i++)
                h += (double)x[i] * (0.25f * hval(wb + (unsigned long long)i * F + j, 2));
            double a = gelu((float)h);
            for (int o = 0; o < H; o++) {
                double w = 0.25f * hval(wb + (unsigned long long)j * H + o, 3);
                want[o] += a * w;
                mag[o] += std::fabs(a * w);
            }
        }
    }
    int bad = 0;
    for (int o = 0; o < H; o++) {
        double w = want[o] + x[o];
        double got = y[(size_t)t * H + o];
        if (std::fabs(got - w) > 1e-3 * (mag[o] + std::fabs(x[o])) + 1e-4)
            bad++;
    }
    return bad;
}

static Options parse(int argc, char **argv)
{
    Options o;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string k = argv[i];
        int v = std::atoi(argv[i + 1]);
        if (k == "--tokens")
            o.tokens = v;
        else if (k == "--hidden")
            o.hidden = v;
        else if (k == "--steps")
            o.steps = v;
    }
    return o;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, nranks = 1, ndev = 1, status = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    try {
        const Options o = parse(argc, argv);
        CUDA_OK(cudaGetDeviceCount(&ndev));
        CUDA_OK(cudaSetDevice(rank % ndev));
        ncclUniqueId id;
        if (rank == 0)
            NCCL_OK(ncclGetUniqueId(&id));
        MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
        ncclComm_t comm;
        NCCL_OK(ncclCommInitRank(&comm, nranks, id, rank));
        {
            Workspace ws;
            setup(ws, comm, rank, nranks, o);

            mlp_step(ws);
            CUDA_OK(cudaStreamSynchronize(ws.stream));
            const size_t T = ws.tokens, H = ws.dim;
            std::vector<float> y(T * H);
            CUDA_OK(cudaMemcpy(y.data(), ws.y.get(), y.size() * sizeof(float), cudaMemcpyDeviceToHost));
            int bad = 0, bad_all = 0;
            for (int t : {0, (int)T / 2, (int)T - 1})
                bad += check_row(ws, y, t);

            MPI_Barrier(MPI_COMM_WORLD);
            auto t0 = std::chrono::steady_clock::now();
            for (int k = 0; k < o.steps; k++)
                mlp_step(ws);
            CUDA_OK(cudaStreamSynchronize(ws.stream));
            double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

            CUDA_OK(cudaMemcpy(y.data(), ws.y.get(), y.size() * sizeof(float), cudaMemcpyDeviceToHost));
            for (int t : {1, (int)T / 3, (int)T - 2})
                bad += check_row(ws, y, t);
            MPI_Allreduce(&bad, &bad_all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
            if (rank == 0) {
                if (bad_all == 0)
                    std::printf("Verification: PASS\n");
                else
                    std::printf("Verification: FAIL %d output values wrong\n", bad_all);
                std::printf("CUCO_RESULT {\"time_ms\": %.6f, \"iters\": %d}\n", ms / (o.steps > 0 ? o.steps : 1),
                            o.steps);
            }
            teardown(ws);
        }
        NCCL_OK(ncclCommDestroy(comm));
    } catch (const std::exception &ex) {
        std::fprintf(stderr, "rank %d: %s\n", rank, ex.what());
        status = 1;
    }
    MPI_Finalize();
    return status;
}
