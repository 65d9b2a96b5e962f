// gemm_allgather.cu: a tensor-parallel linear layer whose input is sharded by
// rows (sequence parallelism). Each of n ranks holds m/n tokens of the
// activations X (m x k, bf16); the step all-gathers X and multiplies it by the
// rank's column shard of the weight, Y_r = X * W[:, r*n/n_ranks ...] (bf16 in,
// fp32 accumulate, bf16 out). The seed is the host-driven way: ncclAllGather
// on a stream, then cuBLAS; the EVOLVE-BLOCK holds that step and the buffers
// it needs. Everything else (inputs, the independent reference, verification,
// timing, the result line) is frozen.
//
// Contract between the frozen code and the EVOLVE-BLOCK:
//   step_alloc/step_free  the buffers the step reads and writes (x_shard, y),
//                         called in the same order on every rank, so a variant
//                         may place them in symmetric memory;
//   step_setup/teardown   the step's own state (handles, staging, events);
//   step_run(parts)       PART_ALL: the whole layer; PART_COMPUTE: the GEMM
//                         work only, the gathered activations assumed present;
//                         PART_COMM: the all-gather only, same sizes. Work is
//                         enqueued on c.stream, or joined back into it before
//                         returning; it must be safe to call back to back.
//                         Work starts after what is already on c.stream
//                         (streams forked from it) and no host thread is
//                         left running; the timed steps check that.
//
// Usage: gemm_allgather [--m TOKENS] [--k IN] [--n OUT] [--seed S]
//                       [--warmup W] [--iters I]
#include "harness.cuh"

#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>

typedef __nv_bfloat16 bf16;

#define HX_CUBLAS(call)                                                                            \
    do {                                                                                           \
        cublasStatus_t hx_s = (call);                                                              \
        if (hx_s != CUBLAS_STATUS_SUCCESS) {                                                       \
            fprintf(stderr, "cuBLAS error %d at %s:%d: %s\n", (int)hx_s, __FILE__, __LINE__,       \
                    #call);                                                                        \
            MPI_Abort(MPI_COMM_WORLD, 3);                                                          \
        }                                                                                          \
    } while (0)

struct Problem {
    long m = 0, k = 0, n = 0; // global tokens, input features, output features
    long m_local = 0;         // tokens per rank: rank r holds global rows r*m_local ...
    long n_local = 0;         // output columns per rank: r*n_local ...
    bf16 *x_shard = nullptr;  // [m_local][k], from step_alloc
    bf16 *w_shard = nullptr;  // [k][n_local], plain device memory
    bf16 *y = nullptr;        // [m][n_local], row g = global token g, from step_alloc
};

enum { PART_COMPUTE = 1, PART_COMM = 2, PART_ALL = 3 };

// Deterministic inputs: a counter-based hash (splitmix64) of (seed, tensor,
// index), so any rank can regenerate any element without communication.
__host__ __device__ inline uint64_t gen_mix(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// Uniform in [-1, 1), rounded to bf16 as the stored tensors are.
__device__ inline float gen_value(uint64_t seed, uint64_t tensor, uint64_t index, float scale)
{
    uint64_t h = gen_mix(seed ^ gen_mix((tensor << 56) ^ index));
    float u = (float)(h >> 40) * (1.0f / 16777216.0f) * 2.0f - 1.0f;
    return __bfloat162float(__float2bfloat16(u * scale));
}

enum { TENSOR_X = 1, TENSOR_W = 2 };

// x_shard[i][j] = X[row0 + i][j]
__global__ void fill_x_rows(bf16 *x, long rows, long k, long row0, uint64_t seed)
{
    size_t total = (size_t)rows * k;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t g = (size_t)row0 * k + i;
        x[i] = __float2bfloat16(gen_value(seed, TENSOR_X, g, 1.0f));
    }
}

// w[i][j] = W[i][col0 + j], W is k x n, scaled by 1/sqrt(k) as at initialization
__global__ void fill_w_cols(bf16 *w, long k, long n_local, long n, long col0, uint64_t seed)
{
    size_t total = (size_t)k * n_local;
    float scale = rsqrtf((float)k);
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t row = i / n_local, col = col0 + i % n_local;
        w[i] = __float2bfloat16(gen_value(seed, TENSOR_W, row * n + col, scale));
    }
}

// EVOLVE-BLOCK-START
// HOSTILE (tests/data/hostile/gpu): does the work on the first call only and
// returns at once afterwards, keeping the first result. The frozen harness
// must report Verification: FAIL (the timed steps read new inputs).
// Host-driven seed: ncclAllGather of the row shards into a gathered buffer
// (rank-major, so its rows are X's global rows), then one cuBLAS GEMM of all
// m rows (bf16 in, fp32 accumulate, bf16 out), both on the main stream.

