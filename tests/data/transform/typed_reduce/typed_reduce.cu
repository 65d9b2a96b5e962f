// typed_reduce.cu: a solver-style code whose reductions go through one
// templated helper; the NCCL data type comes from a traits template
// (nccl_type<T>::value), so no call names it literally. The step sums
// residuals in double, a histogram in int64, a gradient in float and its
// shards by reduce-scatter, all in place or into a shard, with values that
// every type sums exactly. Prints `Verification: PASS` when every element of
// every result equals its closed form, then CUCO_RESULT with one step.
// Usage: typed_reduce N STEPS
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CU(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); std::exit(1); } } while (0)
#define NC(x) do { ncclResult_t r_ = (x); if (r_ != ncclSuccess) { std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, ncclGetErrorString(r_)); std::exit(1); } } while (0)

template <typename T> struct nccl_type;
template <> struct nccl_type<double> { static constexpr ncclDataType_t value = ncclFloat64; };
template <> struct nccl_type<float> { static constexpr ncclDataType_t value = ncclFloat32; };
template <> struct nccl_type<long long> { static constexpr ncclDataType_t value = ncclInt64; };

struct Comm {
    ncclComm_t nccl;
    cudaStream_t stream;
    int rank, size;
};

template <typename T>
static void sum_in_place(Comm &c, T *buf, size_t n)
{
    NC(ncclAllReduce(buf, buf, n, nccl_type<T>::value, ncclSum, c.nccl, c.stream));
}

template <typename T>
static void sum_to_shards(Comm &c, const T *full, T *shard, size_t per_rank)
{
    NC(ncclReduceScatter(full, shard, per_rank, nccl_type<T>::value, ncclSum, c.nccl, c.stream));
}

// element i of rank r: (i % 97) + r, exact in every type here
template <typename T>
__global__ void fill(T *x, size_t n, int rank)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] = (T)((long long)(i % 97) + rank);
}

// the sum over ranks of (i % 97) + r
static long long expected(size_t i, int size)
{
    return (long long)(i % 97) * size + (long long)size * (size - 1) / 2;
}

template <typename T>
static long count_wrong(const T *dev, size_t n, size_t first, int size)
{
    std::vector<T> h(n);
    CU(cudaMemcpy(h.data(), dev, n * sizeof(T), cudaMemcpyDeviceToHost));
    long bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += (long long)h[i] != expected(first + i, size);
    return bad;
}

struct Buffers {
    double *residual;
    long long *histogram;
    float *grad, *shard;
};

static void step(Comm &c, Buffers &b, size_t n)
{
    fill<<<256, 256, 0, c.stream>>>(b.residual, n, c.rank);
    fill<<<256, 256, 0, c.stream>>>(b.histogram, n, c.rank);
    fill<<<256, 256, 0, c.stream>>>(b.grad, n * c.size, c.rank);
    sum_in_place(c, b.residual, n);
    sum_in_place(c, b.histogram, n);
    sum_to_shards(c, b.grad, b.shard, n);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    Comm c;
    MPI_Comm_rank(MPI_COMM_WORLD, &c.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &c.size);
    size_t n = argc > 1 ? (size_t)std::atol(argv[1]) : 1 << 20;
    int steps = argc > 2 ? std::atoi(argv[2]) : 20;
    int ndev = 1;
    CU(cudaGetDeviceCount(&ndev));
    CU(cudaSetDevice(c.rank % ndev));
    ncclUniqueId id;
    if (c.rank == 0)
        NC(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    NC(ncclCommInitRank(&c.nccl, c.size, id, c.rank));
    CU(cudaStreamCreate(&c.stream));
    Buffers b;
    CU(cudaMalloc(&b.residual, n * sizeof(double)));
    CU(cudaMalloc(&b.histogram, n * sizeof(long long)));
    CU(cudaMalloc(&b.grad, n * c.size * sizeof(float)));
    CU(cudaMalloc(&b.shard, n * sizeof(float)));

    step(c, b, n);
    CU(cudaStreamSynchronize(c.stream));
    long bad = count_wrong(b.residual, n, 0, c.size) + count_wrong(b.histogram, n, 0, c.size) +
               count_wrong(b.shard, n, (size_t)c.rank * n, c.size);
    long bad_all = 0;
    MPI_Allreduce(&bad, &bad_all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);

    auto t0 = std::chrono::steady_clock::now();
    for (int s = 0; s < steps; s++)
        step(c, b, n);
    CU(cudaStreamSynchronize(c.stream));
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / steps;
    if (c.rank == 0) {
        if (bad_all == 0)
            std::printf("Verification: PASS\n");
        else
            std::printf("Verification: FAIL %ld elements differ from their sums\n", bad_all);
        std::printf("CUCO_RESULT {\"time_ms\": %.6f, \"iters\": %d}\n", ms, steps);
    }
    CU(cudaFree(b.residual));
    CU(cudaFree(b.histogram));
    CU(cudaFree(b.grad));
    CU(cudaFree(b.shard));
    NC(ncclCommDestroy(c.nccl));
    MPI_Finalize();
    return bad_all != 0;
}
