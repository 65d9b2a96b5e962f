/* zero3_backward.cu: the backward pass of a ZeRO-3 (fully sharded) stack
 * of linear layers, written in C. Each rank holds rows [r*dim/R,
 * (r+1)*dim/R) of every layer's dim x dim weight and its own tokens (data
 * parallel). The forward pass stores every layer's input; the backward pass
 * walks the layers from the last to the first: all-gather layer l's weight,
 * the input gradient dx = dy W and the weight gradient dW = dy^T x (two
 * cublasSgemm), then ncclReduceScatter sums dW over the ranks into this
 * rank's rows of the gradient. The weights change before every step (the
 * optimizer's), so a step that used an earlier step's weight fails the
 * check: every gradient shard and the input gradient against a reference
 * in double (cublasDgemm on weights made from the generator).
 * Usage: zero3_backward [--layers L] [--dim D] [--tokens T] [--iters I] */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <math.h>
#include <mpi.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TRY(x)                                                                                     \
    do {                                                                                           \
        if ((x) != 0) {                                                                            \
            fprintf(stderr, "%s:%d: %s failed\n", __FILE__, __LINE__, #x);                         \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)

typedef struct {
    int layers, dim, tokens, rank, ranks;
    float **w_shard; /* [layers] -> (dim / ranks) x dim */
    float **g_shard; /* [layers] -> (dim / ranks) x dim: the gradient's rows */
    float **x;       /* [layers + 1] -> tokens x dim: each layer's input */
    float *w_full;   /* dim x dim: the gathered weight */
    float *g_full;   /* dim x dim: this rank's weight gradient */
    float *dy, *dx;  /* tokens x dim */
    cublasHandle_t blas;
    ncclComm_t comm;
    cudaStream_t stream;
} zstack;

/* scaled by 1/sqrt(dim): the activations keep their size from layer to
 * layer, and a float sum's rounding stays far below the tolerance */
__host__ __device__ static float weight(int step, int l, int o, int i, int dim)
{
    return (float)(((l * 37 + o * 11 + i * 5 + step * 3) % 19) - 9) / (3.0f * sqrtf((float)dim));
}
__host__ __device__ static float input_of(int rank, int t, int i)
{
    return (float)(((rank * 7 + t * 3 + i) % 13) - 6) / 13.0f;
}
__host__ __device__ static float out_grad(int rank, int t, int i)
{
    return (float)(((rank * 5 + t + i * 3) % 11) - 5) / 11.0f;
}

__global__ void fill_shard(float *w, int step, int l, int row0, int rows, int dim)
{
    for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < (size_t)rows * dim;
         k += (size_t)gridDim.x * blockDim.x)
        w[k] = weight(step, l, row0 + (int)(k / dim), (int)(k % dim), dim);
}

__global__ void fill_tokens(float *x, int rank, int tokens, int dim, int grad)
{
    for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < (size_t)tokens * dim;
         k += (size_t)gridDim.x * blockDim.x)
        x[k] = grad ? out_grad(rank, (int)(k / dim), (int)(k % dim))
                    : input_of(rank, (int)(k / dim), (int)(k % dim));
}

static int stack_init(zstack *s)
{
    size_t rows = (size_t)(s->dim / s->ranks), act = (size_t)s->tokens * s->dim;
    s->w_shard = (float **)calloc(s->layers, sizeof(float *));
    s->g_shard = (float **)calloc(s->layers, sizeof(float *));
    s->x = (float **)calloc(s->layers + 1, sizeof(float *));
    if (!s->w_shard || !s->g_shard || !s->x)
        return -1;
    for (int l = 0; l < s->layers; l++) {
        TRY(cudaMalloc((void **)&s->w_shard[l], rows * s->dim * sizeof(float)));
        TRY(cudaMalloc((void **)&s->g_shard[l], rows * s->dim * sizeof(float)));
    }
    for (int l = 0; l <= s->layers; l++)
        TRY(cudaMalloc((void **)&s->x[l], act * sizeof(float)));
    TRY(cudaMalloc((void **)&s->w_full, (size_t)s->dim * s->dim * sizeof(float)));
    TRY(cudaMalloc((void **)&s->g_full, (size_t)s->dim * s->dim * sizeof(float)));
    TRY(cudaMalloc((void **)&s->dy, act * sizeof(float)));
    TRY(cudaMalloc((void **)&s->dx, act * sizeof(float)));
    TRY(cublasCreate(&s->blas));
    TRY(cublasSetStream(s->blas, s->stream));
    return 0;
}

/* the step's weights (the optimizer's), the batch and the output gradient */
static int prepare(zstack *s, int step)
{
    int rows = s->dim / s->ranks;
    for (int l = 0; l < s->layers; l++)
        fill_shard<<<128, 256, 0, s->stream>>>(s->w_shard[l], step, l, s->rank * rows, rows,
                                               s->dim);
    fill_tokens<<<128, 256, 0, s->stream>>>(s->x[0], s->rank, s->tokens, s->dim, 0);
    fill_tokens<<<128, 256, 0, s->stream>>>(s->dy, s->rank, s->tokens, s->dim, 1);
    TRY(cudaGetLastError());
    return 0;
}

/* x[l + 1] = x[l] W_l^T for every layer, keeping each input */
static int forward(zstack *s)
{
    const float one = 1.0f, zero = 0.0f;
    size_t shard_n = (size_t)(s->dim / s->ranks) * s->dim;
    for (int l = 0; l < s->layers; l++) {
        TRY(ncclAllGather(s->w_shard[l], s->w_full, shard_n, ncclFloat, s->comm, s->stream));
        TRY(cublasSgemm(s->blas, CUBLAS_OP_T, CUBLAS_OP_N, s->dim, s->tokens, s->dim, &one,
                        s->w_full, s->dim, s->x[l], s->dim, &zero, s->x[l + 1], s->dim));
    }
    return 0;
}

/* from the last layer to the first: dx = dy W_l, dW_l = dy^T x_l summed
 * over the ranks into this rank's rows; dy becomes dx */
static int backward(zstack *s)
{
    const float one = 1.0f, zero = 0.0f;
    size_t shard_n = (size_t)(s->dim / s->ranks) * s->dim;
    for (int l = s->layers - 1; l >= 0; l--) {
        TRY(ncclAllGather(s->w_shard[l], s->w_full, shard_n, ncclFloat, s->comm, s->stream));
        /* column-major: dx^T (dim x tokens) = W^T (W row-major: OP_N) dy^T */
        TRY(cublasSgemm(s->blas, CUBLAS_OP_N, CUBLAS_OP_N, s->dim, s->tokens, s->dim, &one,
                        s->w_full, s->dim, s->dy, s->dim, &zero, s->dx, s->dim));
        /* dW^T (column-major dim x dim) = x^T dy: dW row-major = dy^T x */
        TRY(cublasSgemm(s->blas, CUBLAS_OP_N, CUBLAS_OP_T, s->dim, s->dim, s->tokens, &one, s->x[l],
                        s->dim, s->dy, s->dim, &zero, s->g_full, s->dim));
        TRY(ncclReduceScatter(s->g_full, s->g_shard[l], shard_n, ncclFloat, ncclSum, s->comm,
                              s->stream));
        TRY(cudaMemcpyAsync(s->dy, s->dx, (size_t)s->tokens * s->dim * sizeof(float),
                            cudaMemcpyDeviceToDevice, s->stream));
    }
    return 0;
}

/* The reference, in double on the GPU (cublasDgemm) from the generators
 * (not the shards): every rank's tokens through the forward pass, then the
 * backward pass layer by layer over all ranks at once (the weight gradient
 * sums them). */
__global__ void ref_weight(double *w, int step, int l, int dim)
{
    for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < (size_t)dim * dim;
         k += (size_t)gridDim.x * blockDim.x)
        w[k] = weight(step, l, (int)(k / dim), (int)(k % dim), dim);
}

