// kv_transfer.cu: disaggregated serving, prefill on one GPU and decode on
// another. Ranks are paired (even = prefill, odd = decode, pair = rank / 2).
// The prefill rank computes the KV cache layer by layer for a prompt of seq
// tokens ([K | V] = X_l [Wk_l | Wv_l], one cuBLAS GEMM per layer, bf16 in,
// fp32 accumulate, bf16 out), the cache moves to the decode rank, and the
// decode rank runs one decode step: for every layer, attention of the new
// token's queries (GQA: q_heads share kv_heads) over the seq cached positions.
// The seed is the host-driven way: all layers computed, then the whole cache
// sent with ncclSend/ncclRecv, then decode. The EVOLVE-BLOCK holds that step
// and the buffers it needs; inputs, the independent reference, verification,
// timing and the result line are frozen.
//
// Contract between the frozen code and the EVOLVE-BLOCK:
//   step_alloc/step_free  the buffers that cross ranks (the cache), called in
//                         the same order on every rank, so a variant may place
//                         them in symmetric memory;
//   step_setup/teardown   the step's own state (handles, workspaces, events);
//   step_run(parts)       PART_PREFILL: the prefill rank's KV GEMMs;
//                         PART_TRANSFER: moving the cache, same sizes, no
//                         compute; PART_DECODE: the decode rank's attention,
//                         the cache assumed present; PART_ALL: the whole step.
//                         Work is enqueued on c.stream, or joined back into it
//                         before returning; it must be safe to call back to back.
//                         Work starts after what is already on c.stream
//                         (streams forked from it) and no host thread is
//                         left running; the timed steps check that.
//
// Usage: kv_transfer [--seq TOKENS] [--layers L] [--hidden H] [--kv-heads G]
//                    [--q-heads Q] [--seed S] [--warmup W] [--iters I]
// (head dimension 128; q-heads a multiple of kv-heads, at most 8 per kv head)
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

#define KV_HEAD_DIM 128
#define KV_MAX_GROUP 8 // query heads per kv head the decode kernels support

enum { ROLE_PREFILL = 0, ROLE_DECODE = 1 };

struct Problem {
    long seq = 0, layers = 0, hidden = 0, kv_heads = 0, q_heads = 0;
    long kv_cols = 0;       // kv_heads * KV_HEAD_DIM: the width of K, and of V
    long row_elems = 0;     // 2 * kv_cols: one cache row is [k_t | v_t]
    size_t layer_elems = 0; // seq * row_elems
    int role = ROLE_PREFILL, peer = 0, pair = 0;
    bf16 *cache = nullptr; // both roles: [layers][seq][row_elems], from step_alloc
    bf16 *x = nullptr;     // prefill: [layers][seq][hidden], layer inputs
    bf16 *w_kv = nullptr;  // prefill: [layers][hidden][row_elems], [Wk | Wv] per layer
    bf16 *q = nullptr;     // decode: [layers][q_heads][KV_HEAD_DIM], the new token's queries
    float *out = nullptr;  // decode: [layers][q_heads][KV_HEAD_DIM], attention outputs
};

enum { PART_PREFILL = 1, PART_TRANSFER = 2, PART_DECODE = 4, PART_ALL = 7 };

// Deterministic inputs: a counter-based hash (splitmix64) of (seed, tensor,
// index), so the decode rank regenerates the prefill inputs for its reference
// without any communication.
__host__ __device__ inline uint64_t gen_mix(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// Uniform in [-1, 1) times scale, rounded to bf16 as the stored tensors are.
__device__ inline float gen_value(uint64_t seed, uint64_t tensor, uint64_t index, float scale)
{
    uint64_t h = gen_mix(seed ^ gen_mix((tensor << 56) ^ index));
    float u = (float)(h >> 40) * (1.0f / 16777216.0f) * 2.0f - 1.0f;
    return __bfloat162float(__float2bfloat16(u * scale));
}

enum { TENSOR_X = 1, TENSOR_W = 2, TENSOR_Q = 3 };

// Each pair of ranks gets its own inputs.
static uint64_t tensor_id(int pair, int which)
{
    return (uint64_t)pair * 4 + which;
}

// dst[i] = generator value index0 + i of the tensor
__global__ void fill_linear(bf16 *dst, size_t count, size_t index0, uint64_t seed, uint64_t tensor,
                            float scale)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count;
         i += (size_t)gridDim.x * blockDim.x)
        dst[i] = __float2bfloat16(gen_value(seed, tensor, index0 + i, scale));
}

// EVOLVE-BLOCK-START
// Host-driven seed. Prefill rank: one cuBLAS GEMM per layer writes the
// layer's [K | V] rows into the cache, then ncclSend of the cache to the
// decode rank. Decode rank: ncclRecv, then flash-decoding attention (split
// over positions, one CTA per split x kv head x layer, shared K/V loads for
// the query heads of a group, then a combine kernel).

