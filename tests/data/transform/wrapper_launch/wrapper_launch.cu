/* wrapper_launch.cu: an all-reduce between computations that are launched
 * from another file (kernels.cu) through wrapper functions.
 *
 * Each step fills this rank's vector, all-reduces it, and scales the sum.
 * Check: every element equals the scaled sum of the ranks' patterns.
 *
 * mpirun -np N ./wrapper_launch [n] [timed_iters]
 */
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "kernels.h"

#define OK_CUDA(c)                                                                     \
    do {                                                                               \
        cudaError_t e_ = (c);                                                          \
        if (e_ != cudaSuccess) {                                                       \
            fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)
#define OK_NCCL(c)                                                                     \
    do {                                                                               \
        ncclResult_t r_ = (c);                                                         \
        if (r_ != ncclSuccess) {                                                       \
            fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, ncclGetErrorString(r_)); \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, nranks = 1, ndev = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    size_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 1 << 22;
    int timed = argc > 2 ? (int)strtol(argv[2], NULL, 10) : 10;
    OK_CUDA(cudaGetDeviceCount(&ndev));
    OK_CUDA(cudaSetDevice(rank % ndev));
    ncclUniqueId id;
    if (rank == 0)
        OK_NCCL(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    ncclComm_t comm;
    OK_NCCL(ncclCommInitRank(&comm, nranks, id, rank));
    cudaStream_t s;
    OK_CUDA(cudaStreamCreate(&s));
    float *x;
    OK_CUDA(cudaMalloc(&x, n * sizeof(float)));

    std::vector<double> times;
    for (int it = 0; it <= timed; ++it) {
        auto t0 = std::chrono::steady_clock::now();
        launch_fill(x, n, rank, s);
        OK_NCCL(ncclAllReduce(x, x, n, ncclFloat, ncclSum, comm, s));
        OK_CUDA(launch_scale(x, n, 0.5f, s));
        OK_CUDA(cudaStreamSynchronize(s));
        auto t1 = std::chrono::steady_clock::now();
        if (it > 0)
            times.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    }
    std::vector<float> got(n);
    OK_CUDA(cudaMemcpy(got.data(), x, n * sizeof(float), cudaMemcpyDeviceToHost));
    long bad = 0;
    for (size_t i = 0; i < n; ++i) {
        float want = 0.0f;
        for (int r = 0; r < nranks; ++r)
            want += (float)((i + 3 * (size_t)r) % 13);
        if (fabsf(got[i] - 0.5f * want) > 1e-4f * std::max(1.0f, want))
            bad++;
    }
    long all_bad = 0;
    MPI_Allreduce(&bad, &all_bad, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    std::sort(times.begin(), times.end());
    if (rank == 0) {
        if (all_bad == 0)
            printf("Verification: PASS\n");
        else
            printf("Verification: FAIL %ld elements differ from the scaled sum\n", all_bad);
        printf("CUCO_RESULT {\"time_ms\": %.6f, \"iters\": %d}\n", times.empty() ? 0.0 : times[times.size() / 2],
               timed);
    }
    OK_CUDA(cudaFree(x));
    OK_CUDA(cudaStreamDestroy(s));
    OK_NCCL(ncclCommDestroy(comm));
    MPI_Finalize();
    return all_bad != 0;
}
