/*
 * stage_handoff.cu: two stages of a pipeline-parallel model, handing the
 * activations of a micro-batch from one GPU to the next. The first stage
 * (rank 0) runs its layers' projections, one cublasGemmEx per layer slab
 * (bf16 in, fp32 out) into one activation buffer, and sends the buffer with
 * ncclSend; the second stage (rank 1) receives it with ncclRecv and runs a
 * row-wise RMSNorm + GELU kernel over every row. With one rank both stages
 * run on it and the handoff is a send to itself inside an NCCL group.
 * Every step's output is checked on rows spread over the buffer against a
 * host reference in double precision (a NaN fails).
 *
 * usage: stage_handoff -l SLABS -t TOKENS -d DIM -k DEPTH -s STEPS
 */
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define DIE(...)                                                                                   \
    do {                                                                                           \
        fprintf(stderr, __VA_ARGS__);                                                              \
        MPI_Abort(MPI_COMM_WORLD, 1);                                                              \
    } while (0)
#define CU(x)                                                                                      \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess)                                                                     \
            DIE("%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));                        \
    } while (0)
#define NC(x)                                                                                      \
    do {                                                                                           \
        ncclResult_t r_ = (x);                                                                     \
        if (r_ != ncclSuccess)                                                                     \
            DIE("%s:%d: %s\n", __FILE__, __LINE__, ncclGetErrorString(r_));                        \
    } while (0)
#define BL(x)                                                                                      \
    do {                                                                                           \
        if ((x) != CUBLAS_STATUS_SUCCESS)                                                          \
            DIE("%s:%d: cuBLAS failed\n", __FILE__, __LINE__);                                     \
    } while (0)

struct Dims {
    int slabs, tokens, dim, depth, steps;
};

static __host__ __device__ float pseudo(unsigned long long i, unsigned salt)
{
    unsigned long long z = (i + 0x632BE59BD9B4E019ull) * 0x9E3779B97F4A7C15ull + salt;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (float)((z >> 40) & 0xFFFF) / 65536.0f - 0.5f;
}

__global__ void fill_bf16(__nv_bfloat16 *p, size_t n, unsigned salt)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = __float2bfloat16(pseudo(i, salt));
}

__device__ __host__ static float gelu(float x) { return 0.5f * x * (1.0f + tanhf(0.7978845608f * (x + 0.044715f * x * x * x))); }

/* y[r] = gelu(x[r] / rms(x[r]) * gamma), one block a row. */
__global__ void rms_gelu(const float *x, const float *gamma, float *y, long rows, int dim)
{
    long r = blockIdx.x;
    if (r >= rows)
        return;
    const float *xr = x + r * dim;
    __shared__ float part[32];
    float s = 0.f;
    for (int j = threadIdx.x; j < dim; j += blockDim.x)
        s += xr[j] * xr[j];
    for (int o = 16; o > 0; o >>= 1)
        s += __shfl_xor_sync(0xffffffffu, s, o);
    if (threadIdx.x % 32 == 0)
        part[threadIdx.x / 32] = s;
    __syncthreads();
    if (threadIdx.x < 32) {
        float t = threadIdx.x < blockDim.x / 32 ? part[threadIdx.x] : 0.f;
        for (int o = 16; o > 0; o >>= 1)
            t += __shfl_xor_sync(0xffffffffu, t, o);
        if (threadIdx.x == 0)
            part[0] = rsqrtf(t / dim + 1e-6f);
    }
    __syncthreads();
    float inv = part[0];
    for (int j = threadIdx.x; j < dim; j += blockDim.x)
        y[r * dim + j] = gelu(xr[j] * inv * gamma[j]);
}

__global__ void fill_gamma(float *g, int dim)
{
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < dim; j += gridDim.x * blockDim.x)
        g[j] = 1.0f + 0.5f * pseudo(j, 99);
}

static float host_bf16(float v) { return __bfloat162float(__float2bfloat16(v)); }

