// lt_tp_mlp.cu: a tensor-parallel MLP block on cuBLASLt, in the style of
// engines that keep their matmul descriptors and a heuristic's algorithm per
// layer. The tokens come sequence-sharded: an all-gather collects every
// rank's rows, the up projection (this rank's slice of the FFN columns)
// reads them with cublasLtMatmul, an activation follows, the down projection
// (the matching rows of the down weight) writes a partial output with
// cublasLtMatmul, and an in-place all-reduce sums the partials. The
// transform's consumer_split_by_source splits the up projection by source
// rank, and producer_split reduces the down projection's output in ranges
// as they are made. Verified against a host reference for a few tokens.
//
// Usage: lt_tp_mlp [--tokens T] [--dim D] [--ffn F] [--layers L] [--iters I]
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CUDA_OK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { fprintf(stderr, "%s:%d CUDA: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); MPI_Abort(MPI_COMM_WORLD, 1); } } while (0)
#define NCCL_OK(x) do { ncclResult_t r_ = (x); if (r_ != ncclSuccess) { fprintf(stderr, "%s:%d NCCL: %s\n", __FILE__, __LINE__, ncclGetErrorString(r_)); MPI_Abort(MPI_COMM_WORLD, 1); } } while (0)
#define LT_OK(x) do { cublasStatus_t s_ = (x); if (s_ != CUBLAS_STATUS_SUCCESS) { fprintf(stderr, "%s:%d cuBLASLt: %d\n", __FILE__, __LINE__, (int)s_); MPI_Abort(MPI_COMM_WORLD, 1); } } while (0)

// Deterministic values in [-0.5, 0.5) from an index.
__host__ __device__ inline float hval(unsigned long long i, unsigned salt)
{
    unsigned long long z = i * 0x9E3779B97F4A7C15ull + salt;
    z = (z ^ (z >> 31)) * 0xBF58476D1CE4E5B9ull;
    return (float)((z >> 40) & 0xFFFF) / 65536.0f - 0.5f;
}

__global__ void fill(float *p, size_t n, unsigned long long base, unsigned salt)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = hval(base + i, salt);
}

// Rows [row0, row0 + rows) of a column-major matrix with ld_full rows: p is
// rows x cols, column-major.
__global__ void fill_rows(float *p, int rows, int cols, int ld_full, int row0, unsigned salt)
{
    size_t n = (size_t)rows * cols;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = hval((i / rows) * (unsigned long long)ld_full + row0 + i % rows, salt);
}

__host__ __device__ inline float act(float x) { return x > 0.f ? x + 0.125f * x * x : 0.0625f * x; }

__global__ void activate(float *h, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        h[i] = act(h[i]);
}

// One matmul's descriptors: D[m x n] = A[m x k] B[k x n], column-major, fp32,
// and the heuristic's first algorithm for that shape.
struct LtShape {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
    cublasLtMatmulAlgo_t algo;

    void make(cublasLtHandle_t lt, int m, int n, int k, size_t workspace)
    {
        LT_OK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
        LT_OK(cublasLtMatrixLayoutCreate(&a, CUDA_R_32F, m, k, m));
        LT_OK(cublasLtMatrixLayoutCreate(&b, CUDA_R_32F, k, n, k));
        LT_OK(cublasLtMatrixLayoutCreate(&d, CUDA_R_32F, m, n, m));
        cublasLtMatmulPreference_t pref;
        LT_OK(cublasLtMatmulPreferenceCreate(&pref));
        LT_OK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                                   sizeof workspace));
        cublasLtMatmulHeuristicResult_t found;
        int count = 0;
        LT_OK(cublasLtMatmulAlgoGetHeuristic(lt, op, a, b, d, d, pref, 1, &found, &count));
        if (count < 1) {
            fprintf(stderr, "cuBLASLt: no algorithm for %d x %d x %d\n", m, n, k);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        algo = found.algo;
        cublasLtMatmulPreferenceDestroy(pref);
    }
    void destroy()
    {
        cublasLtMatrixLayoutDestroy(a);
        cublasLtMatrixLayoutDestroy(b);
        cublasLtMatrixLayoutDestroy(d);
        cublasLtMatmulDescDestroy(op);
    }
};

class TpMlp {
  public:
    TpMlp(ncclComm_t comm, int rank, int nranks, int tokens, int dim, int ffn)
        : comm_(comm), rank_(rank), nranks_(nranks), t_(tokens), d_(dim), ffn_(ffn), fl_(ffn / nranks)
    {
        CUDA_OK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
        LT_OK(cublasLtCreate(&lt_));
        const int all = t_ * nranks_;
        CUDA_OK(cudaMalloc(&x_local_, (size_t)t_ * d_ * sizeof(float)));
        CUDA_OK(cudaMalloc(&x_all_, (size_t)all * d_ * sizeof(float)));
        CUDA_OK(cudaMalloc(&w_up_, (size_t)fl_ * d_ * sizeof(float)));
        CUDA_OK(cudaMalloc(&w_down_, (size_t)d_ * fl_ * sizeof(float)));
        CUDA_OK(cudaMalloc(&hidden_, (size_t)fl_ * all * sizeof(float)));
        CUDA_OK(cudaMalloc(&out_, (size_t)d_ * all * sizeof(float)));
        CUDA_OK(cudaMalloc(&workspace_, kWorkspace));
        fill<<<256, 256, 0, stream_>>>(x_local_, (size_t)t_ * d_, (unsigned long long)rank_ * t_ * d_, 1);
        // this rank's FFN slice: rows of the up weight (ffn x dim), columns of the down one (dim x ffn)
        fill_rows<<<256, 256, 0, stream_>>>(w_up_, fl_, d_, ffn_, rank_ * fl_, 2);
        fill<<<256, 256, 0, stream_>>>(w_down_, (size_t)d_ * fl_, (unsigned long long)rank_ * fl_ * d_, 3);
        CUDA_OK(cudaGetLastError());
        up_.make(lt_, fl_, all, d_, kWorkspace);
        down_.make(lt_, d_, all, fl_, kWorkspace);
    }
    ~TpMlp()
    {
        CUDA_OK(cudaStreamSynchronize(stream_));
        up_.destroy();
        down_.destroy();
        cudaFree(x_local_);
        cudaFree(x_all_);
        cudaFree(w_up_);
        cudaFree(w_down_);
        cudaFree(hidden_);
        cudaFree(out_);
        cudaFree(workspace_);
        cublasLtDestroy(lt_);
        cudaStreamDestroy(stream_);
    }

