/*
 * seqpar_rs.cu -- row-parallel linear layer under sequence parallelism.
 *
 * Every rank holds a slice of the reduction dimension (in / R features) for
 * all T tokens and multiplies it by its rows of W, in bf16 with fp32
 * accumulation (cublasGemmEx). The partial outputs are summed over the ranks
 * and scattered by token: rank r keeps tokens [r T/R, (r+1) T/R) of the sum
 * (ncclReduceScatter into its own shard buffer), then adds the residual.
 *
 * Layout, column-major as cuBLAS sees it:
 *   part  (out x T)       = W_r^T (out x in_r) * X_r (in_r x T)
 *   shard (out x T/R)     = sum over ranks of part[:, r T/R ...]
 *
 * usage: seqpar_rs [-t tokens] [-o out] [-i in] [-n steps] [-k]
 *   -k: the partial product by a hand-written kernel instead of cuBLAS
 */
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>
#include <unistd.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

typedef __nv_bfloat16 bf16;

static int fail(const char *what, const char *file, int line)
{
    fprintf(stderr, "%s:%d: %s failed\n", file, line, what);
    MPI_Abort(MPI_COMM_WORLD, 2);
    return 1;
}
#define CHECK_CUDA(x) ((x) == cudaSuccess || fail(#x, __FILE__, __LINE__))
#define CHECK_NCCL(x) ((x) == ncclSuccess || fail(#x, __FILE__, __LINE__))
#define CHECK_BLAS(x) ((x) == CUBLAS_STATUS_SUCCESS || fail(#x, __FILE__, __LINE__))

/* values with few significant bits, so that bf16 holds them exactly */
__host__ __device__ static float w_val(int i, int o) { return (float)((i * 3 + o * 5) % 9 - 4) / 8.0f; }
__host__ __device__ static float x_val(int i, int t, int step) { return (float)((i + t * 7 + step) % 5 - 2) / 4.0f; }
__host__ __device__ static float r_val(int o, int t) { return (float)((o + t) % 3); }

__global__ void make_inputs(bf16 *x, int in_r, int in0, int tokens, int step)
{
    long n = (long)in_r * tokens;
    for (long k = blockIdx.x * (long)blockDim.x + threadIdx.x; k < n; k += (long)gridDim.x * blockDim.x)
        x[k] = __float2bfloat16(x_val(in0 + (int)(k % in_r), (int)(k / in_r), step));
}

/* the same partial product by hand, one block per token: part row t (the
 * token's out values) from x row t (its in_r features) */
__global__ void partial_tokens(const bf16 *w, const bf16 *x, float *part, int tokens, int in_r, int out)
{
    int t = blockIdx.x;
    if (t >= tokens) return;
    for (int o = threadIdx.x; o < out; o += blockDim.x) {
        float acc = 0.0f;
        for (int i = 0; i < in_r; i++)
            acc += __bfloat162float(w[(size_t)o * in_r + i]) * __bfloat162float(x[(size_t)t * in_r + i]);
        part[(size_t)t * out + o] = acc;
    }
}

__global__ void add_residual(float *shard, int out, int tokens_r, int tok0)
{
    long n = (long)out * tokens_r;
    for (long k = blockIdx.x * (long)blockDim.x + threadIdx.x; k < n; k += (long)gridDim.x * blockDim.x)
        shard[k] += r_val((int)(k % out), tok0 + (int)(k / out));
}

struct layer {
    int tokens, out, in, in_r, in0, ranks, rank;
    int by_hand; /* -k: partial_tokens instead of cuBLAS */
    bf16 *w, *x;
    float *part, *shard;
    cublasHandle_t blas;
    ncclComm_t comm;
    cudaStream_t stream;
};

