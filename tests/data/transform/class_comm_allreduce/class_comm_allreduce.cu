/* class_comm_allreduce.cu: data-parallel least squares with the communicator
 * wrapped in a C++ class.
 *
 * NcclCommunicator owns the ncclComm_t and a non-blocking stream; its member
 * functions issue the collectives (in-place ncclAllReduce of the gradient,
 * ncclBroadcast of the initial weights from rank 0). Every call is checked by
 * do { } while (0) macros that print and exit. The unique id travels through
 * MPI_Bcast inside a helper. Each rank owns a slice of the samples; a step
 * computes the residuals, the local gradient, sums the gradients across ranks
 * and applies gradient descent.
 *
 * Check: the host recomputes the same steps over all samples and compares
 * the weights of every rank.
 *
 * mpirun -np N ./class_comm_allreduce [features] [steps] [timed_iters]
 */
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CUDACHECK(cmd)                                                                       \
    do {                                                                                     \
        cudaError_t e = cmd;                                                                 \
        if (e != cudaSuccess) {                                                              \
            fprintf(stderr, "Failed: Cuda error %s:%d '%s'\n", __FILE__, __LINE__,           \
                    cudaGetErrorString(e));                                                  \
            exit(EXIT_FAILURE);                                                              \
        }                                                                                    \
    } while (0)

#define NCCLCHECK(cmd)                                                                       \
    do {                                                                                     \
        ncclResult_t r = cmd;                                                                \
        if (r != ncclSuccess) {                                                              \
            fprintf(stderr, "Failed, NCCL error %s:%d '%s'\n", __FILE__, __LINE__,           \
                    ncclGetErrorString(r));                                                  \
            exit(EXIT_FAILURE);                                                              \
        }                                                                                    \
    } while (0)

#define MPICHECK(cmd)                                                                        \
    do {                                                                                     \
        int e = cmd;                                                                         \
        if (e != MPI_SUCCESS) {                                                              \
            fprintf(stderr, "Failed: MPI error %s:%d '%d'\n", __FILE__, __LINE__, e);        \
            exit(EXIT_FAILURE);                                                              \
        }                                                                                    \
    } while (0)

static const int kSamplesPerRank = 512;

static ncclUniqueId shared_unique_id(int rank)
{
    ncclUniqueId id;
    if (rank == 0)
        NCCLCHECK(ncclGetUniqueId(&id));
    MPICHECK(MPI_Bcast((void *)&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD));
    return id;
}

class NcclCommunicator {
  public:
    NcclCommunicator(int rank, int nranks) : rank_(rank), nranks_(nranks)
    {
        ncclUniqueId id = shared_unique_id(rank);
        NCCLCHECK(ncclCommInitRank(&comm_, nranks, id, rank));
        CUDACHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    }
    ~NcclCommunicator()
    {
        cudaStreamDestroy(stream_);
        ncclCommDestroy(comm_);
    }
    void allReduceSum(float *buf, size_t count)
    {
        NCCLCHECK(ncclAllReduce(buf, buf, count, ncclFloat, ncclSum, comm_, stream_));
    }
    void broadcastFrom(float *buf, size_t count, int root)
    {
        NCCLCHECK(ncclBroadcast(buf, buf, count, ncclFloat, root, comm_, stream_));
    }
    void synchronize() { CUDACHECK(cudaStreamSynchronize(stream_)); }
    cudaStream_t stream() const { return stream_; }
    int rank() const { return rank_; }
    int size() const { return nranks_; }

  private:
    int rank_, nranks_;
    ncclComm_t comm_;
    cudaStream_t stream_;
};

__host__ __device__ static float feature(int sample, int j) { return (float)((sample * 7 + j * 3) % 11) / 11.0f - 0.5f; }
__host__ __device__ static float target(int sample) { return (float)(sample % 5) - 2.0f; }

__global__ void residuals(const float *w, float *res, int first, int nsamples, int nfeat)
{
    int s = blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= nsamples)
        return;
    float acc = 0.0f;
    for (int j = 0; j < nfeat; j++)
        acc += feature(first + s, j) * w[j];
    res[s] = acc - target(first + s);
}

__global__ void gradient(const float *res, float *grad, int first, int nsamples, int nfeat)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= nfeat)
        return;
    float acc = 0.0f;
    for (int s = 0; s < nsamples; s++)
        acc += feature(first + s, j) * res[s];
    grad[j] = acc;
}

__global__ void descend(float *w, const float *grad, int nfeat, float scale)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j < nfeat)
        w[j] -= scale * grad[j];
}

