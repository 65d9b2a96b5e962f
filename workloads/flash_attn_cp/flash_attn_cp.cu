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
//                         Work starts after what is already on c.stream
//                         (streams forked from it) and no host thread is
//                         left running; the timed steps check that.
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
// buffers in global token order on the main stream, then one flash-attention
// kernel over the whole sequence.

#define FA_WARPS 8               // 16 queries per warp
#define FA_BM (16 * FA_WARPS)    // queries per block
#define FA_BN 64                 // keys per tile
#define FA_THREADS (FA_WARPS * 32)
// Tiles of 128-dim bf16 rows (256 bytes = 16 chunks of 16 bytes); chunk c of
// row r is stored at chunk c ^ (r & 7), so the 8 rows an ldmatrix reads at
// one logical chunk fall in 8 distinct bank groups.
struct FaSmem {
    bf16 q[FA_BM * HEAD_DIM];
    bf16 k[2][FA_BN * HEAD_DIM];
    bf16 v[2][FA_BN * HEAD_DIM];
};

__device__ __forceinline__ uint32_t fa_swz(int row, int chunk)
{
    return (uint32_t)(row * (HEAD_DIM * 2) + ((chunk ^ (row & 7)) << 4));
}

// 16-byte cp.async; src_bytes 0 fills the destination with zeros
__device__ __forceinline__ void fa_cp_async16(uint32_t dst, const void *src, int src_bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
                 "r"(src_bytes)
                 : "memory");
}

__device__ __forceinline__ void fa_cp_async_commit()
{
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

template <int N> __device__ __forceinline__ void fa_cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void fa_ldsm_x4(uint32_t addr, uint32_t &r0, uint32_t &r1, uint32_t &r2,
                                           uint32_t &r3)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
}

__device__ __forceinline__ void fa_ldsm_x4_t(uint32_t addr, uint32_t &r0, uint32_t &r1,
                                             uint32_t &r2, uint32_t &r3)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
}

// d += a b: m16n8k16, bf16 inputs, fp32 accumulators
__device__ __forceinline__ void fa_mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                       uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
                 "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t fa_pack_bf16(float lo, float hi)
{
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&h);
}

// the two bf16 of a packed pair as floats, summed
__device__ __forceinline__ float fa_sum_bf16x2(uint32_t x)
{
    return __uint_as_float(x << 16) + __uint_as_float(x & 0xffff0000u);
}

// rows [0, rows) of a 128-dim tile from global (row stride `stride`
// elements) into swizzled shared memory; rows >= valid are zero-filled
template <int ROWS>
__device__ __forceinline__ void fa_load_tile(uint32_t dst, const bf16 *src, long stride, long valid)
{
#pragma unroll
    for (int i = 0; i < ROWS * (HEAD_DIM / 8) / FA_THREADS; i++) {
        int idx = threadIdx.x + i * FA_THREADS, r = idx >> 4, c = idx & 15;
        bool ok = r < valid;
        const bf16 *g = src + (ok ? (long)r * stride : 0) + c * 8;
        fa_cp_async16(dst + fa_swz(r, c), g, ok ? 16 : 0);
    }
}

