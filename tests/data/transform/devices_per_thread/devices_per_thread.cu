// devices_per_thread.cu: the layout of NCCL's documentation example "multiple
// devices per thread": MPI ranks, each driving nDev GPUs (argv[3], default 1),
// the communicators made by ncclCommInitRank in a loop inside one NCCL group,
// the all-reduces of every device issued in another group. cuco drives one
// GPU per process: with nDev 1 the program is transformed and verified; with
// more, its guard stops it with a message (it must not hang).
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#include <chrono>
#include "cuda_runtime.h"
#include "mpi.h"
#include "nccl.h"

#define MPICHECK(cmd) do { int e = cmd; if (e != MPI_SUCCESS) { printf("Failed: MPI error %s:%d '%d'\n", __FILE__, __LINE__, e); exit(EXIT_FAILURE); } } while (0)
#define CUDACHECK(cmd) do { cudaError_t e = cmd; if (e != cudaSuccess) { printf("Failed: Cuda error %s:%d '%s'\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(EXIT_FAILURE); } } while (0)
#define NCCLCHECK(cmd) do { ncclResult_t r = cmd; if (r != ncclSuccess) { printf("Failed, NCCL error %s:%d '%s'\n", __FILE__, __LINE__, ncclGetErrorString(r)); exit(EXIT_FAILURE); } } while (0)

__global__ void init_values(float *x, int size, int global_rank, int iter)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < size; i += gridDim.x * blockDim.x)
        x[i] = (float)((i + iter) % 13) + global_rank;
}

int main(int argc, char *argv[])
{
    int size = argc > 1 ? atoi(argv[1]) : 32 * 1024 * 1024;
    int iters = argc > 2 ? atoi(argv[2]) : 10;
    int nDev = argc > 3 ? atoi(argv[3]) : 1;
    int myRank, nRanks, localRank = 0, nVisible = 1;
    MPICHECK(MPI_Init(&argc, &argv));
    MPICHECK(MPI_Comm_rank(MPI_COMM_WORLD, &myRank));
    MPICHECK(MPI_Comm_size(MPI_COMM_WORLD, &nRanks));
    CUDACHECK(cudaGetDeviceCount(&nVisible));
    localRank = myRank % (nVisible / nDev > 0 ? nVisible / nDev : 1);

    float **sendbuff = (float **)malloc(nDev * sizeof(float *));
    float **recvbuff = (float **)malloc(nDev * sizeof(float *));
    cudaStream_t *s = (cudaStream_t *)malloc(sizeof(cudaStream_t) * nDev);
    for (int i = 0; i < nDev; ++i) {
        CUDACHECK(cudaSetDevice(localRank * nDev + i));
        CUDACHECK(cudaMalloc((void **)sendbuff + i, size * sizeof(float)));
        CUDACHECK(cudaMalloc((void **)recvbuff + i, size * sizeof(float)));
        CUDACHECK(cudaStreamCreate(s + i));
    }

    ncclUniqueId id;
    ncclComm_t *comms = (ncclComm_t *)malloc(sizeof(ncclComm_t) * nDev);
    if (myRank == 0)
        ncclGetUniqueId(&id);
    MPICHECK(MPI_Bcast((void *)&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD));
    NCCLCHECK(ncclGroupStart());
    for (int i = 0; i < nDev; i++) {
        CUDACHECK(cudaSetDevice(localRank * nDev + i));
        NCCLCHECK(ncclCommInitRank(comms + i, nRanks * nDev, id, myRank * nDev + i));
    }
    NCCLCHECK(ncclGroupEnd());

    double ms = 0.0;
    for (int it = 0; it <= iters; it++) {
        for (int i = 0; i < nDev; i++) {
            CUDACHECK(cudaSetDevice(localRank * nDev + i));
            init_values<<<128, 256, 0, s[i]>>>(sendbuff[i], size, myRank * nDev + i, it);
        }
        auto t0 = std::chrono::steady_clock::now();
        NCCLCHECK(ncclGroupStart());
        for (int i = 0; i < nDev; i++)
            NCCLCHECK(ncclAllReduce((const void *)sendbuff[i], (void *)recvbuff[i], size, ncclFloat, ncclSum,
                                    comms[i], s[i]));
        NCCLCHECK(ncclGroupEnd());
        for (int i = 0; i < nDev; i++) {
            CUDACHECK(cudaSetDevice(localRank * nDev + i));
            CUDACHECK(cudaStreamSynchronize(s[i]));
        }
        if (it > 0)
            ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    }

    // the last iteration's sum, element by element, on every device
    int total = nRanks * nDev, bad = 0;
    float *h = (float *)malloc(size * sizeof(float));
    for (int i = 0; i < nDev && !bad; i++) {
        CUDACHECK(cudaSetDevice(localRank * nDev + i));
        CUDACHECK(cudaMemcpy(h, recvbuff[i], size * sizeof(float), cudaMemcpyDeviceToHost));
        for (int k = 0; k < size && !bad; k++)
            bad = h[k] != (float)(total * ((k + iters) % 13) + total * (total - 1) / 2);
    }
    free(h);
    int any_bad = 0;
    MPICHECK(MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    if (myRank == 0) {
        printf("Verification: %s\n", any_bad ? "FAIL a sum differs" : "PASS");
        printf("CUCO_RESULT {\"time_ms\": %.6f, \"iters\": %d}\n", ms / (iters > 0 ? iters : 1), iters);
    }

    for (int i = 0; i < nDev; i++) {
        CUDACHECK(cudaFree(sendbuff[i]));
        CUDACHECK(cudaFree(recvbuff[i]));
    }
    for (int i = 0; i < nDev; i++)
        ncclCommDestroy(comms[i]);
    free(comms);
    free(sendbuff);
    free(recvbuff);
    free(s);
    MPICHECK(MPI_Finalize());
    return any_bad;
}
