// no_verify_line.cu: a benchmark that times a broadcast of model weights
// and prints only its timing: nothing checks what the ranks received.
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, world;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    cudaSetDevice(rank);
    size_t count = argc > 1 ? strtoull(argv[1], nullptr, 10) : (size_t)1 << 24;
    int iters = argc > 2 ? atoi(argv[2]) : 20;
    ncclUniqueId uid;
    if (rank == 0)
        ncclGetUniqueId(&uid);
    MPI_Bcast(&uid, sizeof uid, MPI_BYTE, 0, MPI_COMM_WORLD);
    ncclComm_t comm;
    ncclCommInitRank(&comm, world, uid, rank);
    __half *weights;
    cudaMalloc(&weights, count * sizeof(__half));
    cudaMemset(weights, rank == 0 ? 0x3c : 0, count * sizeof(__half));
    cudaStream_t s;
    cudaStreamCreate(&s);
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; i++)
        ncclBroadcast(weights, weights, count, ncclHalf, 0, comm, s);
    cudaStreamSynchronize(s);
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / iters;
    if (rank == 0)
        printf("CUCO_RESULT {\"time_ms\": %.6f, \"iters\": %d}\n", ms, iters);
    cudaFree(weights);
    ncclCommDestroy(comm);
    MPI_Finalize();
    return 0;
}