static void train_step(NcclCommunicator &nccl, float *w, float *res, float *grad, int nfeat, float lr)
{
    int first = nccl.rank() * kSamplesPerRank;
    cudaStream_t s = nccl.stream();
    residuals<<<(kSamplesPerRank + 127) / 128, 128, 0, s>>>(w, res, first, kSamplesPerRank, nfeat);
    gradient<<<(nfeat + 127) / 128, 128, 0, s>>>(res, grad, first, kSamplesPerRank, nfeat);
    nccl.allReduceSum(grad, nfeat);
    descend<<<(nfeat + 127) / 128, 128, 0, s>>>(w, grad, nfeat, lr / (float)(kSamplesPerRank * nccl.size()));
}

int main(int argc, char **argv)
{
    MPICHECK(MPI_Init(&argc, &argv));
    int rank, nranks;
    MPICHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    MPICHECK(MPI_Comm_size(MPI_COMM_WORLD, &nranks));
    int nfeat = argc > 1 ? atoi(argv[1]) : 256;
    int steps = argc > 2 ? atoi(argv[2]) : 4;
    int timed = argc > 3 ? atoi(argv[3]) : 10;
    const float lr = 0.1f;
    int ndev = 0;
    CUDACHECK(cudaGetDeviceCount(&ndev));
    CUDACHECK(cudaSetDevice(rank % ndev));

    long bad_all = 0;
    std::vector<float> times;
    {
        NcclCommunicator nccl(rank, nranks);
        float *w, *res, *grad;
        CUDACHECK(cudaMalloc(&w, nfeat * sizeof(float)));
        CUDACHECK(cudaMalloc(&res, kSamplesPerRank * sizeof(float)));
        CUDACHECK(cudaMalloc(&grad, nfeat * sizeof(float)));

        /* only rank 0's initial weights count: the broadcast replaces the others */
        std::vector<float> w0(nfeat);
        for (int j = 0; j < nfeat; j++)
            w0[j] = rank == 0 ? 0.01f * (float)(j % 13) : 1000.0f + rank;
        CUDACHECK(cudaMemcpy(w, w0.data(), nfeat * sizeof(float), cudaMemcpyHostToDevice));
        nccl.broadcastFrom(w, nfeat, 0);
        for (int it = 0; it < steps; it++)
            train_step(nccl, w, res, grad, nfeat, lr);
        nccl.synchronize();

        std::vector<float> got(nfeat), ref(nfeat), rres(kSamplesPerRank * nranks);
        CUDACHECK(cudaMemcpy(got.data(), w, nfeat * sizeof(float), cudaMemcpyDeviceToHost));
        for (int j = 0; j < nfeat; j++)
            ref[j] = 0.01f * (float)(j % 13);
        int total = kSamplesPerRank * nranks;
        for (int it = 0; it < steps; it++) {
            for (int s = 0; s < total; s++) {
                float acc = 0.0f;
                for (int j = 0; j < nfeat; j++)
                    acc += feature(s, j) * ref[j];
                rres[s] = acc - target(s);
            }
            std::vector<float> g(nfeat, 0.0f);
            for (int s = 0; s < total; s++)
                for (int j = 0; j < nfeat; j++)
                    g[j] += feature(s, j) * rres[s];
            for (int j = 0; j < nfeat; j++)
                ref[j] -= lr / (float)total * g[j];
        }
        long bad = 0;
        for (int j = 0; j < nfeat; j++)
            if (fabsf(got[j] - ref[j]) > 1e-3f * std::max(1.0f, fabsf(ref[j])))
                bad++;
        MPICHECK(MPI_Allreduce(&bad, &bad_all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));

        cudaEvent_t t0, t1;
        CUDACHECK(cudaEventCreate(&t0));
        CUDACHECK(cudaEventCreate(&t1));
        for (int it = 0; it < timed + 2; it++) {
            CUDACHECK(cudaEventRecord(t0, nccl.stream()));
            train_step(nccl, w, res, grad, nfeat, lr);
            CUDACHECK(cudaEventRecord(t1, nccl.stream()));
            CUDACHECK(cudaEventSynchronize(t1));
            float ms = 0.0f;
            CUDACHECK(cudaEventElapsedTime(&ms, t0, t1));
            if (it >= 2)
                times.push_back(ms);
        }
        CUDACHECK(cudaEventDestroy(t0));
        CUDACHECK(cudaEventDestroy(t1));
        CUDACHECK(cudaFree(grad));
        CUDACHECK(cudaFree(res));
        CUDACHECK(cudaFree(w));
    }
    std::sort(times.begin(), times.end());
    if (rank == 0) {
        if (bad_all == 0)
            printf("Verification: PASS\n");
        else
            printf("Verification: FAIL %ld weights differ from the host replay\n", bad_all);
        printf("CUCO_RESULT {\"time_ms\": %.6f, \"iters\": %d, \"features\": %d}\n",
               times.empty() ? 0.0 : (double)times[times.size() / 2], timed, nfeat);
    }
    MPICHECK(MPI_Finalize());
    return bad_all != 0;
}
