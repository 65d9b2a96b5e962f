/* pp_tp_mesh.cu: pipeline stages x tensor-parallel ranks, with the
 * communicators of both axes in one array made by ncclCommSplit.
 *
 * Two stages (one with a single rank): stage 0 fills its activations,
 * gathers them over its tensor-parallel group (ncclAllGather on comms[TP])
 * and sends its rank's block to the same tensor-parallel rank of stage 1
 * (ncclSend on comms[PP]); stage 1 receives first, then gathers over its
 * own group. So the stages' first calls are on different communicators.
 *
 * Check: stage 1's gathered blocks hold stage 0's fills, stage 0's its own.
 *
 * mpirun -np N ./pp_tp_mesh [elements] [steps]   (N even, or 1)
 */
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));            \
            MPI_Abort(MPI_COMM_WORLD, 2);                                                          \
        }                                                                                          \
    } while (0)
#define NK(call)                                                                                   \
    do {                                                                                           \
        ncclResult_t r_ = (call);                                                                  \
        if (r_ != ncclSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, ncclGetErrorString(r_));           \
            MPI_Abort(MPI_COMM_WORLD, 3);                                                          \
        }                                                                                          \
    } while (0)

enum { TP = 0, PP = 1 };

__global__ void fill(float *x, size_t n, float base)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] = base + (float)(i % 11);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    size_t n = argc > 1 ? strtoul(argv[1], nullptr, 10) : (1u << 16);
    int steps = argc > 2 ? atoi(argv[2]) : 3;
    int rank = 0, size = 1, ndev = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CK(cudaGetDeviceCount(&ndev));
    CK(cudaSetDevice(rank % ndev));
    int stages = size >= 2 ? 2 : 1, tp = size / stages, stage = rank / tp, tp_rank = rank % tp;
    ncclUniqueId id;
    if (rank == 0)
        NK(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    ncclComm_t world, comms[2];
    NK(ncclCommInitRank(&world, size, id, rank));
    NK(ncclCommSplit(world, stage, tp_rank, &comms[TP], nullptr));
    NK(ncclCommSplit(world, tp_rank, stage, &comms[PP], nullptr));

    float *act = nullptr, *gath = nullptr;
    CK(cudaMalloc(&act, n * sizeof(float)));
    CK(cudaMalloc(&gath, n * tp * sizeof(float)));
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    CK(cudaEventRecord(a, s));
    for (int it = 0; it < steps; it++) {
        if (stage == 0) {
            fill<<<64, 256, 0, s>>>(act, n, (float)(100 * it + tp_rank));
            NK(ncclAllGather(act, gath, n, ncclFloat, comms[TP], s));
            if (stages == 2)
                NK(ncclSend(gath + (size_t)tp_rank * n, n, ncclFloat, 1, comms[PP], s));
        } else {
            NK(ncclRecv(act, n, ncclFloat, 0, comms[PP], s));
            NK(ncclAllGather(act, gath, n, ncclFloat, comms[TP], s));
        }
    }
    CK(cudaEventRecord(b, s));
    CK(cudaStreamSynchronize(s));
    std::vector<float> h(n * tp);
    CK(cudaMemcpy(h.data(), gath, h.size() * sizeof(float), cudaMemcpyDeviceToHost));
    long bad = 0;
    for (int r = 0; r < tp; r++)
        for (size_t i = 0; i < n; i++)
            bad += h[(size_t)r * n + i] != (float)(100 * (steps - 1) + r) + (float)(i % 11);
    long bad_all = 0;
    MPI_Allreduce(&bad, &bad_all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    float ms = 0.0f;
    CK(cudaEventElapsedTime(&ms, a, b));
    if (rank == 0) {
        if (bad_all == 0)
            printf("Verification: PASS\n");
        else
            printf("Verification: FAIL %ld gathered elements differ\n", bad_all);
        printf("CUCO_RESULT {\"time_ms\": %.6f, \"steps\": %d}\n", (double)ms / steps, steps);
    }
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    CK(cudaFree(act));
    CK(cudaFree(gath));
    CK(cudaStreamDestroy(s));
    NK(ncclCommDestroy(comms[TP]));
    NK(ncclCommDestroy(comms[PP]));
    NK(ncclCommDestroy(world));
    MPI_Finalize();
    return bad_all != 0;
}
