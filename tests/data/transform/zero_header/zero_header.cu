/* zero_header.cu: a data-parallel trainer whose sharded optimizer lives in
 * a header of the project (zero.cuh): the collectives are there, not here.
 *
 * Each step computes a gradient that depends on the rank and the step,
 * reduces it into this rank's shard, updates the shard, gathers the
 * parameters, and sums a per-rank "loss" through the header's managed
 * scalar.
 *
 * Check: the host repeats the steps for every rank and compares every
 * parameter and every step's summed loss.
 *
 * mpirun -np N ./zero_header [shard] [steps] [timed_iters]
 */
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

#include "zero.cuh"

#define CUDA_TRY(call)                                                                      \
    do {                                                                                    \
        cudaError_t e_ = (call);                                                            \
        if (e_ != cudaSuccess) {                                                            \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));     \
            exit(1);                                                                        \
        }                                                                                   \
    } while (0)

__host__ __device__ inline float grad_of(size_t i, int rank, int step) { return (float)((i * 3 + rank * 7 + step) % 11) * 0.125f; }

__global__ void backward(float *grads, size_t n, int rank, int step)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        grads[i] = grad_of(i, rank, step);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, nranks = 1, ndev = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    size_t shard = argc > 1 ? strtoull(argv[1], NULL, 10) : 1 << 20;
    int steps = argc > 2 ? (int)strtol(argv[2], NULL, 10) : 4;
    int timed = argc > 3 ? (int)strtol(argv[3], NULL, 10) : 10;
    CUDA_TRY(cudaGetDeviceCount(&ndev));
    CUDA_TRY(cudaSetDevice(rank % ndev));
    ncclUniqueId id;
    if (rank == 0)
        ZERO_NCCL(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    ncclComm_t comm;
    ZERO_NCCL(ncclCommInitRank(&comm, nranks, id, rank));
    cudaStream_t stream;
    CUDA_TRY(cudaStreamCreate(&stream));

    size_t n = shard * nranks;
    float *params, *grads;
    CUDA_TRY(cudaMalloc(&params, n * sizeof(float)));
    CUDA_TRY(cudaMalloc(&grads, n * sizeof(float)));
    CUDA_TRY(cudaMemset(params, 0, n * sizeof(float)));
    ZeroState z;
    zero_init(&z, comm, stream, rank, nranks, shard);
    const float lr = 0.5f;

    long bad = 0;
    for (int s = 0; s < steps; ++s) {
        backward<<<64, 256, 0, stream>>>(grads, n, rank, s);
        reduce_gradients(&z, grads);
        step(&z, params, lr);
        gather_parameters(&z, params);
        float loss = host_sum(&z, (float)(rank + 1 + s));
        float want = 0.0f;
        for (int r = 0; r < nranks; ++r)
            want += (float)(r + 1 + s);
        if (fabsf(loss - want) > 1e-4f)
            bad++;
    }
    std::vector<float> got(n);
    CUDA_TRY(cudaMemcpy(got.data(), params, n * sizeof(float), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; ++i) {
        float p = 0.0f;
        for (int s = 0; s < steps; ++s) {
            float g = 0.0f;
            for (int r = 0; r < nranks; ++r)
                g += grad_of(i, r, s);
            p -= lr / nranks * g;
        }
        if (fabsf(got[i] - p) > 1e-4f * std::max(1.0f, fabsf(p)))
            bad++;
    }

    std::vector<double> times;
    for (int it = 0; it < timed; ++it) {
        auto t0 = std::chrono::steady_clock::now();
        backward<<<64, 256, 0, stream>>>(grads, n, rank, it);
        reduce_gradients(&z, grads);
        step(&z, params, lr);
        gather_parameters(&z, params);
        CUDA_TRY(cudaStreamSynchronize(stream));
        auto t1 = std::chrono::steady_clock::now();
        times.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    }
    std::sort(times.begin(), times.end());
    long all_bad = 0;
    MPI_Allreduce(&bad, &all_bad, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        if (all_bad == 0)
            printf("Verification: PASS\n");
        else
            printf("Verification: FAIL %ld values differ from the host's steps\n", all_bad);
        printf("CUCO_RESULT {\"time_ms\": %.6f, \"iters\": %d}\n", times.empty() ? 0.0 : times[times.size() / 2],
               timed);
    }
    zero_free(&z);
    CUDA_TRY(cudaFree(params));
    CUDA_TRY(cudaFree(grads));
    CUDA_TRY(cudaStreamDestroy(stream));
    ZERO_NCCL(ncclCommDestroy(comm));
    MPI_Finalize();
    return all_bad != 0;
}