// CUCO_DECODE_SPLIT: cached positions per decode CTA.
#define CUCO_DECODE_SPLIT 256 // cuco:knob 128 256 512
#define DEC_THREADS KV_HEAD_DIM

struct StepState {
    cublasHandle_t blas = nullptr;
    int n_split = 1;
    float *part_o = nullptr;   // decode: [layers * q_heads][n_split][KV_HEAD_DIM]
    float2 *part_ml = nullptr; // decode: [layers * q_heads][n_split] (max, sum) in log2 units
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

// Partial attention of the `group` query heads of kv head blockIdx.y in layer
// blockIdx.z over positions [blockIdx.x * CUCO_DECODE_SPLIT, + CUCO_DECODE_SPLIT).
__global__ void __launch_bounds__(DEC_THREADS)
    decode_partial(const bf16 *cache, const bf16 *q, long seq, long row_elems, long kv_cols,
                   int q_heads, int group, int n_split, float *part_o, float2 *part_ml)
{
    __shared__ float qs[KV_MAX_GROUP][KV_HEAD_DIM];
    __shared__ float sc[KV_MAX_GROUP][CUCO_DECODE_SPLIT];
    __shared__ float m_s[KV_MAX_GROUP], l_s[KV_MAX_GROUP];
    const int split = blockIdx.x, g = blockIdx.y, l = blockIdx.z;
    const long t0 = (long)split * CUCO_DECODE_SPLIT;
    const int cnt = (int)min((long)CUCO_DECODE_SPLIT, seq - t0);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = DEC_THREADS / 32;
    const size_t head0 = (size_t)l * q_heads + (size_t)g * group;
    // scores in log2 units: q . k / sqrt(d) * log2(e)
    const float qscale = rsqrtf((float)KV_HEAD_DIM) * 1.4426950408889634f;
    for (int i = threadIdx.x; i < group * KV_HEAD_DIM; i += DEC_THREADS)
        qs[i / KV_HEAD_DIM][i % KV_HEAD_DIM] =
            __bfloat162float(q[head0 * KV_HEAD_DIM + i]) * qscale;
    __syncthreads();

    const bf16 *base = cache + ((size_t)l * seq + t0) * row_elems + (size_t)g * KV_HEAD_DIM;
    for (int t = warp; t < cnt; t += warps) {
        uint2 raw = *reinterpret_cast<const uint2 *>(base + (size_t)t * row_elems + lane * 4);
        float2 k01 = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&raw.x));
        float2 k23 = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&raw.y));
#pragma unroll
        for (int h = 0; h < KV_MAX_GROUP; h++) {
            if (h < group) {
                const float *qh = &qs[h][lane * 4];
                float d = qh[0] * k01.x + qh[1] * k01.y + qh[2] * k23.x + qh[3] * k23.y;
                for (int o = 16; o > 0; o >>= 1)
                    d += __shfl_xor_sync(0xffffffffu, d, o);
                if (lane == 0)
                    sc[h][t] = d;
            }
        }
    }
    __syncthreads();

    for (int h = warp; h < group; h += warps) {
        float mx = -INFINITY;
        for (int t = lane; t < cnt; t += 32)
            mx = fmaxf(mx, sc[h][t]);
        for (int o = 16; o > 0; o >>= 1)
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
        float sum = 0.0f;
        for (int t = lane; t < cnt; t += 32) {
            float pt = exp2f(sc[h][t] - mx);
            sc[h][t] = pt;
            sum += pt;
        }
        for (int o = 16; o > 0; o >>= 1)
            sum += __shfl_xor_sync(0xffffffffu, sum, o);
        if (lane == 0) {
            m_s[h] = mx;
            l_s[h] = sum;
        }
    }
    __syncthreads();

    const int d = threadIdx.x;
    float acc[KV_MAX_GROUP] = {0};
    const bf16 *vcol = base + kv_cols + d;
#pragma unroll 4
    for (int t = 0; t < cnt; t++) {
        float v = __bfloat162float(vcol[(size_t)t * row_elems]);
#pragma unroll
        for (int h = 0; h < KV_MAX_GROUP; h++)
            if (h < group)
                acc[h] += sc[h][t] * v;
    }
#pragma unroll
    for (int h = 0; h < KV_MAX_GROUP; h++)
        if (h < group)
            part_o[((head0 + h) * n_split + split) * KV_HEAD_DIM + d] = acc[h];
    if (d < group)
        part_ml[(head0 + d) * n_split + split] = make_float2(m_s[d], l_s[d]);
}

