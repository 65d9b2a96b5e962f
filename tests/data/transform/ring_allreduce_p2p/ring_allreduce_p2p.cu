// ring_allreduce_p2p.cu: a ring all-reduce written by hand with
// ncclSend/ncclRecv, the way tutorials teach it: n-1 reduce-scatter steps
// (send a chunk right, receive the left neighbour's chunk into a scratch
// buffer, add it), then n-1 all-gather steps (the reduced chunks travel round
// the ring straight into place). Plain C-style code: one-line check macros
// without do/while, a free function taking raw pointers, malloc'd host copies.
//
// mpirun -np N ./ring_allreduce_p2p [elements] [iterations]
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>

#define CK(x) if ((x) != cudaSuccess) { printf("cuda error line %d\n", __LINE__); MPI_Abort(MPI_COMM_WORLD, 1); }
#define NK(x) if ((x) != ncclSuccess) { printf("nccl error line %d\n", __LINE__); MPI_Abort(MPI_COMM_WORLD, 1); }

__global__ void add_into(float *dst, const float *src, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] += src[i];
}

__global__ void init(float *x, size_t n, int rank, int round)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] = (float)((i * 7 + rank * 3 + round) % 17);
}

void ring_allreduce(float *data, float *tmp, size_t count, int rank, int nranks, ncclComm_t comm,
                    cudaStream_t stream)
{
    size_t chunk = count / nranks;
    int right = (rank + 1) % nranks, left = (rank - 1 + nranks) % nranks;
    for (int s = 0; s < nranks - 1; s++) {
        int send_c = (rank - s + nranks) % nranks, recv_c = (rank - s - 1 + nranks) % nranks;
        ncclGroupStart();
        ncclSend(data + send_c * chunk, chunk, ncclFloat, right, comm, stream);
        ncclRecv(tmp, chunk, ncclFloat, left, comm, stream);
        ncclGroupEnd();
        add_into<<<256, 256, 0, stream>>>(data + recv_c * chunk, tmp, chunk);
    }
    for (int s = 0; s < nranks - 1; s++) {
        int send_c = (rank + 1 - s + nranks) % nranks, recv_c = (rank - s + nranks) % nranks;
        ncclGroupStart();
        ncclSend(data + send_c * chunk, chunk, ncclFloat, right, comm, stream);
        ncclRecv(data + recv_c * chunk, chunk, ncclFloat, left, comm, stream);
        ncclGroupEnd();
    }
}

int main(int argc, char **argv)
{
    int rank, nranks;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    size_t count = (argc > 1 ? (size_t)atol(argv[1]) : (size_t)1 << 24);
    int iters = argc > 2 ? atoi(argv[2]) : 20;
    count -= count % nranks;

    int ndev = 0;
    CK(cudaGetDeviceCount(&ndev));
    CK(cudaSetDevice(rank % ndev));
    ncclUniqueId id;
    if (rank == 0) ncclGetUniqueId(&id);
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    ncclComm_t comm;
    NK(ncclCommInitRank(&comm, nranks, id, rank));

    float *data, *tmp;
    CK(cudaMalloc(&data, count * sizeof(float)));
    CK(cudaMalloc(&tmp, count / nranks * sizeof(float)));
    cudaStream_t stream;
    CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);

    float best = 1e30f;
    int bad = 0;
    for (int it = 0; it <= iters; it++) {
        init<<<512, 256, 0, stream>>>(data, count, rank, it);
        cudaEventRecord(a, stream);
        ring_allreduce(data, tmp, count, rank, nranks, comm, stream);
        cudaEventRecord(b, stream);
        CK(cudaStreamSynchronize(stream));
        float ms;
        cudaEventElapsedTime(&ms, a, b);
        if (it > 0 && ms < best) best = ms;
        // every element is the sum over ranks of init's value
        float *h = (float *)malloc(count * sizeof(float));
        CK(cudaMemcpy(h, data, count * sizeof(float), cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < count; i += 997) {
            float want = 0;
            for (int r = 0; r < nranks; r++) want += (float)((i * 7 + r * 3 + it) % 17);
            if (h[i] != want) bad++;
        }
        free(h);
    }
    int all_bad = 0;
    MPI_Allreduce(&bad, &all_bad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("Verification: %s\n", all_bad ? "FAIL" : "PASS");
        printf("CUCO_RESULT {\"time_ms\": %.4f}\n", best);
    }
    cudaFree(data);
    cudaFree(tmp);
    ncclCommDestroy(comm);
    MPI_Finalize();
    return 0;
}
