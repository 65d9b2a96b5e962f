// pipeline_stages.cu -- pipeline-parallel forward over micro-batches.
//
// Stage r (one per rank) receives a micro-batch of activations from stage
// r-1, applies its own affine + clamp kernel and sends the result to stage
// r+1. Stage 0 generates the micro-batches, the last stage keeps the results
// and checks them against the same stages applied on the host. Send and
// receive are plain blocking-style calls (no ncclGroupStart/End), double
// buffered on the receive side so that micro-batch m+1 can land while m is
// being processed. With one rank the single stage generates, applies and
// checks.
//
// usage: mpirun -np N ./pipeline_stages [--elems E] [--micro M] [--reps R]
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

static void die(const char *what, const char *msg, const char *file, int line)
{
    fprintf(stderr, "[pipeline] %s failed: %s (%s:%d)\n", what, msg, file, line);
    MPI_Abort(MPI_COMM_WORLD, 2);
}
#define CHECK_CUDA(x) do { cudaError_t rc_ = (x); if (rc_ != cudaSuccess) die(#x, cudaGetErrorString(rc_), __FILE__, __LINE__); } while (0)
#define CHECK_NCCL(x) do { ncclResult_t rc_ = (x); if (rc_ != ncclSuccess) die(#x, ncclGetErrorString(rc_), __FILE__, __LINE__); } while (0)

struct Pipe {
    int stage = 0, nstages = 1;
    size_t elems = 0;
    int micro = 0;
    float *rx[2] = {nullptr, nullptr};  // receive (or generate) buffers, by micro-batch parity
    float *tx = nullptr;                // this stage's output, sent downstream
    float *results = nullptr;           // last stage: every micro-batch's output
    ncclComm_t comm = nullptr;
    cudaStream_t stream = nullptr;
};

__host__ __device__ inline float stage_scale(int s) { return 1.0f + 0.25f * (float)(s % 4); }
__host__ __device__ inline float stage_shift(int s) { return 0.5f * (float)((s % 3) - 1); }
__host__ __device__ inline float source_value(int mb, size_t i) { return (float)((int)((i * 7 + mb * 13) % 29) - 14) / 16.0f; }

__global__ void generate(float *x, size_t n, int mb)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] = source_value(mb, i);
}

// y = clamp(x * a + b, -64, 64)
__global__ void stage_kernel(const float *x, float *y, size_t n, float a, float b)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        y[i] = fminf(64.0f, fmaxf(-64.0f, x[i] * a + b));
}

static void run_pipeline(Pipe &p)
{
    const size_t n = p.elems;
    const int blocks = (int)std::min<size_t>(1024, (n + 255) / 256);
    for (int mb = 0; mb < p.micro; mb++) {
        float *in = p.rx[mb & 1];
        if (p.stage == 0)
            generate<<<blocks, 256, 0, p.stream>>>(in, n, mb);
        else
            CHECK_NCCL(ncclRecv(in, n, ncclFloat32, p.stage - 1, p.comm, p.stream));

        float *out = p.stage == p.nstages - 1 ? p.results + (size_t)mb * n : p.tx;
        stage_kernel<<<blocks, 256, 0, p.stream>>>(in, out, n, stage_scale(p.stage), stage_shift(p.stage));

        if (p.stage < p.nstages - 1)
            CHECK_NCCL(ncclSend(out, n, ncclFloat32, p.stage + 1, p.comm, p.stream));
    }
}

static long check_results(const Pipe &p)
{
    std::vector<float> got((size_t)p.micro * p.elems);
    CHECK_CUDA(cudaMemcpy(got.data(), p.results, got.size() * sizeof(float), cudaMemcpyDeviceToHost));
    long bad = 0;
    for (int mb = 0; mb < p.micro; mb++)
        for (size_t i = 0; i < p.elems; i++) {
            float v = source_value(mb, i);
            for (int s = 0; s < p.nstages; s++)
                v = std::min(64.0f, std::max(-64.0f, v * stage_scale(s) + stage_shift(s)));
            float g = got[(size_t)mb * p.elems + i];
            if (std::fabs(g - v) > 1e-4f * std::max(1.0f, std::fabs(v))) {
                if (bad < 5)
                    fprintf(stderr, "[pipeline] micro-batch %d elem %zu: got %g want %g\n", mb, i, g, v);
                bad++;
            }
        }
    return bad;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    Pipe p;
    p.elems = 1 << 16;
    p.micro = 8;
    int reps = 10;
    for (int a = 1; a + 1 < argc; a++) {
        std::string opt = argv[a];
        if (opt == "--elems") p.elems = strtoull(argv[++a], nullptr, 10);
        else if (opt == "--micro") p.micro = atoi(argv[++a]);
        else if (opt == "--reps") reps = atoi(argv[++a]);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &p.stage);
    MPI_Comm_size(MPI_COMM_WORLD, &p.nstages);

    int devices = 0;
    CHECK_CUDA(cudaGetDeviceCount(&devices));
    CHECK_CUDA(cudaSetDevice(p.stage % devices));
    ncclUniqueId uid;
    if (p.stage == 0)
        CHECK_NCCL(ncclGetUniqueId(&uid));
    MPI_Bcast(&uid, sizeof(uid), MPI_BYTE, 0, MPI_COMM_WORLD);
    CHECK_NCCL(ncclCommInitRank(&p.comm, p.nstages, uid, p.stage));
    CHECK_CUDA(cudaStreamCreate(&p.stream));

    const size_t bytes = p.elems * sizeof(float);
    for (int b = 0; b < 2; b++)
        CHECK_CUDA(cudaMalloc(&p.rx[b], bytes));
    CHECK_CUDA(cudaMalloc(&p.tx, bytes));
    const bool last = p.stage == p.nstages - 1;
    if (last)
        CHECK_CUDA(cudaMalloc(&p.results, bytes * p.micro));

    run_pipeline(p);
    CHECK_CUDA(cudaStreamSynchronize(p.stream));
    long bad = last ? check_results(p) : 0;
    MPI_Bcast(&bad, 1, MPI_LONG, p.nstages - 1, MPI_COMM_WORLD);

    // timed: whole pipeline flushes, wall clock of the slowest stage
    std::vector<double> times;
    for (int r = 0; r < reps + 2; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        auto t0 = std::chrono::steady_clock::now();
        run_pipeline(p);
        CHECK_CUDA(cudaStreamSynchronize(p.stream));
        double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        double slowest = 0;
        MPI_Allreduce(&ms, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (r >= 2)
            times.push_back(slowest);
    }
    std::sort(times.begin(), times.end());

    if (p.stage == 0) {
        if (bad)
            printf("Verification: FAIL %ld wrong values at the last stage\n", bad);
        else
            printf("Verification: PASS\n");
        printf("CUCO_RESULT {\"time_ms\": %.6f, \"iters\": %d, \"stages\": %d, \"micro_batches\": %d}\n",
               times.empty() ? 0.0 : times[times.size() / 2], reps, p.nstages, p.micro);
    }

    for (int b = 0; b < 2; b++)
        CHECK_CUDA(cudaFree(p.rx[b]));
    CHECK_CUDA(cudaFree(p.tx));
    if (last)
        CHECK_CUDA(cudaFree(p.results));
    CHECK_CUDA(cudaStreamDestroy(p.stream));
    CHECK_NCCL(ncclCommDestroy(p.comm));
    MPI_Finalize();
    return bad != 0;
}