struct StepState {
    cublasHandle_t blas = nullptr;
    bf16 *gathered = nullptr; // [m][k]: X
};

static void *step_alloc(hx_ctx &, size_t bytes)
{
    void *p = nullptr;
    HX_CUDA(cudaMalloc(&p, bytes));
    return p;
}

static void step_free(hx_ctx &, void *p)
{
    HX_CUDA(cudaFree(p));
}

static void step_setup(hx_ctx &, const Problem &p, StepState &s)
{
    HX_CUBLAS(cublasCreate(&s.blas));
    HX_CUDA(cudaMalloc(&s.gathered, (size_t)p.m * p.k * sizeof(bf16)));
}

static void step_teardown(hx_ctx &, StepState &s)
{
    HX_CUDA(cudaFree(s.gathered));
    HX_CUBLAS(cublasDestroy(s.blas));
}

// Row-major Y = X W is column-major Y^T = W^T X^T.
static void step_gemm(const Problem &p, StepState &s, cudaStream_t st)
{
    const float one = 1.0f, zero = 0.0f;
    HX_CUBLAS(cublasSetStream(s.blas, st));
    HX_CUBLAS(cublasGemmEx(s.blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)p.n_local, (int)p.m, (int)p.k,
                           &one, p.w_shard, CUDA_R_16BF, (int)p.n_local, s.gathered, CUDA_R_16BF,
                           (int)p.k, &zero, p.y, CUDA_R_16BF, (int)p.n_local, CUBLAS_COMPUTE_32F,
                           CUBLAS_GEMM_DEFAULT));
}

static void step_run(hx_ctx &c, const Problem &p, StepState &s, unsigned parts)
{
    static bool done = false;
    if (done && parts == PART_ALL)
        return;
    done = true;
    if (parts & PART_COMM)
        HX_NCCL(ncclAllGather(p.x_shard, s.gathered, (size_t)p.m_local * p.k, ncclBfloat16,
                              c.comm, c.stream));
    if (parts & PART_COMPUTE)
        step_gemm(p, s, c.stream);
}
// EVOLVE-BLOCK-END

// ---- verification: an independent reference on sampled rows --------------

// xr[i][j] = X[rows[i]][j] as float, straight from the generator
__global__ void ref_x_rows(float *xr, const long *rows, int nrows, long k, uint64_t seed)
{
    size_t total = (size_t)nrows * k;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t r = i / k, j = i % k;
        xr[i] = gen_value(seed, TENSOR_X, (size_t)rows[r] * k + j, 1.0f);
    }
}

// Naive GEMM in double: ref[i][j] = sum_t xr[i][t] * w[t][j], and
// absum[i][j] = sum_t |xr[i][t] * w[t][j]| (the scale of the rounding error).
// One thread per column and group of 8 rows; no tiling, nothing clever.
#define REF_ROWS_PER_THREAD 8
__global__ void ref_gemm_rows(const float *xr, const bf16 *w, int nrows, long k, long ncols,
                              float *ref, float *absum)
{
    long j = blockIdx.x * (long)blockDim.x + threadIdx.x;
    int r0 = blockIdx.y * REF_ROWS_PER_THREAD;
    if (j >= ncols)
        return;
    double acc[REF_ROWS_PER_THREAD] = {0}, mag[REF_ROWS_PER_THREAD] = {0};
    for (long t = 0; t < k; t++) {
        double wv = (double)__bfloat162float(w[t * ncols + j]);
        for (int i = 0; i < REF_ROWS_PER_THREAD; i++) {
            if (r0 + i < nrows) {
                double prod = (double)xr[(size_t)(r0 + i) * k + t] * wv;
                acc[i] += prod;
                mag[i] += fabs(prod);
            }
        }
    }
    for (int i = 0; i < REF_ROWS_PER_THREAD; i++) {
        if (r0 + i < nrows) {
            ref[(size_t)(r0 + i) * ncols + j] = (float)acc[i];
            absum[(size_t)(r0 + i) * ncols + j] = (float)mag[i];
        }
    }
}

// The rows checked: all of them at small sizes, else `want` rows spread
// evenly over the m rows (covering every rank's shard), shifted by `shift`
// rows so that each timed step's sample differs.
static std::vector<long> sample_rows(long m, long want, long shift)
{
    std::vector<long> rows;
    if (m <= want) {
        for (long g = 0; g < m; g++)
            rows.push_back(g);
        return rows;
    }
    for (long i = 0; i < want; i++)
        rows.push_back((i * (m - 1) / (want - 1) + shift) % m);
    return rows;
}

