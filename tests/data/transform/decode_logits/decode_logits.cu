// decode_logits.cu: greedy decoding with a vocabulary-parallel LM head, the
// way inference engines shard it: each rank scores its slice of the
// vocabulary against the hidden state, ncclAllGather collects every slice's
// logits, the argmax picks the next token, and the host reads the token
// before it starts the next step (the next hidden state is that token's
// embedding). One small all-gather a step, latency-bound.
// Usage: decode_logits VOCAB HIDDEN STEPS
// Prints the step time (median, ms) and the host time spent inside the
// all-gather calls (us a call).
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CUDA_OK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); std::exit(1); } } while (0)
#define NCCL_OK(x) do { ncclResult_t r_ = (x); if (r_ != ncclSuccess) { std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, ncclGetErrorString(r_)); std::exit(1); } } while (0)

// A hashed value in [-1, 1): the LM head's weight (kind 0) and the token
// embeddings (kind 1).
__host__ __device__ inline float hashed(unsigned kind, unsigned a, unsigned b)
{
    unsigned h = a * 0x9E3779B1u ^ b * 0x85EBCA77u ^ kind * 0xC2B2AE3Du;
    h ^= h >> 15;
    h *= 0x2C1B3C6Du;
    h ^= h >> 13;
    return (float)(h % 2001u) / 1000.0f - 1.0f;
}

// logits[v - v0] = sum_c W[v][c] * embed(token)[c] for this rank's slice
__global__ void score_slice(int token, float *logits, int v0, int count, int hidden)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= count)
        return;
    float acc = 0.0f;
    for (int c = 0; c < hidden; c++)
        acc += hashed(0, (unsigned)(v0 + i), (unsigned)c) * hashed(1, (unsigned)token, (unsigned)c);
    logits[i] = acc;
}

// one block: the index of the largest logit (the lowest index on ties)
__global__ void argmax(const float *logits, int vocab, int *token)
{
    __shared__ float best[256];
    __shared__ int at[256];
    float b = -INFINITY;
    int a = vocab;
    for (int v = threadIdx.x; v < vocab; v += blockDim.x)
        if (logits[v] > b) {
            b = logits[v];
            a = v;
        }
    best[threadIdx.x] = b;
    at[threadIdx.x] = a;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s /= 2) {
        if (threadIdx.x < s) {
            float ob = best[threadIdx.x + s];
            int oa = at[threadIdx.x + s];
            if (ob > best[threadIdx.x] || (ob == best[threadIdx.x] && oa < at[threadIdx.x])) {
                best[threadIdx.x] = ob;
                at[threadIdx.x] = oa;
            }
        }
        __syncthreads();
    }
    if (threadIdx.x == 0)
        *token = at[0];
}

struct Head {
    ncclComm_t comm;
    cudaStream_t stream;
    int rank, ranks, vocab, hidden, slice;
    float *mine, *all; // [slice], [ranks * slice]
    int *token_dev, *token_host;
    double host_us = 0.0;
    long calls = 0;
};

// one decoding step from `token`: the next token, read back by the host
static int decode_step(Head &h, int token)
{
    score_slice<<<(h.slice + 127) / 128, 128, 0, h.stream>>>(token, h.mine, h.rank * h.slice, h.slice, h.hidden);
    auto t0 = std::chrono::steady_clock::now();
    NCCL_OK(ncclAllGather(h.mine, h.all, h.slice, ncclFloat, h.comm, h.stream));
    h.host_us += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    h.calls++;
    argmax<<<1, 256, 0, h.stream>>>(h.all, h.ranks * h.slice, h.token_dev);
    CUDA_OK(cudaMemcpyAsync(h.token_host, h.token_dev, sizeof(int), cudaMemcpyDeviceToHost, h.stream));
    CUDA_OK(cudaStreamSynchronize(h.stream));
    return *h.token_host;
}

