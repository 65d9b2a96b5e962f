/* split_tp_dp.cu: two communicators, a world one and pairs split from it.
 *
 * The world communicator broadcasts rank 0's weights (ncclBroadcast, root 0);
 * ncclCommSplit then groups ranks in pairs (color = rank / 2) as a
 * tensor-parallel group. Each rank computes a partial matrix-vector product
 * over its half of the columns, and the pair sums the partial products with
 * an ncclAllReduce on the split communicator. With an odd rank count the last
 * rank is alone in its group.
 *
 * Check: the host computes y = W x for the whole matrix and compares each
 * rank's y.
 *
 * mpirun -np N ./split_tp_dp [rows] [iters] [timed_iters]
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

static const int kCols = 512;

struct Groups {
    ncclComm_t world = nullptr;
    ncclComm_t tp = nullptr;
    int world_rank = 0, world_size = 1;
    int tp_rank = 0, tp_size = 1;
};

static void init_groups(Groups &g)
{
    MPI_Comm_rank(MPI_COMM_WORLD, &g.world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g.world_size);
    ncclUniqueId uid;
    if (g.world_rank == 0)
        CHECK_NCCL(ncclGetUniqueId(&uid));
    MPI_Bcast(&uid, sizeof(uid), MPI_BYTE, 0, MPI_COMM_WORLD);
    CHECK_NCCL(ncclCommInitRank(&g.world, g.world_size, uid, g.world_rank));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    CHECK_NCCL(ncclCommSplit(g.world, g.world_rank / 2, g.world_rank, &g.tp, &config));
    CHECK_NCCL(ncclCommUserRank(g.tp, &g.tp_rank));
    CHECK_NCCL(ncclCommCount(g.tp, &g.tp_size));
}

__host__ __device__ static float weight(int r, int c) { return (float)((r * 31 + c * 17) % 29) / 29.0f - 0.5f; }

__global__ void fill_weights(float *w, int rows, int cols, int rank)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < rows * cols)
        w[i] = rank == 0 ? weight(i / cols, i % cols) : -7.0f;
}

/* y_part[r] = sum over this rank's columns of W[r][c] * x[c] */
__global__ void partial_matvec(const float *w, const float *x, float *y_part, int rows, int cols, int c0, int c1)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows)
        return;
    float acc = 0.0f;
    for (int c = c0; c < c1; c++)
        acc += w[r * cols + c] * x[c];
    y_part[r] = acc;
}

static void forward(Groups &g, const float *w, const float *x, float *y, int rows, cudaStream_t s)
{
    int per = kCols / g.tp_size;
    int c0 = g.tp_rank * per, c1 = g.tp_rank == g.tp_size - 1 ? kCols : c0 + per;
    partial_matvec<<<(rows + 127) / 128, 128, 0, s>>>(w, x, y, rows, kCols, c0, c1);
    CHECK_NCCL(ncclAllReduce(y, y, rows, ncclFloat, ncclSum, g.tp, s));
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    Groups g;
    int rows = argc > 1 ? atoi(argv[1]) : 4096;
    int iters = argc > 2 ? atoi(argv[2]) : 2;
    int timed = argc > 3 ? atoi(argv[3]) : 10;
    int ndev = 0;
    CHECK_CUDA(cudaGetDeviceCount(&ndev));
    int me = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    CHECK_CUDA(cudaSetDevice(me % ndev));
    init_groups(g);

    cudaStream_t stream;
    CHECK_CUDA(cudaStreamCreate(&stream));
    float *d_w = nullptr, *d_x = nullptr, *d_y = nullptr;
    CHECK_CUDA(cudaMalloc(&d_w, (size_t)rows * kCols * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&d_x, kCols * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&d_y, rows * sizeof(float)));
    std::vector<float> hx(kCols);
    for (int c = 0; c < kCols; c++)
        hx[c] = (float)(c % 7) - 3.0f;
    CHECK_CUDA(cudaMemcpy(d_x, hx.data(), kCols * sizeof(float), cudaMemcpyHostToDevice));
    fill_weights<<<(rows * kCols + 255) / 256, 256, 0, stream>>>(d_w, rows, kCols, g.world_rank);
    CHECK_NCCL(ncclBroadcast(d_w, d_w, (size_t)rows * kCols, ncclFloat, 0, g.world, stream));
    for (int it = 0; it < iters; it++)
        forward(g, d_w, d_x, d_y, rows, stream);
    CHECK_CUDA(cudaStreamSynchronize(stream));

    std::vector<float> hy(rows);
    CHECK_CUDA(cudaMemcpy(hy.data(), d_y, rows * sizeof(float), cudaMemcpyDeviceToHost));
    long bad = 0;
    for (int r = 0; r < rows; r++) {
        float ref = 0.0f;
        for (int c = 0; c < kCols; c++)
            ref += weight(r, c) * hx[c];
        if (fabsf(hy[r] - ref) > 1e-3f * std::max(1.0f, fabsf(ref)))
            bad++;
    }
    long bad_all = 0;
    MPI_Allreduce(&bad, &bad_all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);

    cudaEvent_t a, b;
    CHECK_CUDA(cudaEventCreate(&a));
    CHECK_CUDA(cudaEventCreate(&b));
    std::vector<float> times;
    for (int it = 0; it < timed + 2; it++) {
        CHECK_CUDA(cudaEventRecord(a, stream));
        forward(g, d_w, d_x, d_y, rows, stream);
        CHECK_CUDA(cudaEventRecord(b, stream));
        CHECK_CUDA(cudaEventSynchronize(b));
        float ms = 0.0f;
        CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
        if (it >= 2)
            times.push_back(ms);
    }
    std::sort(times.begin(), times.end());
    if (g.world_rank == 0) {
        if (bad_all == 0)
            printf("Verification: PASS\n");
        else
            printf("Verification: FAIL %ld outputs differ from the host product\n", bad_all);
        printf("CUCO_RESULT {\"time_ms\": %.6f, \"iters\": %d, \"rows\": %d}\n",
               times.empty() ? 0.0 : (double)times[times.size() / 2], timed, rows);
    }
    CHECK_CUDA(cudaEventDestroy(a));
    CHECK_CUDA(cudaEventDestroy(b));
    CHECK_CUDA(cudaFree(d_y));
    CHECK_CUDA(cudaFree(d_x));
    CHECK_CUDA(cudaFree(d_w));
    CHECK_CUDA(cudaStreamDestroy(stream));
    CHECK_NCCL(ncclCommDestroy(g.tp));
    CHECK_NCCL(ncclCommDestroy(g.world));
    MPI_Finalize();
    return bad_all != 0;
}