/* The first stage: slab l of acts (tokens x dim, fp32, row-major) is
 * inp_l (tokens x depth) times w_l (depth x dim); then the handoff. */
static void first_stage(cublasHandle_t blas, const __nv_bfloat16 *w, const __nv_bfloat16 *inp, float *acts,
                        const struct Dims *d, ncclComm_t comm, int next, cudaStream_t stream)
{
    const float one = 1.0f, zero = 0.0f;
    size_t slab = (size_t)d->tokens * d->dim;
    for (int l = 0; l < d->slabs; l++)
        BL(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, d->dim, d->tokens, d->depth, &one,
                        w + (size_t)l * d->depth * d->dim, CUDA_R_16BF, d->dim,
                        inp + (size_t)l * d->tokens * d->depth, CUDA_R_16BF, d->depth, &zero,
                        acts + (size_t)l * slab, CUDA_R_32F, d->dim, CUBLAS_COMPUTE_32F,
                        CUBLAS_GEMM_DEFAULT));
    NC(ncclSend(acts, slab * d->slabs, ncclFloat, next, comm, stream));
}

/* The second stage: the handoff, then the norm over every row. */
static void second_stage(float *acts, const float *gamma, float *out, const struct Dims *d, ncclComm_t comm,
                         int prev, cudaStream_t stream)
{
    long rows = (long)d->slabs * d->tokens;
    NC(ncclRecv(acts, (size_t)rows * d->dim, ncclFloat, prev, comm, stream));
    rms_gelu<<<(unsigned)rows, 256, 0, stream>>>(acts, gamma, out, rows, d->dim);
    CU(cudaGetLastError());
}

/* Row r (global over the slabs) of the expected output, checked at 64
 * columns; 0 when one differs (why written). */
