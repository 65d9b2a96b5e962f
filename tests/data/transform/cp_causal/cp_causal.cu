// cp_causal: causal context-parallel attention written as a class that
// owns its communicator and buffers, with contiguous shards (rank r holds
// queries and keys r*tokens .. (r+1)*tokens-1, so the last rank sees every
// key and the first only its own). A key row holds, per head, its K then
// its V (2*d floats a head). One ncclAllGather of the packed rows, then
// `attend` (one block per query and head, scores in shared memory) over
// the keys at or before each query; it writes the output and each row's
// log-sum-exp. The manifest declares the kernel attention with its queries
// (queries=nq, first_query=q_first, query_grid=x, causal=causal). Prints
// `Verification: PASS` when sampled outputs and log-sum-exps of every rank
// (its first, middle and last queries) match a host reference, then
// CUCO_RESULT.
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CUDA_TRY(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); MPI_Abort(MPI_COMM_WORLD, 1); } } while (0)
#define NCCL_TRY(x) do { ncclResult_t r_ = (x); if (r_ != ncclSuccess) { fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, ncclGetErrorString(r_)); MPI_Abort(MPI_COMM_WORLD, 1); } } while (0)

static float host_value(unsigned long long i)
{
    return (float)((i * 2654435761ull) % 2003ull) / 1000.0f - 1.0f;
}

__global__ void fill(float *p, size_t n, unsigned long long first)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = (float)(((first + i) * 2654435761ull) % 2003ull) / 1000.0f - 1.0f;
}

// The block's max (op 0) or sum (op 1) of v; blockDim.x a multiple of 32.
__device__ float block_reduce(float v, int op)
{
    __shared__ float part[32];
    for (int o = 16; o > 0; o >>= 1) {
        float w = __shfl_xor_sync(0xffffffffu, v, o);
        v = op ? v + w : fmaxf(v, w);
    }
    __syncthreads();
    if ((threadIdx.x & 31) == 0)
        part[threadIdx.x >> 5] = v;
    __syncthreads();
    v = part[0];
    for (int i = 1; i < (int)(blockDim.x >> 5); i++)
        v = op ? v + part[i] : fmaxf(v, part[i]);
    return v;
}

// Grid (queries, heads); shared memory: one float per key. Softmax of the
// scaled scores over the nkeys key rows of kv, times their values.
__global__ void attend(const float *q, const float *kv, int nq, int heads, int d, int nkeys,
                       long q_first, long k_first, int causal, float *out, float *lse)
{
    extern __shared__ float score[];
    int row = blockIdx.x, h = blockIdx.y;
    if (row >= nq)
        return;
    const float *qr = q + ((size_t)row * heads + h) * d;
    size_t width = (size_t)heads * 2 * d;
    float scale = rsqrtf((float)d), mx = -INFINITY;
    for (int j = threadIdx.x; j < nkeys; j += blockDim.x) {
        const float *k = kv + (size_t)j * width + (size_t)h * 2 * d;
        float s = 0.0f;
        for (int i = 0; i < d; i++)
            s += qr[i] * k[i];
        score[j] = causal && k_first + j > q_first + row ? -INFINITY : s * scale;
        mx = fmaxf(mx, score[j]);
    }
    mx = block_reduce(mx, 0);
    float l = 0.0f;
    for (int j = threadIdx.x; j < nkeys; j += blockDim.x) {
        score[j] = mx == -INFINITY ? 0.0f : expf(score[j] - mx);
        l += score[j];
    }
    l = block_reduce(l, 1);
    __syncthreads();
    for (int i = threadIdx.x; i < d; i += blockDim.x) {
        float acc = 0.0f;
        for (int j = 0; j < nkeys; j++)
            acc += score[j] * kv[(size_t)j * width + (size_t)h * 2 * d + d + i];
        out[((size_t)row * heads + h) * d + i] = l > 0.0f ? acc / l : 0.0f;
    }
    if (lse && threadIdx.x == 0)
        lse[(size_t)row * heads + h] = l > 0.0f ? mx + logf(l) : -INFINITY;
}

class CpCausal {
  public:
    CpCausal(int tokens, int heads, int d) : tokens_(tokens), heads_(heads), d_(d) {}

    void init()
    {
        MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
        MPI_Comm_size(MPI_COMM_WORLD, &nranks_);
        int ndev = 1;
        CUDA_TRY(cudaGetDeviceCount(&ndev));
        CUDA_TRY(cudaSetDevice(rank_ % ndev));
        ncclUniqueId id;
        if (rank_ == 0)
            NCCL_TRY(ncclGetUniqueId(&id));
        MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
        NCCL_TRY(ncclCommInitRank(&comm_, nranks_, id, rank_));
        CUDA_TRY(cudaStreamCreate(&stream_));
        size_t qn = (size_t)tokens_ * heads_ * d_, kvn = (size_t)tokens_ * width();
        CUDA_TRY(cudaMalloc(&q_, qn * sizeof(float)));
        CUDA_TRY(cudaMalloc(&kv_, kvn * sizeof(float)));
        CUDA_TRY(cudaMalloc(&kv_all_, kvn * nranks_ * sizeof(float)));
        CUDA_TRY(cudaMalloc(&out_, qn * sizeof(float)));
        CUDA_TRY(cudaMalloc(&lse_, (size_t)tokens_ * heads_ * sizeof(float)));
        fill<<<256, 256, 0, stream_>>>(q_, qn, (1ull << 40) + (unsigned long long)rank_ * qn);
        fill<<<256, 256, 0, stream_>>>(kv_, kvn, (unsigned long long)rank_ * kvn);
        CUDA_TRY(cudaGetLastError());
        CUDA_TRY(cudaFuncSetAttribute(attend, cudaFuncAttributeMaxDynamicSharedMemorySize, keys() * 4));
    }