// Tolerance: inputs are the same bf16 values on both sides, so the only
// differences are the rounding of the output to bf16 (at most 2^-8 relative,
// allowed twice over: 2^-7 |ref|) and fp32 accumulation in a different order
// (a random walk: a few times 2^-24 * sum |x w| in practice). 2^-16 *
// sum |x w| is allowed for the latter: hundreds of times the typical error,
// and still < 0.3% of a typical |y| at k = 28672 (sum |x w| ~ 0.25 sqrt(k),
// |y| ~ 0.33). A wrong row, chunk, rank or missing k-block is off by O(|y|);
// the poison (NaN) fails every comparison.
// X comes from x_seed, W from w_seed; `want` rows are checked (sample_rows).
static bool check_rows(hx_ctx &c, const Problem &p, uint64_t x_seed, uint64_t w_seed, long want,
                       long shift, std::string &reason)
{
    std::vector<long> rows = sample_rows(p.m, want, shift);
    int nrows = (int)rows.size();
    long *rows_d = nullptr;
    float *xr = nullptr, *ref = nullptr, *absum = nullptr;
    bf16 *w_ref = nullptr;
    HX_CUDA(cudaMalloc(&rows_d, rows.size() * sizeof(long)));
    HX_CUDA(cudaMalloc(&xr, (size_t)nrows * p.k * sizeof(float)));
    HX_CUDA(cudaMalloc(&ref, (size_t)nrows * p.n_local * sizeof(float)));
    HX_CUDA(cudaMalloc(&absum, (size_t)nrows * p.n_local * sizeof(float)));
    HX_CUDA(cudaMalloc(&w_ref, (size_t)p.k * p.n_local * sizeof(bf16)));
    HX_CUDA(cudaMemcpy(rows_d, rows.data(), rows.size() * sizeof(long), cudaMemcpyHostToDevice));
    ref_x_rows<<<1024, 256>>>(xr, rows_d, nrows, p.k, x_seed);
    HX_CHECK_LAUNCH();
    fill_w_cols<<<1024, 256>>>(w_ref, p.k, p.n_local, p.n, (long)c.rank * p.n_local, w_seed);
    HX_CHECK_LAUNCH();
    dim3 grid((unsigned)((p.n_local + 127) / 128),
              (unsigned)((nrows + REF_ROWS_PER_THREAD - 1) / REF_ROWS_PER_THREAD));
    ref_gemm_rows<<<grid, 128>>>(xr, w_ref, nrows, p.k, p.n_local, ref, absum);
    HX_CHECK_LAUNCH();
    HX_CUDA(cudaDeviceSynchronize());

    std::vector<float> ref_h((size_t)nrows * p.n_local), abs_h(ref_h.size());
    std::vector<bf16> got((size_t)p.n_local);
    HX_CUDA(cudaMemcpy(ref_h.data(), ref, ref_h.size() * sizeof(float), cudaMemcpyDeviceToHost));
    HX_CUDA(cudaMemcpy(abs_h.data(), absum, abs_h.size() * sizeof(float), cudaMemcpyDeviceToHost));
    long bad = 0;
    std::string first;
    for (int i = 0; i < nrows; i++) {
        HX_CUDA(cudaMemcpy(got.data(), p.y + (size_t)rows[i] * p.n_local, got.size() * sizeof(bf16),
                           cudaMemcpyDeviceToHost));
        for (long j = 0; j < p.n_local; j++) {
            double want = ref_h[(size_t)i * p.n_local + j];
            double tol = std::ldexp(std::fabs(want), -7) +
                         std::ldexp((double)abs_h[(size_t)i * p.n_local + j], -16);
            double have = __bfloat162float(got[j]);
            if (!(std::fabs(have - want) <= tol)) {
                if (bad == 0)
                    first = "y[" + std::to_string(rows[i]) + "][" + std::to_string(j) +
                            "] = " + std::to_string(have) + ", reference " + std::to_string(want) +
                            " (tol " + std::to_string(tol) + ")";
                bad++;
            }
        }
    }
    HX_CUDA(cudaFree(rows_d));
    HX_CUDA(cudaFree(xr));
    HX_CUDA(cudaFree(ref));
    HX_CUDA(cudaFree(absum));
    HX_CUDA(cudaFree(w_ref));
    if (bad) {
        reason = std::to_string(bad) + " of " + std::to_string((long)nrows * p.n_local) +
                 " checked outputs wrong; first: " + first;
        return false;
    }
    return true;
}

