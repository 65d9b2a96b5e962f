// flash_attn_cp.cu: context-parallel attention. Each of n ranks holds a
// contiguous shard of the sequence (S/n tokens of Q, K and V, bf16, head dim
// 128, H query heads sharing Hkv key/value heads); the step all-gathers K and
// V and runs flash attention of the rank's queries over the whole sequence
// (online softmax, tensor-core tiles, fp32 accumulation), causal or not; the
// causal mask uses global token indices, so the shard offset matters. The
// seed is the host-driven way: ncclAllGather of K and V on a stream, then the
// attention kernel. Everything outside the EVOLVE-BLOCK (inputs, the
// independent reference, verification, timing, the result line) is frozen.
//
// Contract between the frozen code and the EVOLVE-BLOCK:
//   step_alloc/step_free  the buffers the step reads and writes (q, k, v
//                         shards and the output), called in the same order
//                         on every rank, so a variant may place them in
//                         symmetric memory;
//   step_setup/teardown   the step's own state (gathered K/V, events);
//   step_run(parts)       PART_ALL: the whole step; PART_COMPUTE: attention
//                         only, the gathered K/V assumed present; PART_COMM:
//                         the all-gathers only, same sizes. Work is enqueued
//                         on c.stream or joined back into it before returning.
//
// Layouts (row-major): q, out [S/n][H][128]; k, v [S/n][Hkv][128].
// Usage: flash_attn_cp [--seq S] [--heads H] [--kv_heads HKV] [--causal 0|1]
//                      [--seed S] [--warmup W] [--iters I]
#include "harness.cuh"

#include <cuda_bf16.h>
#include <mma.h>

#include <cmath>
#include <cstdint>

typedef __nv_bfloat16 bf16;

#define HEAD_DIM 128

struct Problem {
    long seq = 0, seq_local = 0; // global tokens; rank r holds r*seq_local ...
    int heads = 0, kv_heads = 0;
    bool causal = false;
    bf16 *q = nullptr, *k = nullptr, *v = nullptr; // shards, from step_alloc
    bf16 *out = nullptr;                           // [seq_local][heads][128]
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

__device__ inline float gen_value(uint64_t seed, uint64_t tensor, uint64_t index, float scale)
{
    uint64_t h = gen_mix(seed ^ gen_mix((tensor << 56) ^ index));
    float u = (float)(h >> 40) * (1.0f / 16777216.0f) * 2.0f - 1.0f;
    return __bfloat162float(__float2bfloat16(u * scale));
}

enum { TENSOR_Q = 1, TENSOR_K = 2, TENSOR_V = 3 };

// K is scaled by 8 so that scores have a spread like a trained model's (std
// ~2.7 after the 1/sqrt(128) scale): softmax is dominated by a few dozen
// keys, so a missing or misplaced key block changes the output visibly.
__host__ __device__ inline float tensor_scale(int tensor)
{
    return tensor == TENSOR_K ? 8.0f : 1.0f;
}

// x[i] for the rows [tok0, tok0 + rows) of a [seq][heads][128] tensor
__global__ void fill_rows(bf16 *x, long rows, int heads, long tok0, int tensor, uint64_t seed)
{
    size_t per_tok = (size_t)heads * HEAD_DIM, total = (size_t)rows * per_tok;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x)
        x[i] = __float2bfloat16(
            gen_value(seed, tensor, (size_t)tok0 * per_tok + i, tensor_scale(tensor)));
}

// EVOLVE-BLOCK-START
// Host-driven seed: ncclAllGather of K and V (one NCCL group) into gathered
// buffers on the main stream, then one flash-attention kernel over the whole
// sequence. With CUCO_KV_CHUNKS > 1 the gather is split into that many row
// chunks of every shard, issued on comm_stream; attention starts at once on
// the rank's own K/V shard, then consumes each chunk of the other ranks as it
// lands (the running softmax state is kept in fp32 between the launches).
// The gathered buffers are chunk-major: chunk c holds its rows of rank 0,
// then rank 1, ... (with one chunk: plain global token order).
#define CUCO_KV_CHUNKS 1 // cuco:knob 1 2 4 8