// out[head][d] for head = blockIdx.y * q_heads + blockIdx.x: the splits'
// partial results rescaled to a common maximum.
__global__ void __launch_bounds__(DEC_THREADS)
    decode_combine(const float *part_o, const float2 *part_ml, int n_split, float *out)
{
    const size_t head = blockIdx.x + (size_t)blockIdx.y * gridDim.x;
    const int d = threadIdx.x;
    float mx = -INFINITY;
    for (int s = 0; s < n_split; s++)
        mx = fmaxf(mx, part_ml[head * n_split + s].x);
    float num = 0.0f, den = 0.0f;
    for (int s = 0; s < n_split; s++) {
        float2 ml = part_ml[head * n_split + s];
        float w = exp2f(ml.x - mx);
        den += ml.y * w;
        num += part_o[(head * n_split + s) * KV_HEAD_DIM + d] * w;
    }
    out[head * KV_HEAD_DIM + d] = num / den;
}

static void step_setup(hx_ctx &, const Problem &p, StepState &s)
{
    HX_CUBLAS(cublasCreate(&s.blas));
    s.n_split = (int)((p.seq + CUCO_DECODE_SPLIT - 1) / CUCO_DECODE_SPLIT);
    if (p.role == ROLE_DECODE) {
        size_t heads = (size_t)p.layers * p.q_heads;
        HX_CUDA(cudaMalloc(&s.part_o, heads * s.n_split * KV_HEAD_DIM * sizeof(float)));
        HX_CUDA(cudaMalloc(&s.part_ml, heads * s.n_split * sizeof(float2)));
    }
}

static void step_teardown(hx_ctx &, StepState &s)
{
    HX_CUDA(cudaFree(s.part_o));
    HX_CUDA(cudaFree(s.part_ml));
    HX_CUBLAS(cublasDestroy(s.blas));
}

// cache rows of layer l = X_l W_l; row-major C = A B is column-major C^T = B^T A^T.
static void step_prefill_layer(const Problem &p, StepState &s, long l, cudaStream_t st)
{
    const float one = 1.0f, zero = 0.0f;
    HX_CUBLAS(cublasSetStream(s.blas, st));
    HX_CUBLAS(cublasGemmEx(s.blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)p.row_elems, (int)p.seq,
                           (int)p.hidden, &one, p.w_kv + (size_t)l * p.hidden * p.row_elems,
                           CUDA_R_16BF, (int)p.row_elems, p.x + (size_t)l * p.seq * p.hidden,
                           CUDA_R_16BF, (int)p.hidden, &zero, p.cache + (size_t)l * p.layer_elems,
                           CUDA_R_16BF, (int)p.row_elems, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

// The whole cache, one message.
static void step_transfer(hx_ctx &c, const Problem &p, cudaStream_t st)
{
    size_t count = (size_t)p.layers * p.layer_elems;
    if (p.role == ROLE_PREFILL) {
        HX_NCCL(ncclSend(p.cache, count, ncclBfloat16, p.peer, c.comm, st));
    } else {
        HX_NCCL(ncclRecv(p.cache, count, ncclBfloat16, p.peer, c.comm, st));
    }
}

static void step_decode(const Problem &p, StepState &s, cudaStream_t st)
{
    int group = (int)(p.q_heads / p.kv_heads);
    dim3 grid((unsigned)s.n_split, (unsigned)p.kv_heads, (unsigned)p.layers);
    decode_partial<<<grid, DEC_THREADS, 0, st>>>(p.cache, p.q, p.seq, p.row_elems, p.kv_cols,
                                                 (int)p.q_heads, group, s.n_split, s.part_o,
                                                 s.part_ml);
    HX_CHECK_LAUNCH();
    decode_combine<<<dim3((unsigned)p.q_heads, (unsigned)p.layers), DEC_THREADS, 0, st>>>(
        s.part_o, s.part_ml, s.n_split, p.out);
    HX_CHECK_LAUNCH();
}

static void step_run(hx_ctx &c, const Problem &p, StepState &s, unsigned parts)
{
    if (p.role == ROLE_DECODE) {
        if (parts & PART_TRANSFER)
            step_transfer(c, p, c.stream);
        if (parts & PART_DECODE)
            step_decode(p, s, c.stream);
        return;
    }
    if (parts & PART_PREFILL)
        for (long l = 0; l < p.layers; l++)
            step_prefill_layer(p, s, l, c.stream);
    if (parts & PART_TRANSFER)
        step_transfer(c, p, c.stream);
}
// EVOLVE-BLOCK-END

// ---- verification: an independent reference on the decode rank ------------

// xr[i][j] = X_l[rows[i]][j] as float, straight from the generator
__global__ void ref_x_rows(float *xr, const long *rows, int nrows, long hidden, size_t index0,
                           uint64_t seed, uint64_t tensor)
{
    size_t total = (size_t)nrows * hidden;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t r = i / hidden, j = i % hidden;
        xr[i] = gen_value(seed, tensor, index0 + (size_t)rows[r] * hidden + j, 1.0f);
    }
}

// Naive GEMM in double: ref[i][j] = sum_t xr[i][t] * w[t][j], and
// absum[i][j] = sum_t |xr[i][t] * w[t][j]| (the scale of the rounding error).
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

struct CompareCounters {
    unsigned long long bad;
    unsigned long long first; // flat index into the checked [nrows][ncols]
};

// Tolerance: both sides start from the same bf16 inputs, so they differ only
// by the rounding of the output to bf16 (at most 2^-8 relative, allowed twice:
// 2^-7 |ref|) and by fp32 accumulation order (a random walk: a few times
// 2^-24 * sum |x w| in practice; 2^-16 * sum |x w| allowed, hundreds of times
// that and ~0.1% of a typical value at k = 4096). A missing, stale, shifted
// or poisoned (NaN) row is off by O(|ref|).
__global__ void compare_rows(const bf16 *got, const long *rows, int nrows, long ncols,
                             const float *ref, const float *absum, CompareCounters *cnt)
{
    size_t total = (size_t)nrows * ncols;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t r = i / ncols, j = i % ncols;
        float have = __bfloat162float(got[(size_t)rows[r] * ncols + j]);
        float tol = ldexpf(fabsf(ref[i]), -7) + ldexpf(absum[i], -16);
        if (!(fabsf(have - ref[i]) <= tol)) {
            atomicAdd(&cnt->bad, 1ull);
            atomicMin(&cnt->first, (unsigned long long)i);
        }
    }
}

