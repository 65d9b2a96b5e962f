// decode_allreduce.cu: tensor-parallel decode in the style of inference
// engines: each step is a few small layers, each a row-parallel matvec
// whose partial output is summed by an in-place ncclAllReduce of a few
// dozen KiB, the step synchronised with the host (the next token needs this
// one). Latency-bound: what counts is how long each call takes from launch
// to done, host side included.
// Usage: decode_allreduce HIDDEN LAYERS STEPS
// Prints the step time (median, ms) and the host time spent inside the
// all-reduce calls (us a call).
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

// A weight in [-1, 1) / sqrt(hidden), from a hash of (layer, r, c): the
// outputs keep the inputs' scale from layer to layer.
__host__ __device__ inline float weight(int layer, int r, int c, int hidden)
{
    unsigned h = (unsigned)r * 0x9E3779B1u ^ (unsigned)c * 0x85EBCA77u ^ (unsigned)layer * 0xC2B2AE3Du;
    h ^= h >> 15;
    h *= 0x2C1B3C6Du;
    h ^= h >> 13;
    return ((float)(h % 2001u) / 1000.0f - 1.0f) / sqrtf((float)hidden);
}

// y[r] = sum over this rank's slice of columns of w[r][c] * x[c]; the input
// is the previous layer's output
__global__ void slice_matvec(const float *x, float *y, int hidden, int c0, int c1, int layer)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= hidden)
        return;
    float acc = 0.0f;
    for (int c = c0; c < c1; c++)
        acc += weight(layer, r, c, hidden) * x[c];
    y[r] = acc;
}

struct Engine {
    ncclComm_t comm;
    cudaStream_t stream;
    int rank, ranks, hidden, layers;
    float *act[2]; // ping-pong activations
    double host_us = 0.0;
    long calls = 0;
};

static void decode_step(Engine &e)
{
    int per = e.hidden / e.ranks, c0 = e.rank * per, c1 = e.rank == e.ranks - 1 ? e.hidden : c0 + per;
    for (int l = 0; l < e.layers; l++) {
        float *in = e.act[l % 2], *out = e.act[(l + 1) % 2];
        slice_matvec<<<(e.hidden + 127) / 128, 128, 0, e.stream>>>(in, out, e.hidden, c0, c1, l);
        auto t0 = std::chrono::steady_clock::now();
        NCCL_OK(ncclAllReduce(out, out, e.hidden, ncclFloat, ncclSum, e.comm, e.stream));
        e.host_us += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
        e.calls++;
    }
}

static void reset_input(Engine &e, std::vector<float> &x)
{
    for (int c = 0; c < e.hidden; c++)
        x[c] = (float)((c * 37) % 201 - 100) / 100.0f;
    CUDA_OK(cudaMemcpy(e.act[0], x.data(), e.hidden * sizeof(float), cudaMemcpyHostToDevice));
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    Engine e;
    MPI_Comm_rank(MPI_COMM_WORLD, &e.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &e.ranks);
    e.hidden = argc > 1 ? std::atoi(argv[1]) : 8192;
    e.layers = argc > 2 ? std::atoi(argv[2]) : 4;
    int steps = argc > 3 ? std::atoi(argv[3]) : 50;
    int ndev = 1;
    CUDA_OK(cudaGetDeviceCount(&ndev));
    CUDA_OK(cudaSetDevice(e.rank % ndev));
    ncclUniqueId id;
    if (e.rank == 0)
        NCCL_OK(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    NCCL_OK(ncclCommInitRank(&e.comm, e.ranks, id, e.rank));
    CUDA_OK(cudaStreamCreate(&e.stream));
    for (int i = 0; i < 2; i++)
        CUDA_OK(cudaMalloc(&e.act[i], e.hidden * sizeof(float)));

    // checked step: the layers on the host, in double
    std::vector<float> x(e.hidden), got(e.hidden);
    reset_input(e, x);
    decode_step(e);
    CUDA_OK(cudaStreamSynchronize(e.stream));
    CUDA_OK(cudaMemcpy(got.data(), e.act[e.layers % 2], e.hidden * sizeof(float), cudaMemcpyDeviceToHost));
    std::vector<double> ref(x.begin(), x.end()), next(e.hidden);
    for (int l = 0; l < e.layers; l++) {
        for (int r = 0; r < e.hidden; r++) {
            double acc = 0.0;
            for (int c = 0; c < e.hidden; c++)
                acc += (double)weight(l, r, c, e.hidden) * ref[c];
            next[r] = acc;
        }
        ref.swap(next);
    }
    // float sums of hidden terms of the outputs' scale: 1e-3 of that scale
    double rms = 0.0;
    for (int r = 0; r < e.hidden; r++)
        rms += ref[r] * ref[r];
    rms = std::sqrt(rms / e.hidden);
    long bad = 0;
    for (int r = 0; r < e.hidden; r++)
        bad += !(std::fabs(got[r] - ref[r]) <= 1e-3 * (std::fabs(ref[r]) + rms));
    long bad_all = 0;
    MPI_Allreduce(&bad, &bad_all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);

    // timed steps, each synchronised as a token loop is
    std::vector<double> ms;
    e.host_us = 0.0;
    e.calls = 0;
    for (int s = 0; s < steps + 5; s++) {
        if (s == 5) {
            e.host_us = 0.0;
            e.calls = 0;
        }
        reset_input(e, x);
        auto t0 = std::chrono::steady_clock::now();
        decode_step(e);
        CUDA_OK(cudaStreamSynchronize(e.stream));
        if (s >= 5)
            ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    if (e.rank == 0) {
        if (bad_all == 0)
            std::printf("Verification: PASS\n");
        else
            std::printf("Verification: FAIL %ld outputs differ from the host's layers\n", bad_all);
        std::printf("CUCO_RESULT {\"time_ms\": %.6f, \"iters\": %d, \"allreduce_bytes\": %zu, "
                    "\"host_us_per_allreduce\": %.3f}\n",
                    ms[ms.size() / 2], steps, e.hidden * sizeof(float), e.calls ? e.host_us / e.calls : 0.0);
    }
    for (int i = 0; i < 2; i++)
        CUDA_OK(cudaFree(e.act[i]));
    NCCL_OK(ncclCommDestroy(e.comm));
    MPI_Finalize();
    return bad_all != 0;
}