#define FA_BM 64    // queries per block (16 per warp)
#define FA_BN 64    // keys per tile
#define FA_WARPS 4
#define FA_INIT 1   // start from an empty softmax state
#define FA_FINAL 2  // write the normalized bf16 output (else the fp32 state)

struct FaSmem {
    bf16 k[FA_BN * HEAD_DIM];
    bf16 v[FA_BN * HEAD_DIM];
    float s[FA_WARPS][16 * FA_BN];
    bf16 p[FA_WARPS][16 * FA_BN];
    float o[FA_WARPS][16 * HEAD_DIM];
};

// A segment: kv_len keys whose first has global index kv_g0, rows of
// kv_stride elements (the head's 128 values at offset head * 128).
struct FaSegment {
    const bf16 *k, *v;
    long kv_len, kv_g0;
};

// Grid (seq_local / FA_BM, heads); 128 threads. Each warp owns 16 queries:
// S = Q K^T with wmma bf16 16x16x16 (Q fragments in registers, K/V tiles in
// shared memory), online softmax on its 16 x 64 score tile (two lanes per
// row), O += P V with the fp32 accumulator kept in shared memory so rows can
// be rescaled.
__global__ void __launch_bounds__(FA_WARPS * 32)
    flash_attn_fwd(const bf16 *__restrict__ q, FaSegment seg, int heads, int kv_heads,
                   long q_g0, bool causal, int flags, float *o_state, float *m_state,
                   float *l_state, bf16 *out)
{
    using namespace nvcuda;
    extern __shared__ __align__(128) unsigned char fa_smem_raw[];
    FaSmem &sm = *reinterpret_cast<FaSmem *>(fa_smem_raw);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int head = blockIdx.y, kv_head = head / (heads / kv_heads);
    const long q_local0 = (long)blockIdx.x * FA_BM + warp * 16; // this warp's first query
    const long kv_stride = (long)kv_heads * HEAD_DIM;
    const float scale_log2 = 1.4426950408889634f / sqrtf((float)HEAD_DIM);

    wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> qf[HEAD_DIM / 16];
    const bf16 *qp = q + (q_local0 * heads + head) * HEAD_DIM;
    for (int kk = 0; kk < HEAD_DIM / 16; kk++)
        wmma::load_matrix_sync(qf[kk], qp + kk * 16, heads * HEAD_DIM);

    // lane pair (2r, 2r+1) owns row r: half 0 or 1 of the columns
    const int row = lane >> 1, half = lane & 1;
    const long q_local = q_local0 + row, q_g = q_g0 + q_local;
    const size_t state_row = (size_t)q_local * heads + head;
    float *orow = sm.o[warp] + row * HEAD_DIM + half * (HEAD_DIM / 2);
    float m_run, l_run;
    if (flags & FA_INIT) {
        for (int j = 0; j < HEAD_DIM / 2; j++)
            orow[j] = 0.0f;
        m_run = -INFINITY;
        l_run = 0.0f;
    } else {
        const float *src = o_state + state_row * HEAD_DIM + half * (HEAD_DIM / 2);
        for (int j = 0; j < HEAD_DIM / 2; j++)
            orow[j] = src[j];
        m_run = m_state[state_row];
        l_run = l_state[state_row];
    }

    const long block_q_last = q_g0 + (long)blockIdx.x * FA_BM + FA_BM - 1;
    for (long t0 = 0; t0 < seg.kv_len; t0 += FA_BN) {
        if (causal && seg.kv_g0 + t0 > block_q_last)
            break;
        __syncthreads(); // the previous tile is no longer read
        for (int i = threadIdx.x; i < FA_BN * HEAD_DIM / 8; i += blockDim.x) {
            int r = i / (HEAD_DIM / 8), c8 = i % (HEAD_DIM / 8);
            uint4 kz = make_uint4(0, 0, 0, 0), vz = kz;
            if (t0 + r < seg.kv_len) {
                size_t off = (size_t)(t0 + r) * kv_stride + (size_t)kv_head * HEAD_DIM + c8 * 8;
                kz = *reinterpret_cast<const uint4 *>(seg.k + off);
                vz = *reinterpret_cast<const uint4 *>(seg.v + off);
            }
            reinterpret_cast<uint4 *>(sm.k)[i] = kz;
            reinterpret_cast<uint4 *>(sm.v)[i] = vz;
        }
        __syncthreads();

        for (int n = 0; n < FA_BN / 16; n++) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
            wmma::fill_fragment(acc, 0.0f);
            for (int kk = 0; kk < HEAD_DIM / 16; kk++) {
                wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> kf;
                wmma::load_matrix_sync(kf, sm.k + n * 16 * HEAD_DIM + kk * 16, HEAD_DIM);
                wmma::mma_sync(acc, qf[kk], kf, acc);
            }
            wmma::store_matrix_sync(sm.s[warp] + n * 16, acc, FA_BN, wmma::mem_row_major);
        }
        __syncwarp();

        const float *srow = sm.s[warp] + row * FA_BN + half * (FA_BN / 2);
        float sv[FA_BN / 2], tile_max = -INFINITY;
        for (int j = 0; j < FA_BN / 2; j++) {
            long col = t0 + half * (FA_BN / 2) + j, k_g = seg.kv_g0 + col;
            bool valid = col < seg.kv_len && (!causal || k_g <= q_g);
            sv[j] = valid ? srow[j] * scale_log2 : -INFINITY;
            tile_max = fmaxf(tile_max, sv[j]);
        }
        tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
        float m_new = fmaxf(m_run, tile_max);
        float alpha = m_new == -INFINITY ? 1.0f : exp2f(m_run - m_new);
        float psum = 0.0f;
        bf16 *prow = sm.p[warp] + row * FA_BN + half * (FA_BN / 2);
        for (int j = 0; j < FA_BN / 2; j++) {
            bf16 pb = __float2bfloat16(m_new == -INFINITY ? 0.0f : exp2f(sv[j] - m_new));
            prow[j] = pb;
            psum += __bfloat162float(pb); // the weights P V uses, so l matches them
        }
        psum += __shfl_xor_sync(0xffffffffu, psum, 1);
        l_run = l_run * alpha + psum;
        m_run = m_new;
        for (int j = 0; j < HEAD_DIM / 2; j++)
            orow[j] *= alpha;
        __syncwarp();

        for (int dn = 0; dn < HEAD_DIM / 16; dn++) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> oacc;
            float *otile = sm.o[warp] + dn * 16;
            wmma::load_matrix_sync(oacc, otile, HEAD_DIM, wmma::mem_row_major);
            for (int kk = 0; kk < FA_BN / 16; kk++) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> pf;
                wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> vf;
                wmma::load_matrix_sync(pf, sm.p[warp] + kk * 16, FA_BN);
                wmma::load_matrix_sync(vf, sm.v + kk * 16 * HEAD_DIM + dn * 16, HEAD_DIM);
                wmma::mma_sync(oacc, pf, vf, oacc);
            }
            wmma::store_matrix_sync(otile, oacc, HEAD_DIM, wmma::mem_row_major);
        }
        __syncwarp();
    }

    if (flags & FA_FINAL) {
        float inv = l_run > 0.0f ? 1.0f / l_run : 0.0f;
        bf16 *dst = out + state_row * HEAD_DIM + half * (HEAD_DIM / 2);
        for (int j = 0; j < HEAD_DIM / 2; j++)
            dst[j] = __float2bfloat16(orow[j] * inv);
    } else {
        float *dst = o_state + state_row * HEAD_DIM + half * (HEAD_DIM / 2);
        for (int j = 0; j < HEAD_DIM / 2; j++)
            dst[j] = orow[j];
        if (half == 0) {
            m_state[state_row] = m_run;
            l_state[state_row] = l_run;
        }
    }
}