__global__ void to_bf16(bf16 *dst, const float *src, size_t count)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count;
         i += (size_t)gridDim.x * blockDim.x)
        dst[i] = __float2bfloat16(src[i]);
}

// Plain attention in double for one layer, one CTA per query head:
// o[h][d] = sum_t softmax_t(q_h . k_t / sqrt(d)) v_t[d], and
// mag[h][d] = sum_t p_t |v_t[d]| (the scale of the rounding error).
// kv: [seq][row_elems] rows [k | v]; scratch: [q_heads][seq].
__global__ void ref_attention(const bf16 *kv, const bf16 *q, long seq, long row_elems, long kv_cols,
                              int group, double *scratch, float *o, float *mag)
{
    __shared__ double red[KV_HEAD_DIM];
    const int h = blockIdx.x, g = h / group, d = threadIdx.x;
    const bf16 *qh = q + (size_t)h * KV_HEAD_DIM;
    double *sc = scratch + (size_t)h * seq;
    double mx = -INFINITY;
    for (long t = d; t < seq; t += blockDim.x) {
        const bf16 *kt = kv + (size_t)t * row_elems + (size_t)g * KV_HEAD_DIM;
        double dot = 0;
        for (int e = 0; e < KV_HEAD_DIM; e++)
            dot += (double)__bfloat162float(qh[e]) * (double)__bfloat162float(kt[e]);
        sc[t] = dot / sqrt((double)KV_HEAD_DIM);
        mx = fmax(mx, sc[t]);
    }
    red[d] = mx;
    __syncthreads();
    if (d == 0)
        for (int i = 1; i < (int)blockDim.x; i++)
            red[0] = fmax(red[0], red[i]);
    __syncthreads();
    mx = red[0];
    __syncthreads();
    double sum = 0;
    for (long t = d; t < seq; t += blockDim.x) {
        sc[t] = exp(sc[t] - mx);
        sum += sc[t];
    }
    red[d] = sum;
    __syncthreads();
    if (d == 0)
        for (int i = 1; i < (int)blockDim.x; i++)
            red[0] += red[i];
    __syncthreads();
    sum = red[0];
    double acc = 0, am = 0;
    for (long t = 0; t < seq; t++) {
        double v = (double)__bfloat162float(
            kv[(size_t)t * row_elems + kv_cols + (size_t)g * KV_HEAD_DIM + d]);
        acc += sc[t] * v;
        am += sc[t] * fabs(v);
    }
    o[(size_t)h * KV_HEAD_DIM + d] = (float)(acc / sum);
    mag[(size_t)h * KV_HEAD_DIM + d] = (float)(am / sum);
}

static std::vector<long> sample_rows(long n, long want)
{
    std::vector<long> rows;
    if (n <= want) {
        for (long i = 0; i < n; i++)
            rows.push_back(i);
        return rows;
    }
    for (long i = 0; i < want; i++)
        rows.push_back(i * (n - 1) / (want - 1));
    return rows;
}

