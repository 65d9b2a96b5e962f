/*
 * tp_mlp_allreduce.cu - tensor-parallel (Megatron-style) row-parallel linear
 * layers.
 *
 * Every rank holds a column slice X[:, r*K:(r+1)*K] of the activations and the
 * matching row slice W[r*K:(r+1)*K, :] of each layer's weight. A tiled GEMM
 * writes the partial product X_r * W_r (tokens x hidden) and an in-place
 * all-reduce sums the partials, so every rank holds X * W. The next layer
 * takes its column slice of relu(X * W) as input.
 *
 * Reference: each rank recomputes the whole network on the host from the
 * same deterministic weights and compares the last layer's output.
 *
 *   mpirun -np N ./tp_mlp_allreduce [-t tokens] [-k cols_per_rank] [-l layers] [-i iters]
 */
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CUDACHECK(cmd) do {                                   \
    cudaError_t err = cmd;                                    \
    if (err != cudaSuccess) {                                 \
        printf("Failed: Cuda error %s:%d '%s'\n",             \
               __FILE__, __LINE__, cudaGetErrorString(err));  \
        MPI_Abort(MPI_COMM_WORLD, 1);                         \
    }                                                         \
} while (0)

#define NCCLCHECK(cmd) do {                                   \
    ncclResult_t res = cmd;                                   \
    if (res != ncclSuccess) {                                 \
        printf("Failed, NCCL error %s:%d '%s'\n",             \
               __FILE__, __LINE__, ncclGetErrorString(res));  \
        MPI_Abort(MPI_COMM_WORLD, 1);                         \
    }                                                         \
} while (0)

#define TILE 16

typedef struct {
    float *w;    /* K x hidden, this rank's rows of the weight */
    float *x;    /* tokens x K, this rank's columns of the input */
    float *out;  /* tokens x hidden, partial then reduced output */
    int k;
    int hidden;
} Layer;

/* deterministic values every rank can regenerate: multiples of 1/64 */
__host__ __device__ static inline float weight_at(int layer, int row, int col, int hidden)
{
    unsigned h = (unsigned)(layer * 7919 + row * 131 + col * 17);
    return ((float)((int)(h % 17u) - 8) / 64.0f) * (16.0f / (float)hidden);
}

__host__ __device__ static inline float input_at(int tok, int col)
{
    return (float)((tok * 5 + col * 3) % 11 - 5) / 8.0f;
}

__global__ void init_weight(float *w, int layer, int row0, int k, int hidden)
{
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < k * hidden)
        w[idx] = weight_at(layer, row0 + idx / hidden, idx % hidden, hidden);
}

__global__ void init_input(float *x, int col0, int tokens, int k)
{
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < tokens * k)
        x[idx] = input_at(idx / k, col0 + idx % k);
}

/* C[m x n] = A[m x k] * B[k x n], row-major, 16x16 shared-memory tiles */
__global__ void gemm_tiled(const float *A, const float *B, float *C, int m, int n, int k)
{
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.f;
    for (int t = 0; t < k; t += TILE) {
        As[threadIdx.y][threadIdx.x] = (row < m && t + threadIdx.x < k) ? A[row * k + t + threadIdx.x] : 0.f;
        Bs[threadIdx.y][threadIdx.x] = (col < n && t + threadIdx.y < k) ? B[(t + threadIdx.y) * n + col] : 0.f;
        __syncthreads();
#pragma unroll
        for (int j = 0; j < TILE; ++j)
            acc += As[threadIdx.y][j] * Bs[j][threadIdx.x];
        __syncthreads();
    }
    if (row < m && col < n)
        C[row * n + col] = acc;
}

/* next layer input: relu of this rank's column slice of the reduced output */
__global__ void slice_relu(const float *y, float *x_next, int tokens, int hidden, int col0, int k)
{
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < tokens * k) {
        float v = y[(idx / k) * hidden + col0 + idx % k];
        x_next[idx] = v > 0.f ? v : 0.f;
    }
}

static void alloc_layer(Layer *l, int tokens, int k, int hidden)
{
    l->k = k;
    l->hidden = hidden;
    CUDACHECK(cudaMalloc(&l->w, sizeof(float) * k * hidden));
    CUDACHECK(cudaMalloc(&l->x, sizeof(float) * tokens * k));
    CUDACHECK(cudaMalloc(&l->out, sizeof(float) * tokens * hidden));
}

static void free_layer(Layer *l)
{
    CUDACHECK(cudaFree(l->w));
    CUDACHECK(cudaFree(l->x));
    CUDACHECK(cudaFree(l->out));
}

/* sums the partial products of all ranks in place (Megatron's _reduce) */
static void reduce_from_tp_region(float *partial, size_t count, ncclComm_t comm, cudaStream_t stream)
{
    NCCLCHECK(ncclAllReduce(partial, partial, count, ncclFloat, ncclSum, comm, stream));
}

static void mlp_forward(Layer *layers, int nlayers, int tokens, int rank, ncclComm_t comm, cudaStream_t s)
{
    for (int i = 0; i < nlayers; ++i) {
        Layer *L = &layers[i];
        dim3 block(TILE, TILE);
        dim3 grid((L->hidden + TILE - 1) / TILE, (tokens + TILE - 1) / TILE);
        gemm_tiled<<<grid, block, 0, s>>>(L->x, L->w, L->out, tokens, L->hidden, L->k);
        reduce_from_tp_region(layers[i].out, (size_t)tokens * L->hidden, comm, s);
        if (i + 1 < nlayers) {
            int n = tokens * L->k;
            slice_relu<<<(n + 255) / 256, 256, 0, s>>>(L->out, layers[i + 1].x, tokens, L->hidden, rank * L->k, L->k);
        }
    }
}