struct StepState {
    bf16 *k_all = nullptr, *v_all = nullptr; // [seq][kv_heads][128], chunk-major
    float *o_state = nullptr, *m_state = nullptr, *l_state = nullptr; // chunked only
    int chunks = 1;
    std::vector<long> chunk_row0, chunk_rows; // rows within a shard
    std::vector<cudaEvent_t> chunk_landed;
    cudaEvent_t step_start = nullptr, comm_done = nullptr;
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
    size_t kv_bytes = (size_t)p.seq * p.kv_heads * HEAD_DIM * sizeof(bf16);
    HX_CUDA(cudaMalloc(&s.k_all, kv_bytes));
    HX_CUDA(cudaMalloc(&s.v_all, kv_bytes));
    s.chunks = (int)std::max(1L, std::min((long)CUCO_KV_CHUNKS, p.seq_local));
    long base = p.seq_local / s.chunks, extra = p.seq_local % s.chunks, row = 0;
    for (int ch = 0; ch < s.chunks; ch++) {
        long rows = base + (ch < extra ? 1 : 0);
        s.chunk_row0.push_back(row);
        s.chunk_rows.push_back(rows);
        row += rows;
        cudaEvent_t ev;
        HX_CUDA(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
        s.chunk_landed.push_back(ev);
    }
    if (s.chunks > 1) {
        size_t rows = (size_t)p.seq_local * p.heads;
        HX_CUDA(cudaMalloc(&s.o_state, rows * HEAD_DIM * sizeof(float)));
        HX_CUDA(cudaMalloc(&s.m_state, rows * sizeof(float)));
        HX_CUDA(cudaMalloc(&s.l_state, rows * sizeof(float)));
    }
    HX_CUDA(cudaFuncSetAttribute(flash_attn_fwd, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 (int)sizeof(FaSmem)));
    HX_CUDA(cudaEventCreateWithFlags(&s.step_start, cudaEventDisableTiming));
    HX_CUDA(cudaEventCreateWithFlags(&s.comm_done, cudaEventDisableTiming));
}

static void step_teardown(hx_ctx &, StepState &s)
{
    for (cudaEvent_t ev : s.chunk_landed)
        HX_CUDA(cudaEventDestroy(ev));
    HX_CUDA(cudaEventDestroy(s.step_start));
    HX_CUDA(cudaEventDestroy(s.comm_done));
    HX_CUDA(cudaFree(s.k_all));
    HX_CUDA(cudaFree(s.v_all));
    HX_CUDA(cudaFree(s.o_state));
    HX_CUDA(cudaFree(s.m_state));
    HX_CUDA(cudaFree(s.l_state));
}

static void step_attend(hx_ctx &c, const Problem &p, StepState &s, FaSegment seg, int flags,
                        cudaStream_t st)
{
    dim3 grid((unsigned)(p.seq_local / FA_BM), (unsigned)p.heads);
    flash_attn_fwd<<<grid, FA_WARPS * 32, sizeof(FaSmem), st>>>(
        p.q, seg, p.heads, p.kv_heads, (long)c.rank * p.seq_local, p.causal, flags, s.o_state,
        s.m_state, s.l_state, p.out);
    HX_CHECK_LAUNCH();
}

static void step_gather_chunk(hx_ctx &c, const Problem &p, StepState &s, int ch, cudaStream_t st)
{
    size_t row_elems = (size_t)p.kv_heads * HEAD_DIM;
    size_t src = (size_t)s.chunk_row0[ch] * row_elems, count = (size_t)s.chunk_rows[ch] * row_elems;
    size_t dst = (size_t)c.nranks * src;
    HX_NCCL(ncclGroupStart());
    HX_NCCL(ncclAllGather(p.k + src, s.k_all + dst, count, ncclBfloat16, c.comm, st));
    HX_NCCL(ncclAllGather(p.v + src, s.v_all + dst, count, ncclBfloat16, c.comm, st));
    HX_NCCL(ncclGroupEnd());
}

static void step_run(hx_ctx &c, const Problem &p, StepState &s, unsigned parts)
{
    size_t row_elems = (size_t)p.kv_heads * HEAD_DIM;
    if (s.chunks == 1) {
        if (parts & PART_COMM)
            step_gather_chunk(c, p, s, 0, c.stream);
        if (parts & PART_COMPUTE)
            step_attend(c, p, s, FaSegment{s.k_all, s.v_all, p.seq, 0}, FA_INIT | FA_FINAL,
                        c.stream);
        return;
    }
    // comm_stream starts after the previous step's kernels have read the buffers
    HX_CUDA(cudaEventRecord(s.step_start, c.stream));
    HX_CUDA(cudaStreamWaitEvent(c.comm_stream, s.step_start, 0));
    if (parts & PART_COMM) {
        for (int ch = 0; ch < s.chunks; ch++) {
            step_gather_chunk(c, p, s, ch, c.comm_stream);
            HX_CUDA(cudaEventRecord(s.chunk_landed[ch], c.comm_stream));
        }
    }
    if (parts & PART_COMPUTE) {
        // the local shard first, then (chunk, rank) segments in landing order;
        // causal segments wholly after this rank's last query are skipped
        struct Seg {
            FaSegment seg;
            int wait_chunk;
        };
        std::vector<Seg> segs;
        segs.push_back({FaSegment{p.k, p.v, p.seq_local, (long)c.rank * p.seq_local}, -1});
        long last_q = (long)(c.rank + 1) * p.seq_local - 1;
        for (int ch = 0; ch < s.chunks; ch++) {
            size_t chunk_off = (size_t)c.nranks * s.chunk_row0[ch] * row_elems;
            for (int r = 0; r < c.nranks; r++) {
                long g0 = (long)r * p.seq_local + s.chunk_row0[ch];
                if (r == c.rank || s.chunk_rows[ch] == 0 || (p.causal && g0 > last_q))
                    continue;
                size_t off = chunk_off + (size_t)r * s.chunk_rows[ch] * row_elems;
                segs.push_back({FaSegment{s.k_all + off, s.v_all + off, s.chunk_rows[ch], g0}, ch});
            }
        }
        int waited = -1;
        for (size_t i = 0; i < segs.size(); i++) {
            if ((parts & PART_COMM) && segs[i].wait_chunk > waited) {
                waited = segs[i].wait_chunk;
                HX_CUDA(cudaStreamWaitEvent(c.stream, s.chunk_landed[waited], 0));
            }
            int flags = (i == 0 ? FA_INIT : 0) | (i + 1 == segs.size() ? FA_FINAL : 0);
            step_attend(c, p, s, segs[i].seg, flags, c.stream);
        }
    }
    HX_CUDA(cudaEventRecord(s.comm_done, c.comm_stream));
    HX_CUDA(cudaStreamWaitEvent(c.stream, s.comm_done, 0));
}
// EVOLVE-BLOCK-END

// ---- verification: an independent reference on sampled queries -----------

// The whole sequence of one tensor as fp32, straight from the generator.
__global__ void ref_fill_all(float *x, long seq, int heads, int tensor, uint64_t seed)
{
    size_t total = (size_t)seq * heads * HEAD_DIM;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x)
        x[i] = gen_value(seed, tensor, i, tensor_scale(tensor));
}