// Grid (heads, ceil(seq_local / FA_BM)); FA_THREADS threads. Attention of
// the seq_local queries (global index of the first: q_g0) over kv_len keys
// k, v whose first has global index kv_g0 (rows of kv_heads * 128 elements,
// the head's 128 values at offset kv_head * 128); out gets the normalized
// bf16 result and, when lse is not null, lse[row * heads + head] the
// natural log of the softmax denominator (its scores scaled by
// 1/sqrt(128); -inf where no key is visible), as flash attention's
// softmax_lse. FlashAttention-2 forward: each warp owns 16 queries, their Q
// fragments in registers; K/V tiles of 64 keys are double-buffered in shared
// memory with cp.async; S = Q K^T and O += P V with mma.sync m16n8k16 (bf16,
// fp32 accumulators in registers), P rounded to bf16 in registers as the A
// operand of P V; online softmax in the exp2 domain. Causal: tiles wholly after the block's last
// query are not visited, only tiles crossing a warp's diagonal are masked,
// and the query tiles with the most keys run first.
__global__ void __launch_bounds__(FA_THREADS)
    flash_attn_fwd(const bf16 *__restrict__ q, const bf16 *__restrict__ k,
                   const bf16 *__restrict__ v, int heads, int kv_heads, long seq_local,
                   long kv_len, long q_g0, long kv_g0, bool causal, bf16 *out, float *lse)
{
    extern __shared__ __align__(128) unsigned char fa_smem_raw[];
    FaSmem &sm = *reinterpret_cast<FaSmem *>(fa_smem_raw);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int g = lane >> 2, tg = lane & 3; // mma fragment row group / thread in group
    const int head = blockIdx.x, kv_head = head / (heads / kv_heads);
    const long q_tile0 = (long)(gridDim.y - 1 - blockIdx.y) * FA_BM; // heavy tiles first
    const long q_stride = (long)heads * HEAD_DIM, kv_stride = (long)kv_heads * HEAD_DIM;
    const float scale_log2 = 1.4426950408889634f / sqrtf((float)HEAD_DIM);

    const long q_rows = min((long)FA_BM, seq_local - q_tile0);
    const long warp_q0 = q_tile0 + warp * 16; // local index of this warp's first query
    const bool warp_active = warp * 16 < q_rows;
    const long q_row0 = warp_q0 + g, q_row1 = q_row0 + 8; // the two rows a thread holds
    const long q_g_row0 = q_g0 + q_row0, q_g_row1 = q_g0 + q_row1;
    const long warp_q_first = q_g0 + warp_q0, warp_q_last = warp_q_first + 15;

    // K/V tiles to visit
    long n_tiles = (kv_len + FA_BN - 1) / FA_BN;
    if (causal) {
        long keys = q_g0 + q_tile0 + q_rows - kv_g0; // keys <= the block's last query
        n_tiles = keys <= 0 ? 0 : min(n_tiles, (keys + FA_BN - 1) / FA_BN);
    }

    // softmax state: m in raw score units, l partial per thread (quad-reduced at the end)
    float o[HEAD_DIM / 8][4];
    float m_r[2], l_r[2];
#pragma unroll
    for (int nt = 0; nt < HEAD_DIM / 8; nt++)
        o[nt][0] = o[nt][1] = o[nt][2] = o[nt][3] = 0.0f;
    m_r[0] = m_r[1] = -INFINITY;
    l_r[0] = l_r[1] = 0.0f;

    const uint32_t sq = (uint32_t)__cvta_generic_to_shared(sm.q);
    const uint32_t sk0 = (uint32_t)__cvta_generic_to_shared(sm.k[0]);
    const uint32_t sv0 = (uint32_t)__cvta_generic_to_shared(sm.v[0]);
    const uint32_t kv_tile_bytes = FA_BN * HEAD_DIM * 2;
    const bf16 *kbase = k + (long)kv_head * HEAD_DIM;
    const bf16 *vbase = v + (long)kv_head * HEAD_DIM;

    if (n_tiles > 0) {
        fa_load_tile<FA_BM>(sq, q + (q_tile0 * heads + head) * HEAD_DIM, q_stride, q_rows);
        fa_load_tile<FA_BN>(sk0, kbase, kv_stride, kv_len);
        fa_load_tile<FA_BN>(sv0, vbase, kv_stride, kv_len);
        fa_cp_async_commit();
    }

    // per-lane ldmatrix offsets (the swizzle's row term is lane & 7 in every case)
    // Q (A operand, 16x16 at [warp rows][k]): row lane & 15, chunk 2 kk + (lane >> 4)
    const uint32_t q_lane_row = (uint32_t)(warp * 16 + (lane & 15)) * (HEAD_DIM * 2);
    const int q_lane_c = (lane >> 4) ^ (lane & 7);
    // K (B operand of S, non-transposed): key (lane & 7) + 8 (lane >> 4), chunk 2 kk + ((lane >> 3) & 1)
    const uint32_t k_lane_row = (uint32_t)((lane & 7) + ((lane >> 4) << 3)) * (HEAD_DIM * 2);
    const int k_lane_c = ((lane >> 3) & 1) ^ (lane & 7);
    // V (B operand of O, transposed): key (lane & 7) + 8 ((lane >> 3) & 1), chunk 2 np + (lane >> 4)
    const uint32_t v_lane_row = (uint32_t)((lane & 7) + (((lane >> 3) & 1) << 3)) * (HEAD_DIM * 2);
    const int v_lane_c = (lane >> 4) ^ (lane & 7);

    uint32_t qf[HEAD_DIM / 16][4];

    for (long j = 0; j < n_tiles; j++) {
        const int stage = (int)(j & 1);
        if (j + 1 < n_tiles) {
            long t1 = (j + 1) * FA_BN;
            fa_load_tile<FA_BN>(sk0 + (stage ^ 1) * kv_tile_bytes, kbase + t1 * kv_stride,
                                kv_stride, kv_len - t1);
            fa_load_tile<FA_BN>(sv0 + (stage ^ 1) * kv_tile_bytes, vbase + t1 * kv_stride,
                                kv_stride, kv_len - t1);
            fa_cp_async_commit();
            fa_cp_async_wait<1>();
        } else {
            fa_cp_async_wait<0>();
        }
        __syncthreads();

        if (j == 0) {
#pragma unroll
            for (int kk = 0; kk < HEAD_DIM / 16; kk++)
                fa_ldsm_x4(sq + q_lane_row + (uint32_t)(((2 * kk) ^ q_lane_c) << 4), qf[kk][0],
                           qf[kk][1], qf[kk][2], qf[kk][3]);
        }

        const long t0 = j * FA_BN, k_g0 = kv_g0 + t0;
        // a warp whose queries all precede the tile has nothing to do in it
        if (warp_active && !(causal && k_g0 > warp_q_last)) {
            const uint32_t sk = sk0 + stage * kv_tile_bytes, sv = sv0 + stage * kv_tile_bytes;

            // S = Q K^T: 16 x 64 per warp
            float s[FA_BN / 8][4];
#pragma unroll
            for (int nt = 0; nt < FA_BN / 8; nt++)
                s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
            for (int kk = 0; kk < HEAD_DIM / 16; kk++) {
#pragma unroll
                for (int np = 0; np < FA_BN / 16; np++) {
                    uint32_t b0, b1, b2, b3;
                    fa_ldsm_x4(sk + (uint32_t)(np * 16 * HEAD_DIM * 2) + k_lane_row +
                                   (uint32_t)(((2 * kk) ^ k_lane_c) << 4),
                               b0, b1, b2, b3);
                    fa_mma(s[2 * np], qf[kk], b0, b1);
                    fa_mma(s[2 * np + 1], qf[kk], b2, b3);
                }
            }

            // mask: keys past the segment, and (causal) keys after the query
            const bool need_mask =
                t0 + FA_BN > kv_len || (causal && k_g0 + FA_BN - 1 > warp_q_first);
            if (need_mask) {
#pragma unroll
                for (int nt = 0; nt < FA_BN / 8; nt++) {
#pragma unroll
                    for (int e = 0; e < 2; e++) {
                        long col = t0 + nt * 8 + 2 * tg + e, kg = kv_g0 + col;
                        bool out_col = col >= kv_len;
                        if (out_col || (causal && kg > q_g_row0))
                            s[nt][e] = -INFINITY;
                        if (out_col || (causal && kg > q_g_row1))
                            s[nt][2 + e] = -INFINITY;
                    }
                }
            }

            // online softmax, rows g (h = 0) and g + 8 (h = 1)
            float mx[2] = {m_r[0], m_r[1]};
#pragma unroll
            for (int nt = 0; nt < FA_BN / 8; nt++) {
                mx[0] = fmaxf(mx[0], fmaxf(s[nt][0], s[nt][1]));
                mx[1] = fmaxf(mx[1], fmaxf(s[nt][2], s[nt][3]));
            }
            float msc[2], alpha[2];
#pragma unroll
            for (int h = 0; h < 2; h++) {
                mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
                mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
                // a row with no visible key yet keeps m = -inf; exponentials are then 0
                msc[h] = mx[h] == -INFINITY ? 0.0f : mx[h] * scale_log2;
                alpha[h] = exp2f(m_r[h] * scale_log2 - msc[h]);
                m_r[h] = mx[h];
            }

            // P = exp2(S * scale - m * scale) rounded to bf16: the A fragments of P V
            uint32_t pf[FA_BN / 16][4];
            float ps[2] = {0.0f, 0.0f};
#pragma unroll
            for (int nt = 0; nt < FA_BN / 8; nt++) {
                uint32_t p01 = fa_pack_bf16(exp2f(fmaf(s[nt][0], scale_log2, -msc[0])),
                                            exp2f(fmaf(s[nt][1], scale_log2, -msc[0])));
                uint32_t p23 = fa_pack_bf16(exp2f(fmaf(s[nt][2], scale_log2, -msc[1])),
                                            exp2f(fmaf(s[nt][3], scale_log2, -msc[1])));
                ps[0] += fa_sum_bf16x2(p01); // the weights P V uses, so l matches them
                ps[1] += fa_sum_bf16x2(p23);
                pf[nt >> 1][(nt & 1) * 2] = p01;
                pf[nt >> 1][(nt & 1) * 2 + 1] = p23;
            }
            l_r[0] = l_r[0] * alpha[0] + ps[0];
            l_r[1] = l_r[1] * alpha[1] + ps[1];
#pragma unroll
            for (int nt = 0; nt < HEAD_DIM / 8; nt++) {
                o[nt][0] *= alpha[0];
                o[nt][1] *= alpha[0];
                o[nt][2] *= alpha[1];
                o[nt][3] *= alpha[1];
            }

            // O += P V: 16 x 128 per warp
#pragma unroll
            for (int kk = 0; kk < FA_BN / 16; kk++) {
#pragma unroll
                for (int np = 0; np < HEAD_DIM / 16; np++) {
                    uint32_t b0, b1, b2, b3;
                    fa_ldsm_x4_t(sv + (uint32_t)(kk * 16 * HEAD_DIM * 2) + v_lane_row +
                                     (uint32_t)(((2 * np) ^ v_lane_c) << 4),
                                 b0, b1, b2, b3);
                    fa_mma(o[2 * np], pf[kk], b0, b1);
                    fa_mma(o[2 * np + 1], pf[kk], b2, b3);
                }
            }
        }
        __syncthreads(); // this stage is refilled by the next iteration
    }

    // the row sums over the quad
#pragma unroll
    for (int h = 0; h < 2; h++) {
        l_r[h] += __shfl_xor_sync(0xffffffffu, l_r[h], 1);
        l_r[h] += __shfl_xor_sync(0xffffffffu, l_r[h], 2);
    }
    const long rr[2] = {q_row0, q_row1};
#pragma unroll
    for (int h = 0; h < 2; h++) {
        if (rr[h] >= seq_local)
            continue;
        float inv = l_r[h] > 0.0f ? 1.0f / l_r[h] : 0.0f;
        bf16 *dst = out + ((size_t)rr[h] * heads + head) * HEAD_DIM + 2 * tg;
#pragma unroll
        for (int nt = 0; nt < HEAD_DIM / 8; nt++)
            *reinterpret_cast<__nv_bfloat162 *>(dst + nt * 8) =
                __floats2bfloat162_rn(o[nt][2 * h] * inv, o[nt][2 * h + 1] * inv);
        if (lse && tg == 0)
            lse[(size_t)rr[h] * heads + head] =
                l_r[h] > 0.0f ? m_r[h] * scale_log2 * 0.6931471805599453f + logf(l_r[h])
                              : -INFINITY;
    }
}

