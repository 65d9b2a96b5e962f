/* many_buffers.cu: a model whose every tensor is an object owning its own
 * device allocation (RAII), in the style of a small tensor library.
 *
 * Phase 1 (scratch churn): CHURN times, a scratch tensor of a size that
 * changes each time is allocated, filled, summed over the ranks with
 * ncclAllReduce and freed. Phase 2 (many live tensors): TENSORS gradient
 * tensors are alive at once, each filled and all-reduced every step.
 *
 * Check: every all-reduced element equals the sum over ranks of its fill.
 *
 * mpirun -np N ./many_buffers [tensors] [churn] [steps]
 */
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
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

class Tensor {
  public:
    explicit Tensor(size_t n) : n_(n) { CHECK_CUDA(cudaMalloc(&data_, n * sizeof(float))); }
    ~Tensor() { cudaFree(data_); }
    Tensor(const Tensor &) = delete;
    Tensor &operator=(const Tensor &) = delete;
    float *data() const { return data_; }
    size_t size() const { return n_; }

  private:
    float *data_ = nullptr;
    size_t n_ = 0;
};

__global__ void fill(float *x, size_t n, int rank, int tag)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] = (float)((i + 7 * rank + tag) % 13);
}

/* the number of elements of x that differ from the sum over ranks of fill */
static long count_bad(const Tensor &x, int nranks, int tag)
{
    std::vector<float> h(x.size());
    CHECK_CUDA(cudaMemcpy(h.data(), x.data(), h.size() * sizeof(float), cudaMemcpyDeviceToHost));
    long bad = 0;
    for (size_t i = 0; i < h.size(); i++) {
        float want = 0.0f;
        for (int r = 0; r < nranks; r++)
            want += (float)((i + 7 * r + tag) % 13);
        bad += h[i] != want;
    }
    return bad;
}

static void all_reduce(const Tensor &x, int rank, int tag, ncclComm_t comm, cudaStream_t s)
{
    fill<<<32, 128, 0, s>>>(x.data(), x.size(), rank, tag);
    CHECK_NCCL(ncclAllReduce(x.data(), x.data(), x.size(), ncclFloat, ncclSum, comm, s));
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int tensors = argc > 1 ? atoi(argv[1]) : 300;
    int churn = argc > 2 ? atoi(argv[2]) : 300;
    int steps = argc > 3 ? atoi(argv[3]) : 3;
    int rank = 0, nranks = 1, ndev = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    CHECK_CUDA(cudaGetDeviceCount(&ndev));
    CHECK_CUDA(cudaSetDevice(rank % ndev));
    ncclUniqueId uid;
    if (rank == 0)
        CHECK_NCCL(ncclGetUniqueId(&uid));
    MPI_Bcast(&uid, sizeof(uid), MPI_BYTE, 0, MPI_COMM_WORLD);
    ncclComm_t comm;
    CHECK_NCCL(ncclCommInitRank(&comm, nranks, uid, rank));
    cudaStream_t stream;
    CHECK_CUDA(cudaStreamCreate(&stream));
    long bad = 0;
    cudaEvent_t a, b;
    CHECK_CUDA(cudaEventCreate(&a));
    CHECK_CUDA(cudaEventCreate(&b));
    CHECK_CUDA(cudaEventRecord(a, stream));

    for (int c = 0; c < churn; c++) {
        Tensor scratch(1024 + 64 * (size_t)(c % 37));
        all_reduce(scratch, rank, c, comm, stream);
        CHECK_CUDA(cudaStreamSynchronize(stream));
        if (c % 50 == 0)
            bad += count_bad(scratch, nranks, c);
    }
    std::vector<std::unique_ptr<Tensor>> grads;
    for (int t = 0; t < tensors; t++)
        grads.push_back(std::make_unique<Tensor>(256 + 16 * (size_t)(t % 5)));
    for (int s = 0; s < steps; s++)
        for (int t = 0; t < tensors; t++)
            all_reduce(*grads[t], rank, s + t, comm, stream);
    CHECK_CUDA(cudaEventRecord(b, stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));
    for (int t = 0; t < tensors; t += 7)
        bad += count_bad(*grads[t], nranks, steps - 1 + t);
    float ms = 0.0f;
    CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
    long bad_all = 0;
    MPI_Allreduce(&bad, &bad_all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        if (bad_all == 0)
            printf("Verification: PASS\n");
        else
            printf("Verification: FAIL %ld elements differ from the sum over ranks\n", bad_all);
        printf("CUCO_RESULT {\"time_ms\": %.6f, \"tensors\": %d, \"churn\": %d}\n", (double)ms, tensors, churn);
    }
    grads.clear();
    CHECK_CUDA(cudaEventDestroy(a));
    CHECK_CUDA(cudaEventDestroy(b));
    CHECK_CUDA(cudaStreamDestroy(stream));
    CHECK_NCCL(ncclCommDestroy(comm));
    MPI_Finalize();
    return bad_all != 0;
}
