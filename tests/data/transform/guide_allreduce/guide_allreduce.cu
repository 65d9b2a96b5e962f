// guide_allreduce.cu: a program in the style of the NCCL user guide's
// "one device per process" example (MPICHECK/CUDACHECK/NCCLCHECK macros,
// host-name hashing for the local rank, a variable-length array, the
// unique id broadcast over MPI), with a fill kernel, a timed loop of
// out-of-place all-reduces and a check of sampled elements.
//
// mpirun -np N ./guide_allreduce [elements] [iterations]
#include <stdio.h>
#include "cuda_runtime.h"
#include "nccl.h"
#include "mpi.h"
#include <unistd.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MPICHECK(cmd) do {                          \
  int e = cmd;                                      \
  if( e != MPI_SUCCESS ) {                          \
    printf("Failed: MPI error %s:%d '%d'\n",        \
        __FILE__,__LINE__, e);                      \
    exit(EXIT_FAILURE);                             \
  }                                                 \
} while(0)

#define CUDACHECK(cmd) do {                         \
  cudaError_t e = cmd;                              \
  if( e != cudaSuccess ) {                          \
    printf("Failed: Cuda error %s:%d '%s'\n",             \
        __FILE__,__LINE__,cudaGetErrorString(e));   \
    exit(EXIT_FAILURE);                             \
  }                                                 \
} while(0)

#define NCCLCHECK(cmd) do {                         \
  ncclResult_t r = cmd;                             \
  if (r!= ncclSuccess) {                            \
    printf("Failed, NCCL error %s:%d '%s'\n",             \
        __FILE__,__LINE__,ncclGetErrorString(r));   \
    exit(EXIT_FAILURE);                             \
  }                                                 \
} while(0)

static uint64_t getHostHash(const char* string) {
  uint64_t result = 5381;
  for (int c = 0; string[c] != '\0'; c++){
    result = ((result << 5) + result) ^ string[c];
  }
  return result;
}

static void getHostName(char* hostname, int maxlen) {
  gethostname(hostname, maxlen);
  for (int i=0; i< maxlen; i++) {
    if (hostname[i] == '.') {
        hostname[i] = '\0';
        return;
    }
  }
}

__global__ void fill(float* p, int n, int rank) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = (float)((i % 13) * (rank + 1));
}

int main(int argc, char* argv[])
{
  int size = argc > 1 ? atoi(argv[1]) : 32*1024*1024;
  int iters = argc > 2 ? atoi(argv[2]) : 10;
  int myRank, nRanks, localRank = 0;

  MPICHECK(MPI_Init(&argc, &argv));
  MPICHECK(MPI_Comm_rank(MPI_COMM_WORLD, &myRank));
  MPICHECK(MPI_Comm_size(MPI_COMM_WORLD, &nRanks));

  uint64_t hostHashs[nRanks];
  char hostname[1024];
  getHostName(hostname, 1024);
  hostHashs[myRank] = getHostHash(hostname);
  MPICHECK(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, hostHashs, sizeof(uint64_t), MPI_BYTE, MPI_COMM_WORLD));
  for (int p=0; p<nRanks; p++) {
     if (p == myRank) break;
     if (hostHashs[p] == hostHashs[myRank]) localRank++;
  }

  ncclUniqueId id;
  ncclComm_t comm;
  float *sendbuff, *recvbuff;
  cudaStream_t s;

  if (myRank == 0) ncclGetUniqueId(&id);
  MPICHECK(MPI_Bcast((void *)&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD));

  CUDACHECK(cudaSetDevice(localRank));
  CUDACHECK(cudaMalloc(&sendbuff, size * sizeof(float)));
  CUDACHECK(cudaMalloc(&recvbuff, size * sizeof(float)));
  CUDACHECK(cudaStreamCreate(&s));

  NCCLCHECK(ncclCommInitRank(&comm, nRanks, id, myRank));

  fill<<<(size + 255) / 256, 256, 0, s>>>(sendbuff, size, myRank);
  cudaEvent_t t0, t1;
  cudaEventCreate(&t0); cudaEventCreate(&t1);
  cudaEventRecord(t0, s);
  for (int it = 0; it < iters; it++)
    NCCLCHECK(ncclAllReduce((const void*)sendbuff, (void*)recvbuff, size, ncclFloat, ncclSum,
        comm, s));
  cudaEventRecord(t1, s);
  CUDACHECK(cudaStreamSynchronize(s));
  float ms = 0; cudaEventElapsedTime(&ms, t0, t1);

  float* h = (float*)malloc(size * sizeof(float));
  CUDACHECK(cudaMemcpy(h, recvbuff, size * sizeof(float), cudaMemcpyDeviceToHost));
  int bad = 0, allBad = 0;
  for (int i = 0; i < size; i += 97)
    if (h[i] != (float)((i % 13) * nRanks * (nRanks + 1) / 2)) bad++;
  if (h[size - 1] != (float)(((size - 1) % 13) * nRanks * (nRanks + 1) / 2)) bad++;
  free(h);
  MPICHECK(MPI_Allreduce(&bad, &allBad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  if (myRank == 0) {
    printf("Verification: %s\n", allBad ? "FAIL" : "PASS");
    printf("CUCO_RESULT {\"time_ms\": %f}\n", ms / iters);
  }

  CUDACHECK(cudaFree(sendbuff));
  CUDACHECK(cudaFree(recvbuff));
  ncclCommDestroy(comm);
  MPICHECK(MPI_Finalize());
  return 0;
}