    void forward()
    {
        const float one = 1.0f, zero = 0.0f;
        const int all = t_ * nranks_;
        NCCL_OK(ncclAllGather(x_local_, x_all_, (size_t)t_ * d_, ncclFloat32, comm_, stream_));
        LT_OK(cublasLtMatmul(lt_, up_.op, &one, w_up_, up_.a, x_all_, up_.b, &zero, hidden_, up_.d, hidden_,
                             up_.d, &up_.algo, workspace_, kWorkspace, stream_));
        activate<<<1024, 256, 0, stream_>>>(hidden_, (size_t)fl_ * all);
        LT_OK(cublasLtMatmul(lt_, down_.op, &one, w_down_, down_.a, hidden_, down_.b, &zero, out_, down_.d, out_,
                             down_.d, &down_.algo, workspace_, kWorkspace, stream_));
        NCCL_OK(ncclAllReduce(out_, out_, (size_t)d_ * all, ncclFloat32, ncclSum, comm_, stream_));
    }

    void sync() { CUDA_OK(cudaStreamSynchronize(stream_)); }

    // Global token g's output row against a host reference.
    int check_token(int g) const
    {
        std::vector<float> row(d_);
        CUDA_OK(cudaMemcpy(row.data(), out_ + (size_t)g * d_, d_ * sizeof(float), cudaMemcpyDeviceToHost));
        int bad = 0;
        std::vector<double> a(ffn_);
        for (int j = 0; j < ffn_; j++) {
            double h = 0.0;
            for (int i = 0; i < d_; i++)
                h += (double)hval((unsigned long long)g * d_ + i, 1) * hval((unsigned long long)i * ffn_ + j, 2);
            a[j] = act((float)h);
        }
        for (int o = 0; o < d_; o++) {
            double want = 0.0, mag = 0.0;
            for (int j = 0; j < ffn_; j++) {
                double w = hval((unsigned long long)j * d_ + o, 3);
                want += a[j] * w;
                mag += std::fabs(a[j] * w);
            }
            bad += std::fabs(row[o] - want) > 1e-4 * mag + 1e-5;
        }
        return bad;
    }

  private:
    static constexpr size_t kWorkspace = 4u << 20;
    ncclComm_t comm_;
    int rank_, nranks_, t_, d_, ffn_, fl_;
    cudaStream_t stream_ = nullptr;
    cublasLtHandle_t lt_ = nullptr;
    LtShape up_, down_;
    void *workspace_ = nullptr;
    float *x_local_ = nullptr, *x_all_ = nullptr, *w_up_ = nullptr, *w_down_ = nullptr;
    float *hidden_ = nullptr, *out_ = nullptr;
};

static int opt(int argc, char **argv, const char *name, int dflt)
{
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], name) == 0)
            return (int)strtol(argv[i + 1], NULL, 10);
    return dflt;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, nranks = 1, ndev = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    CUDA_OK(cudaGetDeviceCount(&ndev));
    CUDA_OK(cudaSetDevice(rank % ndev));
    ncclUniqueId id;
    if (rank == 0)
        NCCL_OK(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    ncclComm_t comm;
    NCCL_OK(ncclCommInitRank(&comm, nranks, id, rank));
    const int tokens = opt(argc, argv, "--tokens", 512), dim = opt(argc, argv, "--dim", 256);
    const int ffn = opt(argc, argv, "--ffn", 1024), layers = opt(argc, argv, "--layers", 2);
    const int iters = opt(argc, argv, "--iters", 10);
    if (ffn % nranks) {
        if (rank == 0)
            fprintf(stderr, "--ffn %d is not a multiple of the %d ranks\n", ffn, nranks);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int bad = 0;
    {
        TpMlp mlp(comm, rank, nranks, tokens, dim, ffn);
        for (int l = 0; l < layers; l++)
            mlp.forward();
        mlp.sync();
        for (int r = 0; r < nranks; r++)
            for (int g : {0, tokens / 2, tokens - 1})
                bad += mlp.check_token(r * tokens + g);
        int bad_all = 0;
        MPI_Allreduce(&bad, &bad_all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        bad = bad_all;
        if (rank == 0)
            printf("Verification: %s\n", bad ? "FAIL wrong MLP outputs" : "PASS");
        MPI_Barrier(MPI_COMM_WORLD);
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < iters; i++)
            mlp.forward();
        mlp.sync();
        double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        if (rank == 0)
            printf("CUCO_RESULT {\"time_ms\": %.6f, \"iters\": %d}\n", ms / (iters > 0 ? iters : 1), iters);
    }
    NCCL_OK(ncclCommDestroy(comm));
    MPI_Finalize();
    return bad != 0;
}