// One block per (sampled query, head): scores in double over every key, the
// max, the exponentials, then out[d] = sum p v / sum p and absw[d] = sum p |v|
// / sum p. Plain loops, nothing tiled.
__global__ void ref_attention(const long *q_tokens, int nsamp, int heads, int kv_heads, long seq,
                              bool causal, const float *kf, const float *vf, uint64_t seed,
                              double *scores, float *ref, float *absw)
{
    int sidx = blockIdx.x, head = blockIdx.y, kv_head = head / (heads / kv_heads);
    long qg = q_tokens[sidx];
    double *sc = scores + ((size_t)sidx * heads + head) * seq;
    __shared__ float qv[HEAD_DIM];
    __shared__ double red[256];
    for (int d = threadIdx.x; d < HEAD_DIM; d += blockDim.x)
        qv[d] = gen_value(seed, TENSOR_Q, ((size_t)qg * heads + head) * HEAD_DIM + d, 1.0f);
    __syncthreads();
    double mx = -INFINITY;
    for (long j = threadIdx.x; j < seq; j += blockDim.x) {
        double dot = 0.0;
        const float *kr = kf + ((size_t)j * kv_heads + kv_head) * HEAD_DIM;
        for (int d = 0; d < HEAD_DIM; d++)
            dot += (double)qv[d] * kr[d];
        dot /= sqrt((double)HEAD_DIM);
        if (causal && j > qg)
            dot = -INFINITY;
        sc[j] = dot;
        mx = fmax(mx, dot);
    }
    red[threadIdx.x] = mx;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w /= 2) {
        if (threadIdx.x < w)
            red[threadIdx.x] = fmax(red[threadIdx.x], red[threadIdx.x + w]);
        __syncthreads();
    }
    mx = red[0];
    __syncthreads();
    double sum = 0.0;
    for (long j = threadIdx.x; j < seq; j += blockDim.x) {
        double e = exp(sc[j] - mx);
        sc[j] = e;
        sum += e;
    }
    red[threadIdx.x] = sum;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w /= 2) {
        if (threadIdx.x < w)
            red[threadIdx.x] += red[threadIdx.x + w];
        __syncthreads();
    }
    sum = red[0];
    for (int d = threadIdx.x; d < HEAD_DIM; d += blockDim.x) {
        double acc = 0.0, mag = 0.0;
        for (long j = 0; j < seq; j++) {
            double vv = vf[((size_t)j * kv_heads + kv_head) * HEAD_DIM + d];
            acc += sc[j] * vv;
            mag += sc[j] * fabs(vv);
        }
        size_t o = ((size_t)sidx * heads + head) * HEAD_DIM + d;
        ref[o] = (float)(acc / sum);
        absw[o] = (float)(mag / sum);
    }
}

