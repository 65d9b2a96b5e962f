// hollow_readback.cu: a host-driven CUDA + NCCL program whose verification
// is deliberately hollow in a way the static audit cannot see. Each rank
// scales its input with a kernel, then all-reduces it; the all-reduced
// result is copied back and summed (the sum is printed), but PASS compares
// only the rank's own scaled input. The received data is read, and PASS is
// decided by a real comparison, so the static audit is satisfied; only the
// dynamic audit (the program still passes with the all-reduce removed) can
// raise the warning.
// Build: nvcc -std=c++17 -arch=sm_90 hollow_readback.cu -lnccl + MPI.
// Run: mpirun -np 2 ./hollow_readback [--n ELEMS] [--iters N]
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CHECK_CUDA(call)                                                                  \
    do {                                                                                  \
        cudaError_t e_ = (call);                                                          \
        if (e_ != cudaSuccess) {                                                          \
            fprintf(stderr, "CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, \
                    __LINE__);                                                            \
            MPI_Abort(MPI_COMM_WORLD, 3);                                                 \
        }                                                                                 \
    } while (0)
#define CHECK_NCCL(call)                                                                  \
    do {                                                                                  \
        ncclResult_t r_ = (call);                                                         \
        if (r_ != ncclSuccess) {                                                          \
            fprintf(stderr, "NCCL error %s at %s:%d\n", ncclGetErrorString(r_), __FILE__, \
                    __LINE__);                                                            \
            MPI_Abort(MPI_COMM_WORLD, 3);                                                 \
        }                                                                                 \
    } while (0)

__global__ void scale(float *x, size_t n, float a, int rounds)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float v = x[i];
        for (int r = 0; r < rounds; r++)
            v = v * a + 0.0f;
        x[i] = v;
    }
}

static long arg_long(int argc, char **argv, const char *name, long def)
{
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], name))
            return atol(argv[i + 1]);
    return def;
}

// EVOLVE-BLOCK-START
static void step(float *x, float *y, size_t n, ncclComm_t comm, cudaStream_t s)
{
    scale<<<264, 256, 0, s>>>(x, n, 1.0f, 64);
    CHECK_NCCL(ncclAllReduce(x, y, n, ncclFloat, ncclSum, comm, s));
}
// EVOLVE-BLOCK-END

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, nranks = 1, ndev = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    CHECK_CUDA(cudaGetDeviceCount(&ndev));
    CHECK_CUDA(cudaSetDevice(rank % std::max(ndev, 1)));
    size_t n = (size_t)arg_long(argc, argv, "--n", 1 << 24);
    int iters = (int)arg_long(argc, argv, "--iters", 20);
    ncclUniqueId id;
    if (rank == 0)
        CHECK_NCCL(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    ncclComm_t comm;
    CHECK_NCCL(ncclCommInitRank(&comm, nranks, id, rank));
    cudaStream_t s;
    CHECK_CUDA(cudaStreamCreate(&s));
    float *x = nullptr, *y = nullptr;
    CHECK_CUDA(cudaMalloc(&x, n * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&y, n * sizeof(float)));
    std::vector<float> h(n);
    for (size_t i = 0; i < n; i++)
        h[i] = (float)(rank + 1) + (float)(i % 7);
    CHECK_CUDA(cudaMemcpy(x, h.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemset(y, 0, n * sizeof(float)));

    step(x, y, n, comm, s);
    CHECK_CUDA(cudaStreamSynchronize(s));

    // The hollow check: the input, scaled by 1.0, against itself.
    std::vector<float> got(n);
    CHECK_CUDA(cudaMemcpy(got.data(), x, n * sizeof(float), cudaMemcpyDeviceToHost));
    long bad = 0;
    for (size_t i = 0; i < n; i++)
        if (std::fabs(got[i] - h[i]) > 1e-6f)
            bad++;
    std::vector<float> reduced(n);
    CHECK_CUDA(cudaMemcpy(reduced.data(), y, n * sizeof(float), cudaMemcpyDeviceToHost));
    double checksum = 0;
    for (size_t i = 0; i < n; i++)
        checksum += reduced[i];
    if (rank == 0)
        printf("checksum of the all-reduced data: %.1f\n", checksum);
    long all_bad = 0;
    MPI_Allreduce(&bad, &all_bad, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("Verification: %s\n", all_bad == 0 ? "PASS" : "FAIL mismatches");

    cudaEvent_t e0, e1;
    CHECK_CUDA(cudaEventCreate(&e0));
    CHECK_CUDA(cudaEventCreate(&e1));
    std::vector<float> times;
    for (int it = 0; it < iters; it++) {
        MPI_Barrier(MPI_COMM_WORLD);
        CHECK_CUDA(cudaEventRecord(e0, s));
        step(x, y, n, comm, s);
        CHECK_CUDA(cudaEventRecord(e1, s));
        CHECK_CUDA(cudaEventSynchronize(e1));
        float ms = 0;
        CHECK_CUDA(cudaEventElapsedTime(&ms, e0, e1));
        times.push_back(ms);
    }
    std::sort(times.begin(), times.end());
    if (rank == 0)
        printf("CUCO_RESULT {\"time_ms\":%.6f,\"iters\":%d}\n", times[times.size() / 2], iters);
    CHECK_CUDA(cudaFree(x));
    CHECK_CUDA(cudaFree(y));
    ncclCommDestroy(comm);
    MPI_Finalize();
    return all_bad == 0 ? 0 : 1;
}