__global__ void ref_tokens(double *x, int rank, int tokens, int dim, int grad)
{
    for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < (size_t)tokens * dim;
         k += (size_t)gridDim.x * blockDim.x)
        x[k] = grad ? out_grad(rank, (int)(k / dim), (int)(k % dim))
                    : input_of(rank, (int)(k / dim), (int)(k % dim));
}

/* *sum += the squares of want */
__global__ void sum_squares(const double *want, size_t n, double *sum)
{
    double acc = 0.0;
    for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < n;
         k += (size_t)gridDim.x * blockDim.x)
        acc += want[k] * want[k];
    atomicAdd(sum, acc);
}

/* counts the values of got off want by more than tol */
__global__ void count_wrong(const float *got, const double *want, size_t n, double tol, int *bad)
{
    for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < n;
         k += (size_t)gridDim.x * blockDim.x)
        if (!(fabs((double)got[k] - want[k]) <= tol))
            atomicAdd(bad, 1);
}

/* the reference's buffers: ref_xs [ranks][layers + 1][tokens x dim],
 * ref_dy [ranks][tokens x dim] */
typedef struct {
    double *ref_w, *ref_dw, *ref_xs, *ref_dy, *ref_dx, *ref_sum;
    int *bad;
    cublasHandle_t blas;
} ref_t;

