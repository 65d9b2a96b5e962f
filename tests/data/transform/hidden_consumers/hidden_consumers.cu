// hidden_consumers.cu: a data-parallel step whose reads of the summed
// buffer are hidden from a plain reading of the statement that makes them:
// a lambda that captures it, an object-like macro whose text launches on
// it, thrust through a device_ptr declared before the sum, a kernel
// launched with cudaLaunchKernel and an argument table, a helper that
// takes a vector of buffers, and a kernel that reads it through a
// __device__ pointer set with cudaMemcpyToSymbol. Between each sum and its reader an unrelated
// kernel runs, which a scheduler may overlap with the sum; each reader must
// still see the finished sum. Prints `Verification: PASS` when every reader
// saw it, then CUCO_RESULT with one step.
// Usage: hidden_consumers N STEPS
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>
#include <thrust/device_ptr.h>
#include <thrust/reduce.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CU(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); std::exit(1); } } while (0)
#define NC(x) do { ncclResult_t r_ = (x); if (r_ != ncclSuccess) { std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, ncclGetErrorString(r_)); std::exit(1); } } while (0)

// every element of x is rank + 1: after the sum, nranks (nranks + 1) / 2
__global__ void fill(float *x, size_t n, float v)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] = v;
}

// counts the elements of x that differ from want into *bad
__global__ void check(const float *x, size_t n, float want, unsigned *bad)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        if (x[i] != want)
            atomicAdd(bad, 1u);
}

// the summed buffer, for the kernel that takes no pointer
__device__ const float *g_sum;

__global__ void check_through_symbol(size_t n, float want, unsigned *bad)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        if (g_sum[i] != want)
            atomicAdd(bad, 1u);
}

// unrelated work between a sum and its reader
__global__ void busy(float *z, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        for (int k = 0; k < 64; k++)
            z[i] = z[i] * 0.999f + 1.0f;
}

static void check_all(const std::vector<float *> &bufs, size_t n, float want, unsigned *bad, cudaStream_t s)
{
    for (float *b : bufs)
        check<<<256, 256, 0, s>>>(b, n, want, bad);
}

#define CHECK_SUM check<<<256, 256, 0, s>>>(sum, n, want, bad)

// one step; *bad counts the elements any reader found unsummed, host_bad the
// thrust reader's
static void step(float *x, float *sum, float *z, size_t n, int rank, int nranks, unsigned *bad, long *host_bad,
                 ncclComm_t comm, cudaStream_t s)
{
    float want = (float)nranks * (nranks + 1) / 2;
    auto reader = [&]() { check<<<256, 256, 0, s>>>(sum, n, want, bad); };
    thrust::device_ptr<float> sum_ptr(sum);
    std::vector<float *> both{sum};
    void *args[] = {&sum, &n, &want, &bad};

    fill<<<256, 256, 0, s>>>(x, n, (float)(rank + 1));
    NC(ncclAllReduce(x, sum, n, ncclFloat, ncclSum, comm, s));
    busy<<<256, 256, 0, s>>>(z, n);
    reader();

    fill<<<256, 256, 0, s>>>(sum, n, 0.0f);
    NC(ncclAllReduce(x, sum, n, ncclFloat, ncclSum, comm, s));
    busy<<<256, 256, 0, s>>>(z, n);
    CHECK_SUM;

    fill<<<256, 256, 0, s>>>(sum, n, 0.0f);
    NC(ncclAllReduce(x, sum, n, ncclFloat, ncclSum, comm, s));
    busy<<<256, 256, 0, s>>>(z, n);
    CU(cudaLaunchKernel((const void *)check, dim3(256), dim3(256), args, 0, s));

    fill<<<256, 256, 0, s>>>(sum, n, 0.0f);
    NC(ncclAllReduce(x, sum, n, ncclFloat, ncclSum, comm, s));
    busy<<<256, 256, 0, s>>>(z, n);
    check_all(both, n, want, bad, s);

    fill<<<256, 256, 0, s>>>(sum, n, 0.0f);
    NC(ncclAllReduce(x, sum, n, ncclFloat, ncclSum, comm, s));
    busy<<<256, 256, 0, s>>>(z, n);
    float total = thrust::reduce(thrust::cuda::par.on(s), sum_ptr, sum_ptr + n);
    *host_bad += total != want * (float)n;

    fill<<<256, 256, 0, s>>>(sum, n, 0.0f);
    NC(ncclAllReduce(x, sum, n, ncclFloat, ncclSum, comm, s));
    busy<<<256, 256, 0, s>>>(z, n);
    check_through_symbol<<<256, 256, 0, s>>>(n, want, bad);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    size_t n = argc > 1 ? (size_t)std::atol(argv[1]) : 1 << 22;
    int steps = argc > 2 ? std::atoi(argv[2]) : 10;
    int ndev = 1;
    CU(cudaGetDeviceCount(&ndev));
    CU(cudaSetDevice(rank % ndev));
    ncclUniqueId id;
    if (rank == 0)
        NC(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    ncclComm_t comm;
    NC(ncclCommInitRank(&comm, nranks, id, rank));
    cudaStream_t s;
    CU(cudaStreamCreate(&s));
    float *x, *sum, *z;
    unsigned *bad;
    CU(cudaMalloc(&x, n * sizeof(float)));
    CU(cudaMalloc(&sum, n * sizeof(float)));
    CU(cudaMalloc(&z, n * sizeof(float)));
    CU(cudaMalloc(&bad, sizeof(unsigned)));
    CU(cudaMemset(z, 0, n * sizeof(float)));
    CU(cudaMemset(bad, 0, sizeof(unsigned)));
    CU(cudaMemcpyToSymbol(g_sum, &sum, sizeof sum));
    long host_bad = 0;
    step(x, sum, z, n, rank, nranks, bad, &host_bad, comm, s);
    CU(cudaStreamSynchronize(s));
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < steps; i++)
        step(x, sum, z, n, rank, nranks, bad, &host_bad, comm, s);
    CU(cudaStreamSynchronize(s));
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / steps;
    unsigned dev_bad = 0;
    CU(cudaMemcpy(&dev_bad, bad, sizeof dev_bad, cudaMemcpyDeviceToHost));
    long mine = (long)dev_bad + host_bad, all = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        if (all == 0)
            std::printf("Verification: PASS\n");
        else
            std::printf("Verification: FAIL %ld reads saw the buffer before its sum was done\n", all);
        std::printf("CUCO_RESULT {\"time_ms\": %.6f, \"iters\": %d}\n", ms, steps);
    }
    CU(cudaFree(x));
    CU(cudaFree(sum));
    CU(cudaFree(z));
    CU(cudaFree(bad));
    NC(ncclCommDestroy(comm));
    MPI_Finalize();
    return all != 0;
}
