/* managed_path.cu: gradients allocated by one of two allocators, chosen at
 * run time: cudaMallocManaged when the job asks for unified memory (a
 * memory-tight run), cudaMalloc otherwise. Each step fills the gradients
 * and sums them over the ranks with ncclAllReduce.
 *
 * Check: after the steps every element is the sum over ranks of its fill.
 *
 * mpirun -np N ./managed_path [elements] [steps] [managed 0|1]
 */
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK_CUDA(call)                                                                           \
    do {                                                                                           \
        cudaError_t status_ = (call);                                                              \
        if (status_ != cudaSuccess) {                                                              \
            fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,                   \
                    cudaGetErrorString(status_));                                                  \
            MPI_Abort(MPI_COMM_WORLD, 2);                                                          \
        }                                                                                          \
    } while (0)
#define CHECK_NCCL(call)                                                                           \
    do {                                                                                           \
        ncclResult_t status_ = (call);                                                             \
        if (status_ != ncclSuccess) {                                                              \
            fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,                   \
                    ncclGetErrorString(status_));                                                  \
            MPI_Abort(MPI_COMM_WORLD, 3);                                                          \
        }                                                                                          \
    } while (0)

__global__ void fill_grads(float *g, size_t n, int rank, int step)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        g[i] = (float)((i + 3 * rank + step) % 17);
}

static float *grads_alloc(size_t n, bool managed)
{
    float *p = nullptr;
    if (managed)
        CHECK_CUDA(cudaMallocManaged(&p, n * sizeof(float)));
    else
        CHECK_CUDA(cudaMalloc(&p, n * sizeof(float)));
    return p;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    size_t n = argc > 1 ? strtoul(argv[1], nullptr, 10) : (1u << 20);
    int steps = argc > 2 ? atoi(argv[2]) : 3;
    bool managed = argc > 3 && atoi(argv[3]) != 0;
    int rank = 0, size = 1, ndev = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK_CUDA(cudaGetDeviceCount(&ndev));
    CHECK_CUDA(cudaSetDevice(rank % ndev));
    ncclUniqueId uid;
    if (rank == 0)
        CHECK_NCCL(ncclGetUniqueId(&uid));
    MPI_Bcast(&uid, sizeof(uid), MPI_BYTE, 0, MPI_COMM_WORLD);
    ncclComm_t comm;
    CHECK_NCCL(ncclCommInitRank(&comm, size, uid, rank));
    cudaStream_t stream;
    CHECK_CUDA(cudaStreamCreate(&stream));
    float *grads = grads_alloc(n, managed);

    cudaEvent_t a, b;
    CHECK_CUDA(cudaEventCreate(&a));
    CHECK_CUDA(cudaEventCreate(&b));
    std::vector<float> times;
    for (int s = 0; s < steps; s++) {
        CHECK_CUDA(cudaEventRecord(a, stream));
        fill_grads<<<256, 256, 0, stream>>>(grads, n, rank, s);
        CHECK_NCCL(ncclAllReduce(grads, grads, n, ncclFloat, ncclSum, comm, stream));
        CHECK_CUDA(cudaEventRecord(b, stream));
        CHECK_CUDA(cudaEventSynchronize(b));
        float ms = 0.0f;
        CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
        times.push_back(ms);
    }
    std::vector<float> h(n);
    CHECK_CUDA(cudaMemcpy(h.data(), grads, n * sizeof(float), cudaMemcpyDeviceToHost));
    long bad = 0;
    for (size_t i = 0; i < n; i++) {
        float want = 0.0f;
        for (int r = 0; r < size; r++)
            want += (float)((i + 3 * r + (steps - 1)) % 17);
        if (!(fabsf(h[i] - want) <= 1e-4f * std::max(1.0f, want)))
            bad++;
    }
    long bad_all = 0;
    MPI_Allreduce(&bad, &bad_all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    std::sort(times.begin(), times.end());
    if (rank == 0) {
        if (bad_all == 0)
            printf("Verification: PASS\n");
        else
            printf("Verification: FAIL %ld elements differ from the sum over ranks\n", bad_all);
        printf("CUCO_RESULT {\"time_ms\": %.6f, \"steps\": %d, \"managed\": %d}\n",
               times.empty() ? 0.0 : (double)times[times.size() / 2], steps, managed ? 1 : 0);
    }
    CHECK_CUDA(cudaEventDestroy(a));
    CHECK_CUDA(cudaEventDestroy(b));
    CHECK_CUDA(cudaFree(grads));
    CHECK_CUDA(cudaStreamDestroy(stream));
    CHECK_NCCL(ncclCommDestroy(comm));
    MPI_Finalize();
    return bad_all != 0;
}