// Tolerance: the kernel rounds the softmax weights to bf16 (2^-9 relative
// each; the normalizer sums the rounded weights, so only their relative
// pattern moves) and the output to bf16 (2^-9 relative), with fp32
// accumulation of bf16-exact products otherwise. Error <= 2^-8 sum p|v| +
// 2^-8 |out| in the worst case; 2^-7 of each is allowed. K is scaled so the
// softmax is sharp (see tensor_scale): a missing, stale or misplaced K/V block
// or a wrong causal offset moves outputs by O(0.1) against a tolerance of
// ~0.005; the poison (NaN) fails every comparison.
static bool check_queries(hx_ctx &c, const Problem &p, uint64_t seed, std::string &reason)
{
    const int want = 24;
    std::vector<long> toks;
    for (int i = 0; i < want && i < p.seq_local; i++)
        toks.push_back((long)c.rank * p.seq_local +
                       (p.seq_local <= want ? i : (long)i * (p.seq_local - 1) / (want - 1)));
    int nsamp = (int)toks.size();
    size_t kv_elems = (size_t)p.seq * p.kv_heads * HEAD_DIM;
    size_t out_elems = (size_t)nsamp * p.heads * HEAD_DIM;
    long *toks_d = nullptr;
    float *kf = nullptr, *vf = nullptr, *ref = nullptr, *absw = nullptr;
    double *scores = nullptr;
    HX_CUDA(cudaMalloc(&toks_d, toks.size() * sizeof(long)));
    HX_CUDA(cudaMalloc(&kf, kv_elems * sizeof(float)));
    HX_CUDA(cudaMalloc(&vf, kv_elems * sizeof(float)));
    HX_CUDA(cudaMalloc(&ref, out_elems * sizeof(float)));
    HX_CUDA(cudaMalloc(&absw, out_elems * sizeof(float)));
    HX_CUDA(cudaMalloc(&scores, (size_t)nsamp * p.heads * p.seq * sizeof(double)));
    HX_CUDA(cudaMemcpy(toks_d, toks.data(), toks.size() * sizeof(long), cudaMemcpyHostToDevice));
    ref_fill_all<<<1024, 256>>>(kf, p.seq, p.kv_heads, TENSOR_K, seed);
    HX_CHECK_LAUNCH();
    ref_fill_all<<<1024, 256>>>(vf, p.seq, p.kv_heads, TENSOR_V, seed);
    HX_CHECK_LAUNCH();
    ref_attention<<<dim3((unsigned)nsamp, (unsigned)p.heads), 256>>>(
        toks_d, nsamp, p.heads, p.kv_heads, p.seq, p.causal, kf, vf, seed, scores, ref, absw);
    HX_CHECK_LAUNCH();
    HX_CUDA(cudaDeviceSynchronize());
    std::vector<float> ref_h(out_elems), abs_h(out_elems);
    HX_CUDA(cudaMemcpy(ref_h.data(), ref, out_elems * sizeof(float), cudaMemcpyDeviceToHost));
    HX_CUDA(cudaMemcpy(abs_h.data(), absw, out_elems * sizeof(float), cudaMemcpyDeviceToHost));
    size_t row_elems = (size_t)p.heads * HEAD_DIM;
    std::vector<bf16> got(row_elems);
    long bad = 0;
    std::string first;
    for (int i = 0; i < nsamp; i++) {
        long local = toks[i] - (long)c.rank * p.seq_local;
        HX_CUDA(cudaMemcpy(got.data(), p.out + (size_t)local * row_elems,
                           row_elems * sizeof(bf16), cudaMemcpyDeviceToHost));
        for (size_t e = 0; e < row_elems; e++) {
            double want_v = ref_h[(size_t)i * row_elems + e];
            double tol = std::ldexp(std::fabs(want_v), -7) +
                         std::ldexp((double)abs_h[(size_t)i * row_elems + e], -7);
            double have = __bfloat162float(got[e]);
            if (!(std::fabs(have - want_v) <= tol)) {
                if (bad == 0)
                    first = "out[token " + std::to_string(toks[i]) + "][head " +
                            std::to_string(e / HEAD_DIM) + "][" + std::to_string(e % HEAD_DIM) +
                            "] = " + std::to_string(have) + ", reference " +
                            std::to_string(want_v) + " (tol " + std::to_string(tol) + ")";
                bad++;
            }
        }
    }
    HX_CUDA(cudaFree(toks_d));
    HX_CUDA(cudaFree(kf));
    HX_CUDA(cudaFree(vf));
    HX_CUDA(cudaFree(ref));
    HX_CUDA(cudaFree(absw));
    HX_CUDA(cudaFree(scores));
    if (bad) {
        reason = std::to_string(bad) + " of " + std::to_string((long)nsamp * row_elems) +
                 " checked outputs wrong; first: " + first;
        return false;
    }
    return true;
}

