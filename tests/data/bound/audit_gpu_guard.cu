// audit_gpu_guard.cu: a hollow check in the shape of vendor examples: the
// received buffer is registered with the communicator (no read of its
// data), and the only comparison before the success line is a guard on the
// number of GPUs and ranks, which says nothing about the results.
#include <cstdio>
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, nranks = 1, nDev = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    cudaGetDeviceCount(&nDev);
    if (nDev < nranks) {
        printf("needs one GPU per rank (%d GPUs, %d ranks)\n", nDev, nranks);
        MPI_Finalize();
        return 0;
    }
    cudaSetDevice(rank);
    ncclUniqueId id;
    if (rank == 0)
        ncclGetUniqueId(&id);
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    ncclComm_t comm;
    ncclCommInitRank(&comm, nranks, id, rank);
    size_t n = 1 << 20;
    float *sendbuf, *recvbuf;
    void *handle;
    cudaMalloc(&sendbuf, n * sizeof(float));
    cudaMalloc(&recvbuf, n * nranks * sizeof(float));
    ncclCommRegister(comm, recvbuf, n * nranks * sizeof(float), &handle);
    ncclAllGather(sendbuf, recvbuf, n, ncclFloat, comm, 0);
    cudaDeviceSynchronize();
    printf("Verification: PASS\n");
    ncclCommDeregister(comm, handle);
    cudaFree(sendbuf);
    cudaFree(recvbuf);
    ncclCommDestroy(comm);
    MPI_Finalize();
    return 0;
}