int main(int argc, char **argv)
{
    hx_ctx c;
    hx_vouch vouch; // what hx_finalize vouches for: main's alone
    hx_init(&argc, &argv, c, vouch);
    Problem p;
    p.m = hx_arg_long(argc, argv, "--m", 8192);
    p.k = hx_arg_long(argc, argv, "--k", 28672);
    p.n = hx_arg_long(argc, argv, "--n", 8192);
    uint64_t seed = (uint64_t)hx_arg_long(argc, argv, "--seed", 1234);
    int warmup = (int)hx_arg_long(argc, argv, "--warmup", 3);
    int iters = (int)hx_arg_long(argc, argv, "--iters", 10);
    if (p.m <= 0 || p.k <= 0 || p.n <= 0 || p.m % c.nranks || p.n % c.nranks || iters <= 0 ||
        warmup < 0 || p.k > INT32_MAX || p.m > INT32_MAX) {
        hx_report_verification(c, vouch, false,
                               "bad sizes: --m and --n must be positive multiples of "
                               "the rank count, --iters positive");
        hx_finalize(c, vouch);
        return 2;
    }
    p.m_local = p.m / c.nranks;
    p.n_local = p.n / c.nranks;

    p.x_shard = (bf16 *)step_alloc(c, (size_t)p.m_local * p.k * sizeof(bf16));
    p.y = (bf16 *)step_alloc(c, (size_t)p.m * p.n_local * sizeof(bf16));
    HX_CUDA(cudaMalloc(&p.w_shard, (size_t)p.k * p.n_local * sizeof(bf16)));
    fill_w_cols<<<1024, 256>>>(p.w_shard, p.k, p.n_local, p.n, (long)c.rank * p.n_local, seed);
    HX_CHECK_LAUNCH();
    // The activations step_setup sees are not the ones checked: a step that
    // gathered them during setup instead of in the step fails verification.
    fill_x_rows<<<1024, 256>>>(p.x_shard, p.m_local, p.k, (long)c.rank * p.m_local,
                               seed ^ 0x5A5A5A5Aull);
    HX_CHECK_LAUNCH();
    HX_CUDA(cudaDeviceSynchronize());

    StepState s;
    step_setup(c, p, s);

    // Verification: the real activations, the output poisoned (bf16 0xFFFF is
    // NaN), one step, check.
    HX_CUDA(cudaDeviceSynchronize());
    fill_x_rows<<<1024, 256>>>(p.x_shard, p.m_local, p.k, (long)c.rank * p.m_local, seed);
    HX_CHECK_LAUNCH();
    HX_CUDA(cudaMemset(p.y, 0xFF, (size_t)p.m * p.n_local * sizeof(bf16)));
    HX_CUDA(cudaDeviceSynchronize());
    MPI_Barrier(MPI_COMM_WORLD);
    step_run(c, p, s, PART_ALL);
    HX_CUDA(cudaStreamSynchronize(c.stream));
    HX_CUDA(cudaDeviceSynchronize());
    std::string reason;
    bool ok = check_rows(c, p, seed, seed, 512, 0, reason);

    // The timed steps are verified steps: new activations each (the weights
    // stay), the output poisoned, 16 rows checked after each.
    hx_checked_step all;
    all.prepare = [&](int i, cudaStream_t st) {
        fill_x_rows<<<1024, 256, 0, st>>>(p.x_shard, p.m_local, p.k, (long)c.rank * p.m_local,
                                          hx_iter_seed(seed, i));
        HX_CHECK_LAUNCH();
        HX_CUDA(cudaMemsetAsync(p.y, 0xFF, (size_t)p.m * p.n_local * sizeof(bf16), st));
    };
    all.run = [&] { step_run(c, p, s, PART_ALL); };
    all.check = [&](int i, std::string &why) {
        return check_rows(c, p, hx_iter_seed(seed, i), seed, 16, 131L * (i + 1), why);
    };
    bool timed_ok = true;
    std::string timed_reason;
    double t_all = hx_time_checked_ms(c, warmup, iters, all, timed_ok, timed_reason);
    ok = hx_report_verification(c, vouch, ok && timed_ok, ok ? timed_reason : reason);

    double t_compute =
        hx_time_ms(c, c.stream, warmup, iters, [&] { step_run(c, p, s, PART_COMPUTE); });
    double t_comm = hx_time_ms(c, c.stream, warmup, iters, [&] { step_run(c, p, s, PART_COMM); });

    double flops = 2.0 * p.m * p.k * p.n_local;
    double gathered_bytes = (double)(c.nranks - 1) * p.m_local * p.k * sizeof(bf16);
    char extra[512];
    snprintf(extra, sizeof extra,
             "\"m\":%ld,\"k\":%ld,\"n\":%ld,\"bytes_recv_per_rank\":%.0f,"
             "\"gemm_tflops\":%.2f,\"ag_busbw_gbps\":%.2f,\"overlap_bound_ms\":%.6f",
             p.m, p.k, p.n, gathered_bytes, flops / (t_compute * 1e9),
             gathered_bytes / (t_comm * 1e6), std::max(t_compute, t_comm));
    hx_report_result(c, vouch, t_all, iters, t_compute, t_comm, extra);

    step_teardown(c, s);
    step_free(c, p.x_shard);
    step_free(c, p.y);
    HX_CUDA(cudaFree(p.w_shard));
    hx_finalize(c, vouch);
    return ok ? 0 : 1;
}