// Tolerance of the decode output: the step and the reference read the same
// bf16 cache (the received one, or the reference cache rounded to bf16, which
// can differ from cuBLAS's by one rounding in rare elements, each weighted by
// p_t ~ 1/seq); fp32 scores, exp2f and the split-and-combine sums add about
// 1e-6 relative. 2^-12 of sum_t p_t |v_t| (0.024%) is far above both and
// below what dropping one split, one position at verify size, or scaling
// the scores wrongly does.
static long compare_attention(const std::vector<float> &have, const std::vector<float> &want,
                              const std::vector<float> &mag, long layer, const char *what,
                              std::string &first)
{
    long bad = 0;
    for (size_t i = 0; i < want.size(); i++) {
        double tol = std::ldexp((double)mag[i], -12) + 1e-7;
        if (!(std::fabs((double)have[i] - want[i]) <= tol)) {
            if (bad == 0 && first.empty())
                first = std::string("decode output vs attention over the ") + what + ", layer " +
                        std::to_string(layer) + " head " + std::to_string(i / KV_HEAD_DIM) +
                        " dim " + std::to_string(i % KV_HEAD_DIM) + ": " + std::to_string(have[i]) +
                        ", reference " + std::to_string(want[i]);
            bad++;
        }
    }
    return bad;
}