/* counts into r->bad the values of got off the n values of want by more
 * than 1e-3 of want's root mean square: a float sum's rounding stays far
 * below it, and a stale or missing weight moves every value by about that
 * much */
static int compare(ref_t *r, const float *got, const double *want, size_t n)
{
    double sum = 0.0;
    TRY(cudaMemset(r->ref_sum, 0, sizeof(double)));
    sum_squares<<<256, 256>>>(want, n, r->ref_sum);
    TRY(cudaMemcpy(&sum, r->ref_sum, sizeof(double), cudaMemcpyDeviceToHost));
    count_wrong<<<256, 256>>>(got, want, n, 1e-3 * sqrt(sum / (double)n) + 1e-12, r->bad);
    TRY(cudaGetLastError());
    return 0;
}

static int ref_forward(const zstack *s, ref_t *r, int step)
{
    const double one = 1.0, zero = 0.0;
    size_t act = (size_t)s->tokens * s->dim;
    for (int q = 0; q < s->ranks; q++) {
        double *xs = r->ref_xs + (size_t)q * (s->layers + 1) * act;
        ref_tokens<<<256, 256>>>(xs, q, s->tokens, s->dim, 0);
        ref_tokens<<<256, 256>>>(r->ref_dy + (size_t)q * act, q, s->tokens, s->dim, 1);
    }
    for (int l = 0; l < s->layers; l++) {
        ref_weight<<<256, 256>>>(r->ref_w, step, l, s->dim);
        for (int q = 0; q < s->ranks; q++) {
            double *xs = r->ref_xs + (size_t)q * (s->layers + 1) * act;
            TRY(cublasDgemm(r->blas, CUBLAS_OP_T, CUBLAS_OP_N, s->dim, s->tokens, s->dim, &one,
                            r->ref_w, s->dim, xs + l * act, s->dim, &zero, xs + (l + 1) * act,
                            s->dim));
        }
    }
    return 0;
}

/* the weight gradient's rows of this rank and the input gradient of its
 * tokens, against the reference; the number of values wrong */
static int ref_check(const zstack *s, ref_t *r, int step)
{
    const double one = 1.0, zero = 0.0;
    size_t act = (size_t)s->tokens * s->dim, rows = (size_t)(s->dim / s->ranks);
    if (ref_forward(s, r, step) != 0)
        return -1;
    TRY(cudaMemset(r->bad, 0, sizeof(int)));
    for (int l = s->layers - 1; l >= 0; l--) {
        ref_weight<<<256, 256>>>(r->ref_w, step, l, s->dim);
        for (int q = 0; q < s->ranks; q++) {
            const double *x = r->ref_xs + ((size_t)q * (s->layers + 1) + l) * act;
            double *dy = r->ref_dy + (size_t)q * act;
            TRY(cublasDgemm(r->blas, CUBLAS_OP_N, CUBLAS_OP_T, s->dim, s->dim, s->tokens, &one, x,
                            s->dim, dy, s->dim, q == 0 ? &zero : &one, r->ref_dw, s->dim));
            TRY(cublasDgemm(r->blas, CUBLAS_OP_N, CUBLAS_OP_N, s->dim, s->tokens, s->dim, &one,
                            r->ref_w, s->dim, dy, s->dim, &zero, r->ref_dx, s->dim));
            TRY(cudaMemcpy(dy, r->ref_dx, act * sizeof(double), cudaMemcpyDeviceToDevice));
        }
        TRY(compare(r, s->g_shard[l], r->ref_dw + (size_t)s->rank * rows * s->dim, rows * s->dim));
    }
    TRY(compare(r, s->dy, r->ref_dy + (size_t)s->rank * act, act));
    int bad = 0;
    TRY(cudaMemcpy(&bad, r->bad, sizeof(int), cudaMemcpyDeviceToHost));
    return bad;
}