static int check_row(const struct Dims *d, const float *got, long r, int step, char *why, size_t len)
{
    int l = (int)(r / d->tokens), t = (int)(r % d->tokens);
    double *x = (double *)malloc(sizeof(double) * d->dim), ss = 0;
    for (int j = 0; j < d->dim; j++) {
        double acc = 0;
        for (int k = 0; k < d->depth; k++)
            acc += (double)host_bf16(pseudo(((size_t)l * d->tokens + t) * d->depth + k, 7 + step)) *
                   host_bf16(pseudo(((size_t)l * d->depth + k) * d->dim + j, 3));
        x[j] = acc;
        ss += acc * acc;
    }
    double inv = 1.0 / sqrt(ss / d->dim + 1e-6);
    int ok = 1;
    for (int q = 0; q < 64 && ok; q++) {
        int j = (int)(((long)q * 2654435761L + r) % d->dim);
        double want = gelu((float)(x[j] * inv * (1.0f + 0.5f * pseudo(j, 99))));
        double g = got[(size_t)r * d->dim + j];
        if (!(fabs(g - want) <= 2e-3 * (1 + fabs(want)))) {
            snprintf(why, len, "step %d row %ld col %d: %g, want %g", step, r, j, g, want);
            ok = 0;
        }
    }
    free(x);
    return ok;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, ranks, gpus, o;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    CU(cudaGetDeviceCount(&gpus));
    CU(cudaSetDevice(rank % gpus));
    struct Dims d = {4, 64, 256, 128, 3};
    while ((o = getopt(argc, argv, "l:t:d:k:s:")) != -1) {
        int v = atoi(optarg);
        if (o == 'l') d.slabs = v;
        else if (o == 't') d.tokens = v;
        else if (o == 'd') d.dim = v;
        else if (o == 'k') d.depth = v;
        else if (o == 's') d.steps = v;
        else DIE("usage: %s -l SLABS -t TOKENS -d DIM -k DEPTH -s STEPS\n", argv[0]);
    }
    ncclUniqueId id;
    if (rank == 0)
        NC(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    ncclComm_t comm;
    NC(ncclCommInitRank(&comm, ranks, id, rank));
    cudaStream_t stream;
    CU(cudaStreamCreate(&stream));
    cublasHandle_t blas;
    BL(cublasCreate(&blas));
    BL(cublasSetStream(blas, stream));

    int first = rank == 0, second = rank == 1 || ranks == 1;
    size_t elems = (size_t)d.slabs * d.tokens * d.dim, wn = (size_t)d.slabs * d.depth * d.dim;
    size_t in_n = (size_t)d.slabs * d.tokens * d.depth;
    __nv_bfloat16 *w = NULL, *inp = NULL;
    float *acts, *out = NULL, *gamma = NULL, *got = NULL;
    CU(cudaMalloc(&acts, elems * sizeof(float)));
    if (first) {
        CU(cudaMalloc(&w, wn * sizeof(*w)));
        CU(cudaMalloc(&inp, in_n * sizeof(*inp)));
        fill_bf16<<<512, 256, 0, stream>>>(w, wn, 3);
    }
    if (second) {
        CU(cudaMalloc(&out, elems * sizeof(float)));
        CU(cudaMalloc(&gamma, d.dim * sizeof(float)));
        fill_gamma<<<16, 256, 0, stream>>>(gamma, d.dim);
        got = (float *)malloc(elems * sizeof(float));
    }
    cudaEvent_t a, b;
    CU(cudaEventCreate(&a));
    CU(cudaEventCreate(&b));
    int ok = 1;
    char why[256] = "";
    float total = 0;
    for (int step = 0; step < d.steps; step++) {
        if (first)
            fill_bf16<<<512, 256, 0, stream>>>(inp, in_n, 7 + step);
        if (second)
            CU(cudaMemsetAsync(out, 0xFF, elems * sizeof(float), stream));
        CU(cudaStreamSynchronize(stream));
        MPI_Barrier(MPI_COMM_WORLD);
        CU(cudaEventRecord(a, stream));
        if (ranks == 1) {
            NC(ncclGroupStart());
            first_stage(blas, w, inp, acts, &d, comm, 0, stream);
            NC(ncclRecv(acts, elems, ncclFloat, 0, comm, stream));
            NC(ncclGroupEnd());
            rms_gelu<<<(unsigned)(elems / d.dim), 256, 0, stream>>>(acts, gamma, out, (long)(elems / d.dim), d.dim);
            CU(cudaGetLastError());
        } else if (first) {
            first_stage(blas, w, inp, acts, &d, comm, 1, stream);
        } else if (second) {
            second_stage(acts, gamma, out, &d, comm, 0, stream);
        }
        CU(cudaEventRecord(b, stream));
        CU(cudaStreamSynchronize(stream));
        float ms = 0;
        CU(cudaEventElapsedTime(&ms, a, b));
        float slowest = ms;
        MPI_Allreduce(&ms, &slowest, 1, MPI_FLOAT, MPI_MAX, MPI_COMM_WORLD);
        if (step > 0 || d.steps == 1)
            total += slowest;
        if (second && ok) {
            CU(cudaMemcpy(got, out, elems * sizeof(float), cudaMemcpyDeviceToHost));
            long rows = (long)d.slabs * d.tokens;
            for (int k = 0; k < 6 && ok; k++)
                ok = check_row(&d, got, (rows - 1) * k / 5, step, why, sizeof why);
        }
    }
    int all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!ok)
        fprintf(stderr, "rank %d: %s\n", rank, why);
    if (rank == 0) {
        printf("Verification: %s\n", all ? "PASS" : "FAIL");
        printf("CUCO_RESULT {\"time_ms\": %.6f, \"steps\": %d}\n", total / (d.steps > 1 ? d.steps - 1 : 1),
               d.steps);
    }
    CU(cudaFree(acts));
    cudaFree(w);
    cudaFree(inp);
    cudaFree(out);
    cudaFree(gamma);
    free(got);
    BL(cublasDestroy(blas));
    NC(ncclCommDestroy(comm));
    MPI_Finalize();
    return all ? 0 : 1;
}