static void fill_inputs(hx_ctx &c, const Problem &p, uint64_t seed)
{
    long tok0 = (long)c.rank * p.seq_local;
    fill_rows<<<1024, 256>>>(p.q, p.seq_local, p.heads, tok0, TENSOR_Q, seed);
    HX_CHECK_LAUNCH();
    fill_rows<<<1024, 256>>>(p.k, p.seq_local, p.kv_heads, tok0, TENSOR_K, seed);
    HX_CHECK_LAUNCH();
    fill_rows<<<1024, 256>>>(p.v, p.seq_local, p.kv_heads, tok0, TENSOR_V, seed);
    HX_CHECK_LAUNCH();
}

int main(int argc, char **argv)
{
    hx_ctx c;
    hx_init(&argc, &argv, c);
    Problem p;
    p.seq = hx_arg_long(argc, argv, "--seq", 8192);
    p.heads = (int)hx_arg_long(argc, argv, "--heads", 32);
    p.kv_heads = (int)hx_arg_long(argc, argv, "--kv_heads", 32);
    p.causal = hx_arg_long(argc, argv, "--causal", 1) != 0;
    uint64_t seed = (uint64_t)hx_arg_long(argc, argv, "--seed", 1234);
    int warmup = (int)hx_arg_long(argc, argv, "--warmup", 3);
    int iters = (int)hx_arg_long(argc, argv, "--iters", 10);
    if (p.seq <= 0 || p.seq % (64L * c.nranks) || p.heads <= 0 || p.kv_heads <= 0 ||
        p.heads % p.kv_heads || iters <= 0 || warmup < 0 || p.seq > INT32_MAX) {
        hx_report_verification(c, false,
                               "bad sizes: --seq must be a positive multiple of 64 x ranks, "
                               "--heads a multiple of --kv_heads, --iters positive");
        hx_finalize(c);
        return 2;
    }
    p.seq_local = p.seq / c.nranks;

    size_t q_bytes = (size_t)p.seq_local * p.heads * HEAD_DIM * sizeof(bf16);
    size_t kv_bytes = (size_t)p.seq_local * p.kv_heads * HEAD_DIM * sizeof(bf16);
    p.q = (bf16 *)step_alloc(c, q_bytes);
    p.k = (bf16 *)step_alloc(c, kv_bytes);
    p.v = (bf16 *)step_alloc(c, kv_bytes);
    p.out = (bf16 *)step_alloc(c, q_bytes);
    // The inputs step_setup sees are not the ones checked: a step that
    // gathered them during setup instead of in the step fails verification.
    fill_inputs(c, p, seed ^ 0x5A5A5A5Aull);
    HX_CUDA(cudaDeviceSynchronize());

    StepState s;
    step_setup(c, p, s);

    // Verification: the real inputs, the output poisoned (bf16 0xFFFF is NaN),
    // one step, check.
    HX_CUDA(cudaDeviceSynchronize());
    fill_inputs(c, p, seed);
    HX_CUDA(cudaMemset(p.out, 0xFF, q_bytes));
    HX_CUDA(cudaDeviceSynchronize());
    MPI_Barrier(MPI_COMM_WORLD);
    step_run(c, p, s, PART_ALL);
    HX_CUDA(cudaStreamSynchronize(c.stream));
    HX_CUDA(cudaDeviceSynchronize());
    std::string reason;
    bool ok = check_queries(c, p, seed, reason);
    ok = hx_report_verification(c, ok, reason);

    double t_all = hx_time_ms(c, c.stream, warmup, iters, [&] { step_run(c, p, s, PART_ALL); });
    double t_compute =
        hx_time_ms(c, c.stream, warmup, iters, [&] { step_run(c, p, s, PART_COMPUTE); });
    double t_comm = hx_time_ms(c, c.stream, warmup, iters, [&] { step_run(c, p, s, PART_COMM); });

    // attention FLOPs of the busiest rank (the last one when causal): QK^T and
    // PV, 4 * queries * visible keys * heads * 128
    double visible = p.causal ? (double)p.seq_local * ((double)(c.nranks - 1) * p.seq_local) +
                                    (double)p.seq_local * (p.seq_local + 1) / 2.0
                              : (double)p.seq_local * p.seq;
    double flops = 4.0 * visible * p.heads * HEAD_DIM;
    double recv_bytes = 2.0 * (double)(c.nranks - 1) * kv_bytes;
    char extra[512];
    snprintf(extra, sizeof extra,
             "\"seq\":%ld,\"heads\":%d,\"kv_heads\":%d,\"head_dim\":%d,\"causal\":%d,"
             "\"bytes_recv_per_rank\":%.0f,\"attn_tflops_busiest_rank\":%.2f,"
             "\"ag_busbw_gbps\":%.2f,\"comm_share\":%.4f,\"overlap_bound_ms\":%.6f",
             p.seq, p.heads, p.kv_heads, HEAD_DIM, p.causal ? 1 : 0, recv_bytes,
             flops / (t_compute * 1e9), recv_bytes / (t_comm * 1e6),
             t_comm / (t_compute + t_comm), std::max(t_compute, t_comm));
    hx_report_result(c, t_all, iters, t_compute, t_comm, extra);

    step_teardown(c, s);
    step_free(c, p.q);
    step_free(c, p.k);
    step_free(c, p.v);
    step_free(c, p.out);
    hx_finalize(c);
    return ok ? 0 : 1;
}