// Decode rank: every layer's cache on sampled rows (all rows of the first,
// middle and last layer, or of every layer at small sizes) against K/V
// recomputed here from regenerated inputs (the prompt from x_seed, the
// weights from seed); every layer's decode output against plain attention
// over the received cache; and, for the fully recomputed layers, against
// attention over the recomputed cache. light (a timed step's check): only
// layer `iter` mod layers and the last, 8 rows of each, shifted by iter.
static bool check_decode(const Problem &p, uint64_t x_seed, uint64_t seed, bool light, int iter,
                         std::string &reason)
{
    const int group = (int)(p.q_heads / p.kv_heads);
    const uint64_t tx = tensor_id(p.pair, TENSOR_X), tw = tensor_id(p.pair, TENSOR_W);
    const size_t w_elems = (size_t)p.hidden * p.row_elems;
    const size_t head_elems = (size_t)p.q_heads * KV_HEAD_DIM;
    const bool all_full = !light && (size_t)p.seq * p.layers <= 16384;
    std::vector<long> full_rows = sample_rows(p.seq, p.seq),
                      some_rows = sample_rows(p.seq, light ? 8 : 64);
    if (light)
        for (long &r : some_rows)
            r = (r + 97L * (iter + 1)) % p.seq;
    long max_rows = p.seq;

    long *full_d = nullptr, *some_d = nullptr;
    float *xr = nullptr, *ref = nullptr, *absum = nullptr, *o_ref = nullptr, *o_mag = nullptr;
    bf16 *w_ref = nullptr, *cache_ref = nullptr;
    double *scratch = nullptr;
    CompareCounters *cnt = nullptr;
    HX_CUDA(cudaMalloc(&full_d, full_rows.size() * sizeof(long)));
    HX_CUDA(cudaMalloc(&some_d, some_rows.size() * sizeof(long)));
    HX_CUDA(cudaMalloc(&xr, (size_t)max_rows * p.hidden * sizeof(float)));
    HX_CUDA(cudaMalloc(&ref, (size_t)max_rows * p.row_elems * sizeof(float)));
    HX_CUDA(cudaMalloc(&absum, (size_t)max_rows * p.row_elems * sizeof(float)));
    HX_CUDA(cudaMalloc(&w_ref, w_elems * sizeof(bf16)));
    HX_CUDA(cudaMalloc(&cache_ref, p.layer_elems * sizeof(bf16)));
    HX_CUDA(cudaMalloc(&scratch, (size_t)p.q_heads * p.seq * sizeof(double)));
    HX_CUDA(cudaMalloc(&o_ref, head_elems * sizeof(float)));
    HX_CUDA(cudaMalloc(&o_mag, head_elems * sizeof(float)));
    HX_CUDA(cudaMalloc(&cnt, sizeof(CompareCounters)));
    HX_CUDA(cudaMemcpy(full_d, full_rows.data(), full_rows.size() * sizeof(long),
                       cudaMemcpyHostToDevice));
    HX_CUDA(cudaMemcpy(some_d, some_rows.data(), some_rows.size() * sizeof(long),
                       cudaMemcpyHostToDevice));

    std::vector<float> out_h((size_t)p.layers * head_elems), want(head_elems), mag(head_elems);
    HX_CUDA(cudaMemcpy(out_h.data(), p.out, out_h.size() * sizeof(float), cudaMemcpyDeviceToHost));
    long bad_cache = 0, bad_out = 0, checked_cache = 0;
    std::string first;
    for (long l = 0; l < p.layers; l++) {
        if (light && l != iter % p.layers && l != p.layers - 1)
            continue;
        bool full = !light && (all_full || l == 0 || l == p.layers / 2 || l == p.layers - 1);
        const long *rows_d = full ? full_d : some_d;
        const std::vector<long> &rows = full ? full_rows : some_rows;
        int nrows = (int)rows.size();
        const bf16 *got = p.cache + (size_t)l * p.layer_elems;
        std::vector<float> have(out_h.begin() + (size_t)l * head_elems,
                                out_h.begin() + (size_t)(l + 1) * head_elems);

        fill_linear<<<1024, 256>>>(w_ref, w_elems, (size_t)l * w_elems, seed, tw,
                                   1.0f / std::sqrt((float)p.hidden));
        HX_CHECK_LAUNCH();
        ref_x_rows<<<1024, 256>>>(xr, rows_d, nrows, p.hidden, (size_t)l * p.seq * p.hidden, x_seed,
                                  tx);
        HX_CHECK_LAUNCH();
        dim3 grid((unsigned)((p.row_elems + 127) / 128),
                  (unsigned)((nrows + REF_ROWS_PER_THREAD - 1) / REF_ROWS_PER_THREAD));
        ref_gemm_rows<<<grid, 128>>>(xr, w_ref, nrows, p.hidden, p.row_elems, ref, absum);
        HX_CHECK_LAUNCH();
        CompareCounters zero = {0ull, ~0ull};
        HX_CUDA(cudaMemcpy(cnt, &zero, sizeof zero, cudaMemcpyHostToDevice));
        compare_rows<<<1024, 256>>>(got, rows_d, nrows, p.row_elems, ref, absum, cnt);
        HX_CHECK_LAUNCH();
        CompareCounters res;
        HX_CUDA(cudaMemcpy(&res, cnt, sizeof res, cudaMemcpyDeviceToHost));
        checked_cache += (long)nrows * p.row_elems;
        if (res.bad) {
            if (first.empty()) {
                size_t r = res.first / p.row_elems, j = res.first % p.row_elems;
                bf16 g_val;
                float r_val;
                HX_CUDA(cudaMemcpy(&g_val, got + (size_t)rows[r] * p.row_elems + j, sizeof g_val,
                                   cudaMemcpyDeviceToHost));
                HX_CUDA(cudaMemcpy(&r_val, ref + res.first, sizeof r_val, cudaMemcpyDeviceToHost));
                first = "cache layer " + std::to_string(l) + " row " + std::to_string(rows[r]) +
                        " col " + std::to_string(j) + ": " +
                        std::to_string(__bfloat162float(g_val)) + ", reference " +
                        std::to_string(r_val);
            }
            bad_cache += (long)res.bad;
        }

        const bf16 *q_l = p.q + (size_t)l * head_elems;
        ref_attention<<<(unsigned)p.q_heads, KV_HEAD_DIM>>>(got, q_l, p.seq, p.row_elems, p.kv_cols,
                                                            group, scratch, o_ref, o_mag);
        HX_CHECK_LAUNCH();
        HX_CUDA(cudaMemcpy(want.data(), o_ref, head_elems * sizeof(float), cudaMemcpyDeviceToHost));
        HX_CUDA(cudaMemcpy(mag.data(), o_mag, head_elems * sizeof(float), cudaMemcpyDeviceToHost));
        bad_out += compare_attention(have, want, mag, l, "received cache", first);

        if (full) {
            to_bf16<<<1024, 256>>>(cache_ref, ref, p.layer_elems);
            HX_CHECK_LAUNCH();
            ref_attention<<<(unsigned)p.q_heads, KV_HEAD_DIM>>>(
                cache_ref, q_l, p.seq, p.row_elems, p.kv_cols, group, scratch, o_ref, o_mag);
            HX_CHECK_LAUNCH();
            HX_CUDA(
                cudaMemcpy(want.data(), o_ref, head_elems * sizeof(float), cudaMemcpyDeviceToHost));
            HX_CUDA(
                cudaMemcpy(mag.data(), o_mag, head_elems * sizeof(float), cudaMemcpyDeviceToHost));
            bad_out += compare_attention(have, want, mag, l, "recomputed cache", first);
        }
    }
    HX_CUDA(cudaFree(full_d));
    HX_CUDA(cudaFree(some_d));
    HX_CUDA(cudaFree(xr));
    HX_CUDA(cudaFree(ref));
    HX_CUDA(cudaFree(absum));
    HX_CUDA(cudaFree(w_ref));
    HX_CUDA(cudaFree(cache_ref));
    HX_CUDA(cudaFree(scratch));
    HX_CUDA(cudaFree(o_ref));
    HX_CUDA(cudaFree(o_mag));
    HX_CUDA(cudaFree(cnt));
    if (bad_cache || bad_out) {
        reason = std::to_string(bad_cache) + " of " + std::to_string(checked_cache) +
                 " checked cache values and " + std::to_string(bad_out) +
                 " decode outputs wrong; first: " + first;
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
    p.seq = hx_arg_long(argc, argv, "--seq", 8192);
    p.layers = hx_arg_long(argc, argv, "--layers", 32);
    p.hidden = hx_arg_long(argc, argv, "--hidden", 4096);
    p.kv_heads = hx_arg_long(argc, argv, "--kv-heads", 8);
    p.q_heads = hx_arg_long(argc, argv, "--q-heads", 32);
    uint64_t seed = (uint64_t)hx_arg_long(argc, argv, "--seed", 1234);
    int warmup = (int)hx_arg_long(argc, argv, "--warmup", 3);
    int iters = (int)hx_arg_long(argc, argv, "--iters", 10);
    if (c.nranks % 2 || p.seq <= 0 || p.layers <= 0 || p.hidden <= 0 || p.kv_heads <= 0 ||
        p.q_heads <= 0 || p.q_heads % p.kv_heads || p.q_heads / p.kv_heads > KV_MAX_GROUP ||
        p.seq > INT32_MAX || p.hidden > INT32_MAX || iters <= 0 || warmup < 0) {
        hx_report_verification(c, vouch, false,
                               "bad setup: an even rank count (prefill/decode pairs), positive "
                               "sizes, q-heads a multiple of kv-heads and at most 8 per kv head");
        hx_finalize(c, vouch);
        return 2;
    }
    p.kv_cols = p.kv_heads * KV_HEAD_DIM;
    p.row_elems = 2 * p.kv_cols;
    p.layer_elems = (size_t)p.seq * p.row_elems;
    p.role = c.rank % 2 ? ROLE_DECODE : ROLE_PREFILL;
    p.peer = c.rank ^ 1;
    p.pair = c.rank / 2;
    const size_t cache_elems = (size_t)p.layers * p.layer_elems;
    const size_t head_elems = (size_t)p.layers * p.q_heads * KV_HEAD_DIM;

    p.cache = (bf16 *)step_alloc(c, cache_elems * sizeof(bf16));
    if (p.role == ROLE_PREFILL) {
        size_t x_elems = (size_t)p.layers * p.seq * p.hidden;
        size_t w_elems = (size_t)p.layers * p.hidden * p.row_elems;
        HX_CUDA(cudaMalloc(&p.x, x_elems * sizeof(bf16)));
        HX_CUDA(cudaMalloc(&p.w_kv, w_elems * sizeof(bf16)));
        // not the prompt that is checked: see below
        fill_linear<<<2048, 256>>>(p.x, x_elems, 0, seed ^ 0x5A5A5A5Aull,
                                   tensor_id(p.pair, TENSOR_X), 1.0f);
        HX_CHECK_LAUNCH();
        // per layer, so that the index matches the per-layer regeneration in the check
        for (long l = 0; l < p.layers; l++) {
            size_t per = (size_t)p.hidden * p.row_elems;
            fill_linear<<<1024, 256>>>(p.w_kv + l * per, per, l * per, seed,
                                       tensor_id(p.pair, TENSOR_W),
                                       1.0f / std::sqrt((float)p.hidden));
            HX_CHECK_LAUNCH();
        }
    } else {
        HX_CUDA(cudaMalloc(&p.q, head_elems * sizeof(bf16)));
        HX_CUDA(cudaMalloc(&p.out, head_elems * sizeof(float)));
        fill_linear<<<256, 256>>>(p.q, head_elems, 0, seed, tensor_id(p.pair, TENSOR_Q), 1.0f);
        HX_CHECK_LAUNCH();
    }
    HX_CUDA(cudaDeviceSynchronize());

    StepState s;
    step_setup(c, p, s);

    // Verification: the prompt step_setup saw is replaced by the one checked
    // (a step that computed or moved the cache during setup fails), the cache
    // on both ranks and the decode output are poisoned (all-ones bytes are NaN
    // in bf16 and fp32), one step, check.
    HX_CUDA(cudaDeviceSynchronize());
    if (p.role == ROLE_PREFILL) {
        fill_linear<<<2048, 256>>>(p.x, (size_t)p.layers * p.seq * p.hidden, 0, seed,
                                   tensor_id(p.pair, TENSOR_X), 1.0f);
        HX_CHECK_LAUNCH();
    }
    HX_CUDA(cudaMemset(p.cache, 0xFF, cache_elems * sizeof(bf16)));
    if (p.out)
        HX_CUDA(cudaMemset(p.out, 0xFF, head_elems * sizeof(float)));
    HX_CUDA(cudaDeviceSynchronize());
    MPI_Barrier(MPI_COMM_WORLD);
    step_run(c, p, s, PART_ALL);
    HX_CUDA(cudaStreamSynchronize(c.stream));
    HX_CUDA(cudaDeviceSynchronize());
    std::string reason;
    bool ok = p.role != ROLE_DECODE || check_decode(p, seed, seed, false, 0, reason);

    // The timed steps are verified steps: a new prompt each (the weights and
    // queries stay), the cache on both ranks and the decode output poisoned,
    // two layers checked on the decode rank after each.
    hx_checked_step all;
    all.prepare = [&](int i, cudaStream_t st) {
        if (p.role == ROLE_PREFILL) {
            fill_linear<<<2048, 256, 0, st>>>(p.x, (size_t)p.layers * p.seq * p.hidden, 0,
                                              hx_iter_seed(seed, i), tensor_id(p.pair, TENSOR_X),
                                              1.0f);
            HX_CHECK_LAUNCH();
        }
        HX_CUDA(cudaMemsetAsync(p.cache, 0xFF, cache_elems * sizeof(bf16), st));
        if (p.out)
            HX_CUDA(cudaMemsetAsync(p.out, 0xFF, head_elems * sizeof(float), st));
    };
    all.run = [&] { step_run(c, p, s, PART_ALL); };
    all.check = [&](int i, std::string &why) {
        return p.role != ROLE_DECODE || check_decode(p, hx_iter_seed(seed, i), seed, true, i, why);
    };
    bool timed_ok = true;
    std::string timed_reason;
    double t_all = hx_time_checked_ms(c, warmup, iters, all, timed_ok, timed_reason);
    if (ok && !timed_ok)
        reason = timed_reason;
    ok = ok && timed_ok;

    // The decode rank's verdict goes to its prefill partner too, so that rank
    // 0's Verification line carries the reason.
    if (p.role == ROLE_DECODE) {
        int verdict[2] = {ok ? 1 : 0, (int)reason.size()};
        MPI_Send(verdict, 2, MPI_INT, p.peer, 0, MPI_COMM_WORLD);
        MPI_Send(reason.data(), verdict[1], MPI_CHAR, p.peer, 1, MPI_COMM_WORLD);
    } else {
        int verdict[2] = {0, 0};
        MPI_Recv(verdict, 2, MPI_INT, p.peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        std::string partner((size_t)verdict[1], ' ');
        MPI_Recv(&partner[0], verdict[1], MPI_CHAR, p.peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (ok && !verdict[0])
            reason = "decode rank " + std::to_string(p.peer) + ": " + partner;
        ok = ok && verdict[0] != 0;
    }
    ok = hx_report_verification(c, vouch, ok, reason);

    double t_prefill =
        hx_time_ms(c, c.stream, warmup, iters, [&] { step_run(c, p, s, PART_PREFILL); });
    double t_decode =
        hx_time_ms(c, c.stream, warmup, iters, [&] { step_run(c, p, s, PART_DECODE); });
    double t_transfer =
        hx_time_ms(c, c.stream, warmup, iters, [&] { step_run(c, p, s, PART_TRANSFER); });

    double cache_bytes = (double)cache_elems * sizeof(bf16);
    double prefill_flops = 2.0 * p.layers * p.seq * p.hidden * p.row_elems;
    std::string extra =
        "\"seq\":" + std::to_string(p.seq) + ",\"layers\":" + std::to_string(p.layers) +
        ",\"hidden\":" + std::to_string(p.hidden) + ",\"kv_heads\":" + std::to_string(p.kv_heads) +
        ",\"q_heads\":" + std::to_string(p.q_heads) +
        ",\"cache_bytes_per_pair\":" + std::to_string((long long)cache_bytes) +
        ",\"prefill_ms\":" + std::to_string(t_prefill) +
        ",\"decode_ms\":" + std::to_string(t_decode) +
        ",\"prefill_tflops\":" + std::to_string(prefill_flops / (t_prefill * 1e9)) +
        ",\"transfer_gbps\":" + std::to_string(cache_bytes / (t_transfer * 1e6));
    hx_report_result(c, vouch, t_all, iters, t_prefill + t_decode, t_transfer, extra);

    step_teardown(c, s);
    step_free(c, p.cache);
    HX_CUDA(cudaFree(p.x));
    HX_CUDA(cudaFree(p.w_kv));
    HX_CUDA(cudaFree(p.q));
    HX_CUDA(cudaFree(p.out));
    hx_finalize(c, vouch);
    return ok ? 0 : 1;
}