static void forward(struct layer *L)
{
    const float one = 1.0f, zero = 0.0f;
    int per = L->tokens / L->ranks;
    if (L->by_hand) {
        partial_tokens<<<L->tokens, 128, 0, L->stream>>>(L->w, L->x, L->part, L->tokens, L->in_r, L->out);
        CHECK_NCCL(ncclReduceScatter(L->part, L->shard, (size_t)L->out * per, ncclFloat32, ncclSum,
                                     L->comm, L->stream));
        add_residual<<<512, 256, 0, L->stream>>>(L->shard, L->out, per, L->rank * per);
        return;
    }
    CHECK_BLAS(cublasGemmEx(L->blas, CUBLAS_OP_T, CUBLAS_OP_N, L->out, L->tokens, L->in_r, &one, L->w,
                            CUDA_R_16BF, L->in_r, L->x, CUDA_R_16BF, L->in_r, &zero, L->part, CUDA_R_32F,
                            L->out, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    CHECK_NCCL(ncclReduceScatter(L->part, L->shard, (size_t)L->out * per, ncclFloat32, ncclSum, L->comm,
                                 L->stream));
    add_residual<<<512, 256, 0, L->stream>>>(L->shard, L->out, per, L->rank * per);
}

/* the exact sum of the whole reduction for (o, t), plus the residual */
static double expect(const struct layer *L, int o, int t, int step)
{
    double acc = 0;
    for (int i = 0; i < L->in; i++)
        acc += (double)w_val(i, o) * x_val(i, t, step);
    return acc + r_val(o, t);
}

static int verify(const struct layer *L, const float *got, int step)
{
    int per = L->tokens / L->ranks;
    long n = (long)L->out * per, samples = n < 40000 ? n : 512;
    for (long s = 0; s < samples; s++) {
        long k = samples == n ? s : (s * 104729L + step * 7919L) % n;
        int o = (int)(k % L->out), t = L->rank * per + (int)(k / L->out);
        double want = expect(L, o, t, step);
        if (!(fabs(got[k] - want) <= 1e-3 * (1.0 + fabs(want)))) { /* a NaN fails too */
            fprintf(stderr, "rank %d step %d: shard[%d,%d] = %g, want %g\n", L->rank, step, o, t, got[k], want);
            return 0;
        }
    }
    return 1;
}

static void parse(int argc, char **argv, struct layer *L, int *steps)
{
    int c;
    while ((c = getopt(argc, argv, "t:o:i:n:k")) != -1) {
        int v = optarg ? atoi(optarg) : 0;
        switch (c) {
        case 'k': L->by_hand = 1; break;
        case 't': L->tokens = v; break;
        case 'o': L->out = v; break;
        case 'i': L->in = v; break;
        case 'n': *steps = v; break;
        default: MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
}

int main(int argc, char **argv)
{
    struct layer L = {};
    L.tokens = 128, L.out = 96, L.in = 64;
    int steps = 2, gpus = 1;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &L.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &L.ranks);
    parse(argc, argv, &L, &steps);
    if (L.tokens % L.ranks || L.in % L.ranks) {
        if (L.rank == 0) fprintf(stderr, "tokens and in must be multiples of the ranks\n");
        MPI_Finalize();
        return 1;
    }
    CHECK_CUDA(cudaGetDeviceCount(&gpus));
    CHECK_CUDA(cudaSetDevice(L.rank % gpus));
    L.in_r = L.in / L.ranks;
    L.in0 = L.rank * L.in_r;
    ncclUniqueId id;
    if (L.rank == 0) CHECK_NCCL(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    CHECK_NCCL(ncclCommInitRank(&L.comm, L.ranks, id, L.rank));
    CHECK_CUDA(cudaStreamCreateWithFlags(&L.stream, cudaStreamNonBlocking));
    CHECK_BLAS(cublasCreate(&L.blas));
    CHECK_BLAS(cublasSetStream(L.blas, L.stream));

    int per = L.tokens / L.ranks;
    size_t n_w = (size_t)L.in_r * L.out, n_x = (size_t)L.in_r * L.tokens, n_part = (size_t)L.out * L.tokens;
    CHECK_CUDA(cudaMalloc((void **)&L.w, n_w * sizeof(bf16)));
    CHECK_CUDA(cudaMalloc((void **)&L.x, n_x * sizeof(bf16)));
    CHECK_CUDA(cudaMalloc((void **)&L.part, n_part * sizeof(float)));
    CHECK_CUDA(cudaMalloc((void **)&L.shard, (size_t)L.out * per * sizeof(float)));
    bf16 *hw = (bf16 *)malloc(n_w * sizeof(bf16));
    float *got = (float *)malloc((size_t)L.out * per * sizeof(float));
    if (!hw || !got) fail("malloc", __FILE__, __LINE__);
    for (int o = 0; o < L.out; o++)
        for (int i = 0; i < L.in_r; i++)
            hw[(size_t)o * L.in_r + i] = __float2bfloat16(w_val(L.in0 + i, o));
    CHECK_CUDA(cudaMemcpy(L.w, hw, n_w * sizeof(bf16), cudaMemcpyHostToDevice));

    cudaEvent_t a, b;
    CHECK_CUDA(cudaEventCreate(&a));
    CHECK_CUDA(cudaEventCreate(&b));
    int ok = 1;
    float sum_ms = 0;
    for (int step = 0; step < steps; step++) {
        make_inputs<<<512, 256, 0, L.stream>>>(L.x, L.in_r, L.in0, L.tokens, step);
        CHECK_CUDA(cudaMemsetAsync(L.shard, 0xFF, (size_t)L.out * per * sizeof(float), L.stream));
        CHECK_CUDA(cudaStreamSynchronize(L.stream));
        MPI_Barrier(MPI_COMM_WORLD); /* the ranks start each timed step together */
        CHECK_CUDA(cudaEventRecord(a, L.stream));
        forward(&L);
        CHECK_CUDA(cudaEventRecord(b, L.stream));
        CHECK_CUDA(cudaStreamSynchronize(L.stream));
        float ms = 0;
        CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
        if (step > 0 || steps == 1) sum_ms += ms;
        CHECK_CUDA(cudaMemcpy(got, L.shard, (size_t)L.out * per * sizeof(float), cudaMemcpyDeviceToHost));
        ok = ok && verify(&L, got, step);
    }
    int all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (L.rank == 0) {
        printf("Verification: %s\n", all ? "PASS" : "FAIL");
        printf("CUCO_RESULT {\"time_ms\": %.6f, \"iters\": %d}\n", sum_ms / (steps > 1 ? steps - 1 : 1), steps);
    }
    free(hw);
    free(got);
    cudaFree(L.w);
    cudaFree(L.x);
    cudaFree(L.part);
    cudaFree(L.shard);
    cublasDestroy(L.blas);
    ncclCommDestroy(L.comm);
    MPI_Finalize();
    return all ? 0 : 1;
}