struct StepState {
    bf16 *k_all = nullptr, *v_all = nullptr; // [seq][kv_heads][128], global token order
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
    HX_CUDA(cudaFuncSetAttribute(flash_attn_fwd, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 (int)sizeof(FaSmem)));
}

static void step_teardown(hx_ctx &, StepState &s)
{
    HX_CUDA(cudaFree(s.k_all));
    HX_CUDA(cudaFree(s.v_all));
}

// Attention of the rank's queries over the whole gathered sequence.
static void attend(hx_ctx &c, const Problem &p, StepState &s)
{
    dim3 grid((unsigned)p.heads, (unsigned)((p.seq_local + FA_BM - 1) / FA_BM));
    flash_attn_fwd<<<grid, FA_THREADS, sizeof(FaSmem), c.stream>>>(
        p.q, s.k_all, s.v_all, p.heads, p.kv_heads, p.seq_local, p.seq,
        (long)c.rank * p.seq_local, 0, p.causal, p.out, nullptr);
    HX_CHECK_LAUNCH();
}

static void step_run(hx_ctx &c, const Problem &p, StepState &s, unsigned parts)
{
    size_t count = (size_t)p.seq_local * p.kv_heads * HEAD_DIM;
    if (parts & PART_COMM) {
        HX_NCCL(ncclGroupStart());
        HX_NCCL(ncclAllGather(p.k, s.k_all, count, ncclBfloat16, c.comm, c.stream));
        HX_NCCL(ncclAllGather(p.v, s.v_all, count, ncclBfloat16, c.comm, c.stream));
        HX_NCCL(ncclGroupEnd());
    }
    if (parts & PART_COMPUTE)
        attend(c, p, s);
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
// `want` of the rank's queries, spread over its shard and shifted by `shift`
// (each timed step's sample differs).
static bool check_queries(hx_ctx &c, const Problem &p, uint64_t seed, int want, long shift,
                          std::string &reason)
{
    std::vector<long> toks;
    for (int i = 0; i < want && i < p.seq_local; i++)
        toks.push_back((long)c.rank * p.seq_local +
                       (p.seq_local <= want
                            ? i
                            : ((long)i * (p.seq_local - 1) / (want - 1) + shift) % p.seq_local));
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

static void fill_inputs(hx_ctx &c, const Problem &p, uint64_t seed, cudaStream_t st = 0)
{
    long tok0 = (long)c.rank * p.seq_local;
    fill_rows<<<1024, 256, 0, st>>>(p.q, p.seq_local, p.heads, tok0, TENSOR_Q, seed);
    HX_CHECK_LAUNCH();
    fill_rows<<<1024, 256, 0, st>>>(p.k, p.seq_local, p.kv_heads, tok0, TENSOR_K, seed);
    HX_CHECK_LAUNCH();
    fill_rows<<<1024, 256, 0, st>>>(p.v, p.seq_local, p.kv_heads, tok0, TENSOR_V, seed);
    HX_CHECK_LAUNCH();
}

int main(int argc, char **argv)
{
    hx_ctx c;
    hx_vouch vouch; // what hx_finalize vouches for: main's alone
    hx_init(&argc, &argv, c, vouch);
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
        hx_report_verification(c, vouch, false,
                               "bad sizes: --seq must be a positive multiple of 64 x ranks, "
                               "--heads a multiple of --kv_heads, --iters positive");
        hx_finalize(c, vouch);
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
    bool ok = check_queries(c, p, seed, 24, 0, reason);

    // The timed steps are verified steps: new Q, K and V each, the output
    // poisoned, 4 queries checked after each.
    hx_checked_step all;
    all.prepare = [&](int i, cudaStream_t st) {
        fill_inputs(c, p, hx_iter_seed(seed, i), st);
        HX_CUDA(cudaMemsetAsync(p.out, 0xFF, q_bytes, st));
    };
    all.run = [&] { step_run(c, p, s, PART_ALL); };
    all.check = [&](int i, std::string &why) {
        return check_queries(c, p, hx_iter_seed(seed, i), 4, 53L * (i + 1), why);
    };
    bool timed_ok = true;
    std::string timed_reason;
    double t_all = hx_time_checked_ms(c, warmup, iters, all, timed_ok, timed_reason);
    ok = hx_report_verification(c, vouch, ok && timed_ok, ok ? timed_reason : reason);

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
    hx_report_result(c, vouch, t_all, iters, t_compute, t_comm, extra);

    step_teardown(c, s);
    step_free(c, p.q);
    step_free(c, p.k);
    step_free(c, p.v);
    step_free(c, p.out);
    hx_finalize(c, vouch);
    return ok ? 0 : 1;
}