/* the MLP acts on each token alone: the reference recomputes the checked rows */
static void reference_row(std::vector<float> &y, int tok, int hidden, int nlayers)
{
    std::vector<float> x(hidden);
    for (int c = 0; c < hidden; ++c)
        x[c] = input_at(tok, c);
    y.assign(hidden, 0.f);
    for (int l = 0; l < nlayers; ++l) {
        for (int c = 0; c < hidden; ++c) {
            double acc = 0.0;
            for (int r = 0; r < hidden; ++r)
                acc += (double)x[r] * weight_at(l, r, c, hidden);
            y[c] = (float)acc;
        }
        for (int c = 0; c < hidden; ++c)
            x[c] = y[c] > 0.f ? y[c] : 0.f;
    }
}

int main(int argc, char *argv[])
{
    int tokens = 64, k = 64, nlayers = 4, iters = 20;
    for (int a = 1; a + 1 < argc; a += 2) {
        if (!strcmp(argv[a], "-t")) tokens = atoi(argv[a + 1]);
        else if (!strcmp(argv[a], "-k")) k = atoi(argv[a + 1]);
        else if (!strcmp(argv[a], "-l")) nlayers = atoi(argv[a + 1]);
        else if (!strcmp(argv[a], "-i")) iters = atoi(argv[a + 1]);
    }

    int myRank, nRanks, localRank = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &myRank);
    MPI_Comm_size(MPI_COMM_WORLD, &nRanks);
    int nDev = 0;
    CUDACHECK(cudaGetDeviceCount(&nDev));
    localRank = myRank % nDev;
    CUDACHECK(cudaSetDevice(localRank));

    ncclUniqueId id;
    ncclComm_t comm;
    if (myRank == 0) ncclGetUniqueId(&id);
    MPI_Bcast((void *)&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
    NCCLCHECK(ncclCommInitRank(&comm, nRanks, id, myRank));

    cudaStream_t s;
    CUDACHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

    const int hidden = k * nRanks;
    std::vector<Layer> layers(nlayers);
    for (int l = 0; l < nlayers; ++l) {
        alloc_layer(&layers[l], tokens, k, hidden);
        int nw = k * hidden;
        init_weight<<<(nw + 255) / 256, 256, 0, s>>>(layers[l].w, l, myRank * k, k, hidden);
    }
    init_input<<<(tokens * k + 255) / 256, 256, 0, s>>>(layers[0].x, myRank * k, tokens, k);
    CUDACHECK(cudaStreamSynchronize(s));

    mlp_forward(layers.data(), nlayers, tokens, myRank, comm, s);
    CUDACHECK(cudaStreamSynchronize(s));

    std::vector<float> got((size_t)tokens * hidden), want;
    CUDACHECK(cudaMemcpy(got.data(), layers[nlayers - 1].out, got.size() * sizeof(float), cudaMemcpyDeviceToHost));
    /* up to 16 tokens, spread over the batch, the last one included */
    int step = tokens > 16 ? tokens / 16 : 1;
    long bad = 0;
    double maxerr = 0.0;
    for (int t = 0; t < tokens; t += step) {
        int tok = t + step >= tokens ? tokens - 1 : t;
        reference_row(want, tok, hidden, nlayers);
        for (int c = 0; c < hidden; ++c) {
            double err = std::fabs((double)got[(size_t)tok * hidden + c] - want[c]);
            maxerr = std::max(maxerr, err);
            if (err > 1e-3 + 1e-3 * std::fabs(want[c])) ++bad;
        }
    }
    long badAll = 0;
    MPI_Allreduce(&bad, &badAll, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);

    /* timing: median of per-iteration forward passes after warm-up */
    cudaEvent_t e0, e1;
    CUDACHECK(cudaEventCreate(&e0));
    CUDACHECK(cudaEventCreate(&e1));
    for (int it = 0; it < 3; ++it)
        mlp_forward(layers.data(), nlayers, tokens, myRank, comm, s);
    std::vector<float> times;
    for (int it = 0; it < iters; ++it) {
        CUDACHECK(cudaEventRecord(e0, s));
        mlp_forward(layers.data(), nlayers, tokens, myRank, comm, s);
        CUDACHECK(cudaEventRecord(e1, s));
        CUDACHECK(cudaEventSynchronize(e1));
        float ms = 0.f;
        CUDACHECK(cudaEventElapsedTime(&ms, e0, e1));
        times.push_back(ms);
    }
    std::sort(times.begin(), times.end());
    float median = times.empty() ? 0.f : times[times.size() / 2];

    if (myRank == 0) {
        if (badAll)
            printf("Verification: FAIL %ld wrong outputs over all ranks (max error here %g)\n", badAll, maxerr);
        else
            printf("Verification: PASS\n");
        printf("CUCO_RESULT {\"time_ms\": %.6f, \"iters\": %d, \"layers\": %d, \"hidden\": %d}\n",
               median, iters, nlayers, hidden);
    }

    CUDACHECK(cudaEventDestroy(e0));
    CUDACHECK(cudaEventDestroy(e1));
    for (int l = 0; l < nlayers; ++l)
        free_layer(&layers[l]);
    CUDACHECK(cudaStreamDestroy(s));
    ncclCommDestroy(comm);
    MPI_Finalize();
    return badAll != 0;
}