// every gathered logit of one step against the host's sum in double
static long check_logits(Head &h, int token)
{
    int total = h.ranks * h.slice;
    std::vector<float> got(total);
    CUDA_OK(cudaMemcpy(got.data(), h.all, total * sizeof(float), cudaMemcpyDeviceToHost));
    long bad = 0;
    for (int v = 0; v < total; v++) {
        double acc = 0.0, scale = 0.0;
        for (int c = 0; c < h.hidden; c++) {
            double t = (double)hashed(0, (unsigned)v, (unsigned)c) * hashed(1, (unsigned)token, (unsigned)c);
            acc += t;
            scale += std::fabs(t);
        }
        bad += !(std::fabs(got[v] - acc) <= 1e-5 * scale + 1e-6);
    }
    return bad;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    Head h;
    MPI_Comm_rank(MPI_COMM_WORLD, &h.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &h.ranks);
    h.vocab = argc > 1 ? std::atoi(argv[1]) : 32000;
    h.hidden = argc > 2 ? std::atoi(argv[2]) : 256;
    int steps = argc > 3 ? std::atoi(argv[3]) : 100;
    h.slice = (h.vocab + h.ranks - 1) / h.ranks;
    int ndev = 1;
    CUDA_OK(cudaGetDeviceCount(&ndev));
    CUDA_OK(cudaSetDevice(h.rank % ndev));
    ncclUniqueId id;
    if (h.rank == 0)
        NCCL_OK(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    NCCL_OK(ncclCommInitRank(&h.comm, h.ranks, id, h.rank));
    CUDA_OK(cudaStreamCreate(&h.stream));
    CUDA_OK(cudaMalloc(&h.mine, h.slice * sizeof(float)));
    CUDA_OK(cudaMalloc(&h.all, (size_t)h.ranks * h.slice * sizeof(float)));
    CUDA_OK(cudaMalloc(&h.token_dev, sizeof(int)));
    CUDA_OK(cudaMallocHost(&h.token_host, sizeof(int)));

    // checked step: every logit of every slice, and the token the argmax took
    int first = decode_step(h, 1);
    long bad = check_logits(h, 1);
    // the same tokens on every rank: the smallest and largest sum agree
    long sum = 0;
    int token = first;
    std::vector<double> ms;
    h.host_us = 0.0;
    h.calls = 0;
    for (int s = 0; s < steps + 5; s++) {
        if (s == 5) {
            h.host_us = 0.0;
            h.calls = 0;
        }
        auto t0 = std::chrono::steady_clock::now();
        token = decode_step(h, token);
        if (s >= 5)
            ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        sum = sum * 31 + token;
    }
    long lo = 0, hi = 0, bad_all = 0;
    MPI_Allreduce(&sum, &lo, 1, MPI_LONG, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&sum, &hi, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(&bad, &bad_all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    std::sort(ms.begin(), ms.end());
    if (h.rank == 0) {
        if (bad_all == 0 && lo == hi && first >= 0 && first < h.ranks * h.slice)
            std::printf("Verification: PASS\n");
        else
            std::printf("Verification: FAIL %ld logits differ from the host's, tokens %s across ranks\n", bad_all,
                        lo == hi ? "agree" : "differ");
        std::printf("CUCO_RESULT {\"time_ms\": %.6f, \"iters\": %d, \"allgather_bytes\": %zu, "
                    "\"host_us_per_allgather\": %.3f}\n",
                    ms[ms.size() / 2], steps, (size_t)h.ranks * h.slice * sizeof(float),
                    h.calls ? h.host_us / h.calls : 0.0);
    }
    CUDA_OK(cudaFree(h.mine));
    CUDA_OK(cudaFree(h.all));
    CUDA_OK(cudaFree(h.token_dev));
    CUDA_OK(cudaFreeHost(h.token_host));
    NCCL_OK(ncclCommDestroy(h.comm));
    MPI_Finalize();
    return bad_all != 0 || lo != hi;
}