    void step()
    {
        NCCL_TRY(ncclAllGather(kv_, kv_all_, (size_t)tokens_ * width(), ncclFloat, comm_, stream_));
        attend<<<dim3(tokens_, heads_), 128, (size_t)keys() * sizeof(float), stream_>>>(
            q_, kv_all_, tokens_, heads_, d_, keys(), (long)rank_ * tokens_, 0L, 1, out_, lse_);
    }

    // Wrong outputs and log-sum-exps of query row r, against the host.
    int check_row(int r) const
    {
        std::vector<float> got((size_t)heads_ * d_), got_lse(heads_);
        CUDA_TRY(cudaMemcpy(got.data(), out_ + (size_t)r * heads_ * d_, got.size() * 4, cudaMemcpyDeviceToHost));
        CUDA_TRY(cudaMemcpy(got_lse.data(), lse_ + (size_t)r * heads_, heads_ * 4, cudaMemcpyDeviceToHost));
        size_t qn = (size_t)tokens_ * heads_ * d_;
        int bad = 0;
        for (int h = 0; h < heads_; h++) {
            std::vector<double> s(keys());
            double mx = -INFINITY, l = 0.0;
            int seen = rank_ * tokens_ + r + 1; // keys at or before the query
            for (int j = 0; j < seen; j++) {
                double dot = 0.0;
                for (int i = 0; i < d_; i++)
                    dot += (double)host_value((1ull << 40) + rank_ * qn + ((size_t)r * heads_ + h) * d_ + i) *
                           host_value((size_t)j * width() + (size_t)h * 2 * d_ + i);
                s[j] = dot / std::sqrt((double)d_);
                mx = std::fmax(mx, s[j]);
            }
            for (int j = 0; j < seen; j++)
                l += std::exp(s[j] - mx);
            bad += std::fabs(got_lse[h] - (mx + std::log(l))) > 1e-4 * (1.0 + std::fabs(mx));
            for (int i = 0; i < d_; i++) {
                double want = 0.0;
                for (int j = 0; j < seen; j++)
                    want += std::exp(s[j] - mx) * host_value((size_t)j * width() + (size_t)h * 2 * d_ + d_ + i);
                want /= l;
                bad += std::fabs(got[(size_t)h * d_ + i] - want) > 1e-4 + 1e-4 * std::fabs(want);
            }
        }
        return bad;
    }

    void sync() const { CUDA_TRY(cudaStreamSynchronize(stream_)); }
    int rank() const { return rank_; }
    int tokens() const { return tokens_; }

    ~CpCausal()
    {
        cudaFree(q_);
        cudaFree(kv_);
        cudaFree(kv_all_);
        cudaFree(out_);
        cudaFree(lse_);
        if (comm_)
            ncclCommDestroy(comm_);
    }

  private:
    size_t width() const { return (size_t)heads_ * 2 * d_; }
    int keys() const { return tokens_ * nranks_; }

    int tokens_, heads_, d_;
    int rank_ = 0, nranks_ = 1;
    ncclComm_t comm_ = nullptr;
    cudaStream_t stream_ = nullptr;
    float *q_ = nullptr, *kv_ = nullptr, *kv_all_ = nullptr, *out_ = nullptr, *lse_ = nullptr;
};

static int arg(int argc, char **argv, const char *name, int dflt)
{
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], name))
            return atoi(argv[i + 1]);
    return dflt;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int iters = arg(argc, argv, "--iters", 10), bad_all = 0;
    {
        CpCausal a(arg(argc, argv, "--tokens", 256), arg(argc, argv, "--heads", 4), arg(argc, argv, "--d", 64));
        a.init();
        a.step();
        a.sync();
        int bad = 0;
        for (int r : {0, a.tokens() / 2, a.tokens() - 1})
            bad += a.check_row(r);
        MPI_Allreduce(&bad, &bad_all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        if (a.rank() == 0)
            printf("Verification: %s\n", bad_all ? "FAIL wrong attention" : "PASS");
        MPI_Barrier(MPI_COMM_WORLD);
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < iters; i++)
            a.step();
        a.sync();
        double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        if (a.rank() == 0)
            printf("CUCO_RESULT {\"time_ms\": %.6f, \"iters\": %d}\n", ms / (iters > 0 ? iters : 1), iters);
    }
    MPI_Finalize();
    return bad_all != 0;
}