static int ref_init(const zstack *s, ref_t *r)
{
    size_t act = (size_t)s->tokens * s->dim, dd = (size_t)s->dim * s->dim;
    TRY(cudaMalloc((void **)&r->ref_w, dd * sizeof(double)));
    TRY(cudaMalloc((void **)&r->ref_dw, dd * sizeof(double)));
    TRY(cudaMalloc((void **)&r->ref_xs, (size_t)s->ranks * (s->layers + 1) * act * sizeof(double)));
    TRY(cudaMalloc((void **)&r->ref_dy, (size_t)s->ranks * act * sizeof(double)));
    TRY(cudaMalloc((void **)&r->ref_dx, act * sizeof(double)));
    TRY(cudaMalloc((void **)&r->bad, sizeof(int)));
    TRY(cudaMalloc((void **)&r->ref_sum, sizeof(double)));
    TRY(cublasCreate(&r->blas));
    return 0;
}

static int arg(int argc, char **argv, const char *name, int dflt)
{
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], name))
            return (int)strtol(argv[i + 1], NULL, 10);
    return dflt;
}

static int run(zstack *s, int iters)
{
    cudaEvent_t a, b;
    float total = 0.0f;
    int bad = 0;
    ref_t ref;
    TRY(ref_init(s, &ref));
    TRY(cudaEventCreate(&a));
    TRY(cudaEventCreate(&b));
    for (int step = 0; step <= iters; step++) { /* step 0 warms up */
        if (prepare(s, step) != 0 || forward(s) != 0)
            return -1;
        TRY(cudaStreamSynchronize(s->stream));
        MPI_Barrier(MPI_COMM_WORLD);
        TRY(cudaEventRecord(a, s->stream));
        if (backward(s) != 0)
            return -1;
        TRY(cudaEventRecord(b, s->stream));
        TRY(cudaEventSynchronize(b));
        float ms = 0.0f;
        TRY(cudaEventElapsedTime(&ms, a, b));
        if (step > 0)
            total += ms;
        if (step == 0 || step == iters) {
            TRY(cudaDeviceSynchronize());
            int wrong = ref_check(s, &ref, step);
            if (wrong < 0)
                return -1;
            bad += wrong;
        }
    }
    int all = 0;
    float mean = total / (float)iters, worst = 0.0f;
    MPI_Allreduce(&bad, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&mean, &worst, 1, MPI_FLOAT, MPI_MAX, MPI_COMM_WORLD);
    if (s->rank == 0) {
        if (all == 0)
            printf("Verification: PASS\n");
        else
            printf("Verification: FAIL %d values wrong\n", all);
        printf("CUCO_RESULT {\"time_ms\": %.6f, \"iters\": %d}\n", worst, iters);
    }
    return all == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    zstack s;
    memset(&s, 0, sizeof s);
    MPI_Comm_rank(MPI_COMM_WORLD, &s.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &s.ranks);
    s.layers = arg(argc, argv, "--layers", 3);
    s.dim = arg(argc, argv, "--dim", 64);
    s.tokens = arg(argc, argv, "--tokens", 16);
    int iters = arg(argc, argv, "--iters", 2), ndev = 0;
    cudaGetDeviceCount(&ndev);
    cudaSetDevice(s.rank % (ndev > 0 ? ndev : 1));
    ncclUniqueId id;
    if (s.rank == 0)
        ncclGetUniqueId(&id);
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    if (s.dim % s.ranks != 0 || ncclCommInitRank(&s.comm, s.ranks, id, s.rank) != ncclSuccess ||
        cudaStreamCreate(&s.stream) != cudaSuccess || stack_init(&s) != 0) {
        fprintf(stderr, "setup failed\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    int rc = run(&s, iters);
    if (rc < 0)
        MPI_Abort(MPI_COMM_WORLD, 1);
    ncclCommDestroy(s.comm);
    MPI_Finalize();
    return rc;
}
