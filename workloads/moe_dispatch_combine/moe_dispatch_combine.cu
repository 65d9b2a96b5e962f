// moe_dispatch_combine.cu: one DeepSeek-V3 MoE layer (routed experts) with
// expert parallelism. Each of n ranks holds T tokens (hidden 7168, bf16) and
// E/n of the E routed experts (FFN 2048: up/gate 7168 -> 2 x 2048, SiLU(gate)
// * up, down 2048 -> 7168). The step routes every token to its top-8 experts
// (sigmoid scores of given router logits, weights normalized over the 8),
// dispatches a copy of the token to the rank owning each chosen expert
// (counts exchanged with ncclAlltoAll, rows with grouped ncclSend/ncclRecv),
// runs the local expert GEMMs with cuBLAS, sends the expert outputs back
// (combine) and sums them with the routing weights into the token's output.
// The seed is the host-driven way, every phase on the main stream one after
// the other (as Megatron's all-to-all dispatcher does it, no overlap);
// everything outside the EVOLVE-BLOCK (inputs, the independent reference,
// verification, timing, the result line) is frozen.
//
// Contract between the frozen code and the EVOLVE-BLOCK:
//   step_alloc/step_free  the buffers the step reads and writes (x, out),
//                         called in the same order on every rank;
//   step_setup/teardown   the step's own state (weights are given in Problem;
//                         staging buffers, handles, events);
//   step_run(parts)       PART_ALL: the whole layer; PART_COMPUTE: routing,
//                         permutes, expert GEMMs and the weighted sum with the
//                         exchanged rows assumed present (the counts of the
//                         last full step are reused); PART_COMM: the count
//                         exchange, dispatch and combine only, same sizes.
//                         Work is enqueued on c.stream or joined back into it.
//                         Work starts after what is already on c.stream
//                         (streams forked from it) and no host thread is
//                         left running; the timed steps check that.
//
// Layouts (row-major): x, out [T][7168]; logits [T][E];
// w_up [E/n][7168][4096] (columns 0..2047 gate, 2048..4095 up);
// w_down [E/n][2048][7168]; local expert e is global expert rank*E/n + e.
// Usage: moe_dispatch_combine [--tokens T] [--experts E] [--seed S]
//                             [--warmup W] [--iters I]
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

#define HIDDEN 7168
#define FFN 2048
#define TOPK 8

struct Problem {
    long tokens = 0;                      // per rank
    int experts = 0, experts_local = 0;   // global routed experts, per rank
    float *logits = nullptr;              // [tokens][experts], router output (given)
    bf16 *x = nullptr, *out = nullptr;    // [tokens][HIDDEN], from step_alloc
    bf16 *w_up = nullptr, *w_down = nullptr; // this rank's experts, plain device memory
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

__host__ __device__ inline float gen_uniform(uint64_t seed, uint64_t tensor, uint64_t index)
{
    uint64_t h = gen_mix(seed ^ gen_mix((tensor << 56) ^ index));
    return (float)(h >> 40) * (1.0f / 16777216.0f) * 2.0f - 1.0f;
}

// Uniform in [-scale, scale), rounded to bf16 as the stored tensors are.
__host__ __device__ inline float gen_value(uint64_t seed, uint64_t tensor, uint64_t index,
                                           float scale)
{
    return __bfloat162float(__float2bfloat16(gen_uniform(seed, tensor, index) * scale));
}

enum { TENSOR_X = 1, TENSOR_LOGIT = 2, TENSOR_UP = 3, TENSOR_DOWN = 4 };

// Weights scaled by 1/sqrt(fan-in) as at initialization; logits x4 so that
// the routing weights are not all alike.
#define UP_SCALE (1.0f / 84.66f)  // 1/sqrt(7168)
#define DOWN_SCALE (1.0f / 45.25f) // 1/sqrt(2048)
#define LOGIT_SCALE 4.0f

// Global element index of a weight: expert-major, so every rank generates
// the same values for an expert whoever holds it.
__host__ __device__ inline uint64_t up_index(uint64_t expert, uint64_t i, uint64_t j)
{
    return (expert * HIDDEN + i) * (2 * FFN) + j;
}
__host__ __device__ inline uint64_t down_index(uint64_t expert, uint64_t i, uint64_t j)
{
    return (expert * FFN + i) * HIDDEN + j;
}

__global__ void fill_x(bf16 *x, long tokens, long tok0, uint64_t seed)
{
    size_t total = (size_t)tokens * HIDDEN;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x)
        x[i] = __float2bfloat16(gen_value(seed, TENSOR_X, (size_t)tok0 * HIDDEN + i, 1.0f));
}

__global__ void fill_logits(float *l, long tokens, int experts, long tok0, uint64_t seed)
{
    size_t total = (size_t)tokens * experts;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x)
        l[i] = gen_uniform(seed, TENSOR_LOGIT, (size_t)tok0 * experts + i) * LOGIT_SCALE;
}

__global__ void fill_weights(bf16 *up, bf16 *down, int experts_local, int expert0, uint64_t seed)
{
    size_t per_up = (size_t)HIDDEN * 2 * FFN, per_down = (size_t)FFN * HIDDEN;
    size_t total = (size_t)experts_local * per_up;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t e = i / per_up, r = i % per_up;
        up[i] = __float2bfloat16(gen_value(seed, TENSOR_UP, (expert0 + e) * per_up + r, UP_SCALE));
        if (r < per_down)
            down[e * per_down + r] = __float2bfloat16(
                gen_value(seed, TENSOR_DOWN, (expert0 + e) * per_down + r, DOWN_SCALE));
    }
}

// EVOLVE-BLOCK-START
// Host-driven seed (Megatron-style all-to-all dispatcher):
//   route:    top-8 of sigmoid(logits) per token (ties: lower expert index),
//             weights normalized over the 8;
//   permute:  one copy of the token per (token, expert) pair, sorted by
//             global expert, hence grouped by destination rank;
//   counts:   ncclAlltoAll of the per-expert counts, copied to the host (the
//             sizes of the sends and the GEMMs);
//   dispatch: ncclSend/ncclRecv per peer in one NCCL group;
//   experts:  rows regrouped expert-major, then per local expert cuBLAS
//             GEMMs: [n_e x 7168] x [7168 x 4096], SiLU(gate) * up,
//             [n_e x 2048] x [2048 x 7168];
//   combine:  rows regrouped source-major, ncclSend/ncclRecv back, then the
//             weighted sum of each token's 8 rows.
// Everything runs on the main stream, one step after the other.

struct StepState {
    cublasHandle_t blas = nullptr;
    long cap_rows = 0;            // rows the receive-side buffers hold
    int *topk_idx = nullptr;      // [T][8] global expert
    float *topk_w = nullptr;      // [T][8]
    int *pair_pos = nullptr;      // [T][8] row of the pair in send_rows
    int *expert_count = nullptr;  // [E] pairs per global expert (this rank's tokens)
    int *expert_cursor = nullptr; // [E]
    int *recv_count = nullptr;    // [n][E/n] from source s for local expert e
    int *h_send_count = nullptr, *h_recv_count = nullptr; // pinned copies
    bf16 *send_rows = nullptr;    // [8T][HIDDEN] pairs sorted by expert
    bf16 *back_rows = nullptr;    // [8T][HIDDEN] expert outputs, same order
    bf16 *recv_rows = nullptr;    // [cap][HIDDEN] [source][expert]
    bf16 *expert_in = nullptr;    // [cap][HIDDEN] expert-major
    bf16 *h1 = nullptr;           // [cap][2*FFN]
    bf16 *act = nullptr;          // [cap][FFN]
    bf16 *expert_out = nullptr;   // [cap][HIDDEN] expert-major
    bf16 *ret_rows = nullptr;     // [cap][HIDDEN] layout of recv_rows
    long *blocks_d = nullptr;     // copy table (src, dst, rows) triples
    long *blocks_h = nullptr;     // pinned
    long blocks_cap = 0;
    bool have_counts = false;
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

// One warp per token: 8 rounds of a warp-wide argmax over the sigmoid scores.
__global__ void moe_route(const float *logits, long tokens, int experts, int *topk_idx,
                          float *topk_w, int *expert_count)
{
    long t = blockIdx.x * (long)(blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (t >= tokens)
        return;
    const float *row = logits + t * experts;
    unsigned long long taken[8] = {0}; // bitmask over up to 512 experts
    float score[TOPK];
    int idx[TOPK];
    float sum = 0.0f;
    for (int k = 0; k < TOPK; k++) {
        float best = -1.0f;
        int best_e = experts;
        for (int e = lane; e < experts; e += 32) {
            if (taken[e / 64] & (1ull << (e % 64)))
                continue;
            float s = 1.0f / (1.0f + expf(-row[e]));
            if (s > best || (s == best && e < best_e)) {
                best = s;
                best_e = e;
            }
        }
        for (int off = 16; off > 0; off /= 2) {
            float ob = __shfl_xor_sync(0xffffffffu, best, off);
            int oe = __shfl_xor_sync(0xffffffffu, best_e, off);
            if (ob > best || (ob == best && oe < best_e)) {
                best = ob;
                best_e = oe;
            }
        }
        taken[best_e / 64] |= 1ull << (best_e % 64);
        score[k] = best;
        idx[k] = best_e;
        sum += best;
    }
    if (lane < TOPK) {
        topk_idx[t * TOPK + lane] = idx[lane];
        topk_w[t * TOPK + lane] = score[lane] / sum;
        atomicAdd(&expert_count[idx[lane]], 1);
    }
}

// Exclusive scan of the per-expert counts into cursors (one small block).
__global__ void moe_scan(const int *count, int experts, int *cursor)
{
    if (threadIdx.x == 0) {
        int run = 0;
        for (int e = 0; e < experts; e++) {
            cursor[e] = run;
            run += count[e];
        }
    }
}

// One block per token: claim a row per pair, copy the token there.
__global__ void moe_permute(const bf16 *x, const int *topk_idx, int *cursor, int *pair_pos,
                            bf16 *send_rows)
{
    long t = blockIdx.x;
    __shared__ int pos[TOPK];
    if (threadIdx.x < TOPK) {
        pos[threadIdx.x] = atomicAdd(&cursor[topk_idx[t * TOPK + threadIdx.x]], 1);
        pair_pos[t * TOPK + threadIdx.x] = pos[threadIdx.x];
    }
    __syncthreads();
    const uint4 *src = reinterpret_cast<const uint4 *>(x + t * HIDDEN);
    for (int k = 0; k < TOPK; k++) {
        uint4 *dst = reinterpret_cast<uint4 *>(send_rows + (size_t)pos[k] * HIDDEN);
        for (int i = threadIdx.x; i < HIDDEN / 8; i += blockDim.x)
            dst[i] = src[i];
    }
}

// Copies row blocks: blocks[3b] source row, [3b+1] destination row,
// [3b+2] rows; grid.y = block, grid.x strides the rows.
__global__ void moe_copy_blocks(const long *blocks, const bf16 *src, bf16 *dst)
{
    long s0 = blocks[3 * blockIdx.y], d0 = blocks[3 * blockIdx.y + 1], rows = blocks[3 * blockIdx.y + 2];
    for (long r = blockIdx.x; r < rows; r += gridDim.x) {
        const uint4 *a = reinterpret_cast<const uint4 *>(src + (size_t)(s0 + r) * HIDDEN);
        uint4 *b = reinterpret_cast<uint4 *>(dst + (size_t)(d0 + r) * HIDDEN);
        for (int i = threadIdx.x; i < HIDDEN / 8; i += blockDim.x)
            b[i] = a[i];
    }
}

// act[r][j] = SiLU(h1[r][j]) * h1[r][FFN + j]
__global__ void moe_silu_mul(const bf16 *h1, long rows, bf16 *act)
{
    size_t total = (size_t)rows * FFN;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t r = i / FFN, j = i % FFN;
        float g = __bfloat162float(h1[r * 2 * FFN + j]);
        float u = __bfloat162float(h1[r * 2 * FFN + FFN + j]);
        act[i] = __float2bfloat16(g / (1.0f + expf(-g)) * u);
    }
}

// out[t] = sum_k w[t][k] * back_rows[pair_pos[t][k]], fp32 then bf16
__global__ void moe_combine(const bf16 *back_rows, const int *pair_pos, const float *topk_w,
                            bf16 *out)
{
    long t = blockIdx.x;
    for (int i = threadIdx.x; i < HIDDEN; i += blockDim.x) {
        float acc = 0.0f;
        for (int k = 0; k < TOPK; k++)
            acc += topk_w[t * TOPK + k] *
                   __bfloat162float(back_rows[(size_t)pair_pos[t * TOPK + k] * HIDDEN + i]);
        out[t * HIDDEN + i] = __float2bfloat16(acc);
    }
}

static void step_setup(hx_ctx &c, const Problem &p, StepState &s)
{
    HX_CUBLAS(cublasCreate(&s.blas));
    long pairs = p.tokens * TOPK;
    s.cap_rows = pairs * c.nranks; // every rank could send all its pairs here
    HX_CUDA(cudaMalloc(&s.topk_idx, pairs * sizeof(int)));
    HX_CUDA(cudaMalloc(&s.topk_w, pairs * sizeof(float)));
    HX_CUDA(cudaMalloc(&s.pair_pos, pairs * sizeof(int)));
    HX_CUDA(cudaMalloc(&s.expert_count, p.experts * sizeof(int)));
    HX_CUDA(cudaMalloc(&s.expert_cursor, p.experts * sizeof(int)));
    HX_CUDA(cudaMalloc(&s.recv_count, p.experts * sizeof(int)));
    HX_CUDA(cudaMallocHost(&s.h_send_count, p.experts * sizeof(int)));
    HX_CUDA(cudaMallocHost(&s.h_recv_count, p.experts * sizeof(int)));
    size_t row = HIDDEN * sizeof(bf16);
    HX_CUDA(cudaMalloc(&s.send_rows, pairs * row));
    HX_CUDA(cudaMalloc(&s.back_rows, pairs * row));
    HX_CUDA(cudaMalloc(&s.recv_rows, s.cap_rows * row));
    HX_CUDA(cudaMalloc(&s.expert_in, s.cap_rows * row));
    HX_CUDA(cudaMalloc(&s.expert_out, s.cap_rows * row));
    HX_CUDA(cudaMalloc(&s.ret_rows, s.cap_rows * row));
    HX_CUDA(cudaMalloc(&s.h1, s.cap_rows * 2 * FFN * sizeof(bf16)));
    HX_CUDA(cudaMalloc(&s.act, s.cap_rows * FFN * sizeof(bf16)));
    s.blocks_cap = 3L * c.nranks * p.experts_local;
    HX_CUDA(cudaMalloc(&s.blocks_d, 2 * s.blocks_cap * sizeof(long)));
    HX_CUDA(cudaMallocHost(&s.blocks_h, 2 * s.blocks_cap * sizeof(long)));
}

static void step_teardown(hx_ctx &, StepState &s)
{
    void *dev[] = {s.topk_idx,  s.topk_w,    s.pair_pos,   s.expert_count, s.expert_cursor,
                   s.recv_count, s.send_rows, s.back_rows, s.recv_rows,    s.expert_in,
                   s.expert_out, s.ret_rows,  s.h1,        s.act,          s.blocks_d};
    for (void *ptr : dev)
        HX_CUDA(cudaFree(ptr));
    HX_CUDA(cudaFreeHost(s.h_send_count));
    HX_CUDA(cudaFreeHost(s.h_recv_count));
    HX_CUDA(cudaFreeHost(s.blocks_h));
    HX_CUBLAS(cublasDestroy(s.blas));
}

// Host-side layout from the counts, with all local experts in one group
// (g = 0). recv_rows and ret_rows: [source][expert]; expert_in and
// expert_out: [expert][source]. send_rows: by global expert.
struct Layout {
    std::vector<long> send_off, send_cnt; // [g][peer]: rows of send_rows / back_rows
    std::vector<long> recv_off, recv_cnt; // [g][peer]: rows of recv_rows / ret_rows
    std::vector<long> exp_off, exp_cnt;   // [e]: rows of expert_in / expert_out
    std::vector<long> to_expert;          // copy triples recv -> expert-major, then back
    std::vector<int> group_e0;            // [g + 1]
    std::vector<int> group_blocks;        // [g + 1] first triple of each group
};

static Layout step_layout(hx_ctx &c, const Problem &p, const StepState &s)
{
    Layout L;
    (void)s;
    int n = c.nranks, el = p.experts_local, G = 1;
    for (int g = 0; g <= G; g++)
        L.group_e0.push_back((int)((long)g * el / G));
    // send side: rows of peer r for its experts in group g are contiguous
    std::vector<long> expert_row0(p.experts + 1, 0);
    for (int e = 0; e < p.experts; e++)
        expert_row0[e + 1] = expert_row0[e] + s.h_send_count[e];
    for (int g = 0; g < G; g++)
        for (int r = 0; r < n; r++) {
            int a = r * el + L.group_e0[g], b = r * el + L.group_e0[g + 1];
            L.send_off.push_back(expert_row0[a]);
            L.send_cnt.push_back(expert_row0[b] - expert_row0[a]);
        }
    // expert-major rows: expert e holds its rows from source 0, 1, ...
    long row = 0;
    for (int e = 0; e < el; e++) {
        long cnt = 0;
        for (int src = 0; src < n; src++)
            cnt += s.h_recv_count[src * el + e];
        L.exp_off.push_back(row);
        L.exp_cnt.push_back(cnt);
        row += cnt;
    }
    // receive side and the copy table
    row = 0;
    for (int g = 0; g < G; g++) {
        L.group_blocks.push_back((int)(L.to_expert.size() / 3));
        for (int src = 0; src < n; src++) {
            L.recv_off.push_back(row);
            long start = row;
            for (int e = L.group_e0[g]; e < L.group_e0[g + 1]; e++) {
                long cnt = s.h_recv_count[src * el + e];
                long dst = L.exp_off[e];
                for (int s2 = 0; s2 < src; s2++)
                    dst += s.h_recv_count[s2 * el + e];
                if (cnt > 0) {
                    L.to_expert.push_back(row);
                    L.to_expert.push_back(dst);
                    L.to_expert.push_back(cnt);
                }
                row += cnt;
            }
            L.recv_cnt.push_back(row - start);
        }
    }
    L.group_blocks.push_back((int)(L.to_expert.size() / 3));
    return L;
}

static void step_counts(hx_ctx &c, const Problem &p, StepState &s, cudaStream_t st)
{
    HX_NCCL(ncclAlltoAll(s.expert_count, s.recv_count, (size_t)p.experts_local, ncclInt32,
                         c.comm, st));
    HX_CUDA(cudaMemcpyAsync(s.h_send_count, s.expert_count, p.experts * sizeof(int),
                            cudaMemcpyDeviceToHost, st));
    HX_CUDA(cudaMemcpyAsync(s.h_recv_count, s.recv_count, p.experts * sizeof(int),
                            cudaMemcpyDeviceToHost, st));
    HX_CUDA(cudaStreamSynchronize(st));
    s.have_counts = true;
}

// rows exchanged for group g: forward (dispatch) or back (combine)
static void step_exchange(hx_ctx &c, StepState &s, const Layout &L, int g, bool forward,
                          cudaStream_t st)
{
    HX_NCCL(ncclGroupStart());
    for (int r = 0; r < c.nranks; r++) {
        size_t so = L.send_off[g * c.nranks + r] * HIDDEN, sc = L.send_cnt[g * c.nranks + r] * HIDDEN;
        size_t ro = L.recv_off[g * c.nranks + r] * HIDDEN, rc = L.recv_cnt[g * c.nranks + r] * HIDDEN;
        if (forward) {
            if (sc) {
                HX_NCCL(ncclSend(s.send_rows + so, sc, ncclBfloat16, r, c.comm, st));
            }
            if (rc) {
                HX_NCCL(ncclRecv(s.recv_rows + ro, rc, ncclBfloat16, r, c.comm, st));
            }
        } else {
            if (rc) {
                HX_NCCL(ncclSend(s.ret_rows + ro, rc, ncclBfloat16, r, c.comm, st));
            }
            if (sc) {
                HX_NCCL(ncclRecv(s.back_rows + so, sc, ncclBfloat16, r, c.comm, st));
            }
        }
    }
    HX_NCCL(ncclGroupEnd());
}

// Group g's experts: regroup rows expert-major, GEMMs, regroup back.
static void step_experts(const Problem &p, StepState &s, const Layout &L, int g, long *blocks_dev,
                         cudaStream_t st)
{
    int b0 = L.group_blocks[g], nb = L.group_blocks[g + 1] - b0;
    if (nb > 0)
        moe_copy_blocks<<<dim3(64, nb), 256, 0, st>>>(blocks_dev + 3 * b0, s.recv_rows, s.expert_in);
    HX_CHECK_LAUNCH();
    const float one = 1.0f, zero = 0.0f;
    HX_CUBLAS(cublasSetStream(s.blas, st));
    for (int e = L.group_e0[g]; e < L.group_e0[g + 1]; e++) {
        long rows = L.exp_cnt[e], r0 = L.exp_off[e];
        if (rows == 0)
            continue;
        // row-major C = A B is column-major C^T = B^T A^T
        const bf16 *wu = p.w_up + (size_t)e * HIDDEN * 2 * FFN;
        const bf16 *wd = p.w_down + (size_t)e * FFN * HIDDEN;
        HX_CUBLAS(cublasGemmEx(s.blas, CUBLAS_OP_N, CUBLAS_OP_N, 2 * FFN, (int)rows, HIDDEN, &one,
                               wu, CUDA_R_16BF, 2 * FFN, s.expert_in + (size_t)r0 * HIDDEN,
                               CUDA_R_16BF, HIDDEN, &zero, s.h1 + (size_t)r0 * 2 * FFN, CUDA_R_16BF,
                               2 * FFN, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        moe_silu_mul<<<(unsigned)std::min(4096L, (rows * FFN + 255) / 256), 256, 0, st>>>(
            s.h1 + (size_t)r0 * 2 * FFN, rows, s.act + (size_t)r0 * FFN);
        HX_CHECK_LAUNCH();
        HX_CUBLAS(cublasGemmEx(s.blas, CUBLAS_OP_N, CUBLAS_OP_N, HIDDEN, (int)rows, FFN, &one, wd,
                               CUDA_R_16BF, HIDDEN, s.act + (size_t)r0 * FFN, CUDA_R_16BF, FFN,
                               &zero, s.expert_out + (size_t)r0 * HIDDEN, CUDA_R_16BF, HIDDEN,
                               CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    }
    // the same table read the other way: expert-major back to receive order
    if (nb > 0)
        moe_copy_blocks<<<dim3(64, nb), 256, 0, st>>>(blocks_dev + s.blocks_cap + 3 * b0,
                                                      s.expert_out, s.ret_rows);
    HX_CHECK_LAUNCH();
}

static void step_run(hx_ctx &c, const Problem &p, StepState &s, unsigned parts)
{
    cudaStream_t st = c.stream;
    if (parts & PART_COMPUTE) {
        HX_CUDA(cudaMemsetAsync(s.expert_count, 0, p.experts * sizeof(int), st));
        moe_route<<<(unsigned)((p.tokens + 7) / 8), 256, 0, st>>>(p.logits, p.tokens, p.experts,
                                                                  s.topk_idx, s.topk_w,
                                                                  s.expert_count);
        HX_CHECK_LAUNCH();
        moe_scan<<<1, 32, 0, st>>>(s.expert_count, p.experts, s.expert_cursor);
        HX_CHECK_LAUNCH();
        moe_permute<<<(unsigned)p.tokens, 256, 0, st>>>(p.x, s.topk_idx, s.expert_cursor,
                                                        s.pair_pos, s.send_rows);
        HX_CHECK_LAUNCH();
    }
    // the sizes of everything below; without communication, the last step's
    if ((parts & PART_COMM) || !s.have_counts)
        step_counts(c, p, s, st);
    Layout L = step_layout(c, p, s);
    size_t nt = L.to_expert.size();
    // forward table, then the reversed one (dst, src) at blocks_cap
    for (size_t i = 0; i < nt; i += 3) {
        s.blocks_h[i] = L.to_expert[i];
        s.blocks_h[i + 1] = L.to_expert[i + 1];
        s.blocks_h[i + 2] = L.to_expert[i + 2];
        s.blocks_h[s.blocks_cap + i] = L.to_expert[i + 1];
        s.blocks_h[s.blocks_cap + i + 1] = L.to_expert[i];
        s.blocks_h[s.blocks_cap + i + 2] = L.to_expert[i + 2];
    }
    if (parts & PART_COMPUTE) {
        HX_CUDA(cudaMemcpyAsync(s.blocks_d, s.blocks_h, nt * sizeof(long), cudaMemcpyHostToDevice, st));
        HX_CUDA(cudaMemcpyAsync(s.blocks_d + s.blocks_cap, s.blocks_h + s.blocks_cap,
                                nt * sizeof(long), cudaMemcpyHostToDevice, st));
        // the next step rewrites blocks_h: this copy must be done first
        HX_CUDA(cudaStreamSynchronize(st));
    }

    if (parts & PART_COMM)
        step_exchange(c, s, L, 0, true, st);
    if (parts & PART_COMPUTE)
        step_experts(p, s, L, 0, s.blocks_d, st);
    if (parts & PART_COMM)
        step_exchange(c, s, L, 0, false, st);
    if (parts & PART_COMPUTE) {
        moe_combine<<<(unsigned)p.tokens, 256, 0, st>>>(s.back_rows, s.pair_pos, s.topk_w, p.out);
        HX_CHECK_LAUNCH();
    }
}
// EVOLVE-BLOCK-END

// ---- verification: an independent reference on sampled tokens -------------

// One block per (sampled token, slot): the expert's FFN in double straight
// from the generator (no stored weights, no bf16 intermediates):
//   h = x W_up[e], a = SiLU(h_gate) * h_up, y = a W_down[e],
// and the scale of the rounding error, ysum[j] = sum_i |a_i W_down[e][i][j]|.
__global__ void ref_expert(const long *tokens, const int *experts, uint64_t x_seed,
                           uint64_t seed, float *y, float *ysum)
{
    __shared__ float xs[HIDDEN];
    __shared__ double as[FFN];
    int b = blockIdx.x;
    long tok = tokens[b];
    uint64_t e = (uint64_t)experts[b];
    for (int i = threadIdx.x; i < HIDDEN; i += blockDim.x)
        xs[i] = gen_value(x_seed, TENSOR_X, (uint64_t)tok * HIDDEN + i, 1.0f);
    __syncthreads();
    for (int j = threadIdx.x; j < FFN; j += blockDim.x) {
        double g = 0.0, u = 0.0;
        for (int i = 0; i < HIDDEN; i++) {
            g += (double)xs[i] * gen_value(seed, TENSOR_UP, up_index(e, i, j), UP_SCALE);
            u += (double)xs[i] * gen_value(seed, TENSOR_UP, up_index(e, i, FFN + j), UP_SCALE);
        }
        as[j] = g / (1.0 + exp(-g)) * u;
    }
    __syncthreads();
    for (int j = threadIdx.x; j < HIDDEN; j += blockDim.x) {
        double acc = 0.0, mag = 0.0;
        for (int i = 0; i < FFN; i++) {
            double prod = as[i] * gen_value(seed, TENSOR_DOWN, down_index(e, i, j), DOWN_SCALE);
            acc += prod;
            mag += fabs(prod);
        }
        y[(size_t)b * HIDDEN + j] = (float)acc;
        ysum[(size_t)b * HIDDEN + j] = (float)mag;
    }
}

// Tolerance: the layer rounds h and a to bf16 (2^-9 relative each, so a is
// off by up to ~2^-8 relative per element), every expert output to bf16
// (2^-9) and the sum to bf16 (2^-9 |out|), with fp32 accumulation of exact
// bf16 products otherwise. The errors of a's 2048 elements are independent:
// their sum is a random walk far below 2^-9 sum |a w| (a bound about 20
// standard deviations wide), so out is allowed 2^-7 |ref| + 2^-9 sum_k
// w_k ysum_k. A missing, duplicated or misrouted expert row moves the sum by
// w_k |y_k| (~1/8 of |out|), several times the tolerance; NaN poison fails.
// The inputs (x, logits) come from in_seed, the weights from w_seed; `want`
// tokens spread over the rank's, shifted by `shift` (each timed step's
// sample differs).
static bool check_tokens(hx_ctx &c, const Problem &p, uint64_t in_seed, uint64_t w_seed,
                         int want, long shift, std::string &reason)
{
    std::vector<long> toks;
    for (int i = 0; i < want && i < p.tokens; i++)
        toks.push_back(p.tokens <= want
                           ? i
                           : ((long)i * (p.tokens - 1) / (want - 1) + shift) % p.tokens);
    int nsamp = (int)toks.size();
    // routing on the host from the regenerated logits
    std::vector<long> pair_tok;
    std::vector<int> pair_exp;
    std::vector<double> pair_w;
    for (long t : toks) {
        long g = (long)c.rank * p.tokens + t;
        std::vector<std::pair<double, int>> sc;
        for (int e = 0; e < p.experts; e++) {
            double l =
                gen_uniform(in_seed, TENSOR_LOGIT, (uint64_t)g * p.experts + e) * LOGIT_SCALE;
            sc.push_back({(double)(1.0f / (1.0f + expf(-(float)l))), e});
        }
        std::sort(sc.begin(), sc.end(), [](const std::pair<double, int> &a,
                                           const std::pair<double, int> &b) {
            return a.first != b.first ? a.first > b.first : a.second < b.second;
        });
        double sum = 0.0;
        for (int k = 0; k < TOPK; k++)
            sum += sc[k].first;
        for (int k = 0; k < TOPK; k++) {
            pair_tok.push_back(g);
            pair_exp.push_back(sc[k].second);
            pair_w.push_back(sc[k].first / sum);
        }
    }
    int npairs = (int)pair_tok.size();
    long *tok_d = nullptr;
    int *exp_d = nullptr;
    float *y = nullptr, *ysum = nullptr;
    HX_CUDA(cudaMalloc(&tok_d, npairs * sizeof(long)));
    HX_CUDA(cudaMalloc(&exp_d, npairs * sizeof(int)));
    HX_CUDA(cudaMalloc(&y, (size_t)npairs * HIDDEN * sizeof(float)));
    HX_CUDA(cudaMalloc(&ysum, (size_t)npairs * HIDDEN * sizeof(float)));
    HX_CUDA(cudaMemcpy(tok_d, pair_tok.data(), npairs * sizeof(long), cudaMemcpyHostToDevice));
    HX_CUDA(cudaMemcpy(exp_d, pair_exp.data(), npairs * sizeof(int), cudaMemcpyHostToDevice));
    ref_expert<<<npairs, 256>>>(tok_d, exp_d, in_seed, w_seed, y, ysum);
    HX_CHECK_LAUNCH();
    HX_CUDA(cudaDeviceSynchronize());
    std::vector<float> y_h((size_t)npairs * HIDDEN), ysum_h(y_h.size());
    HX_CUDA(cudaMemcpy(y_h.data(), y, y_h.size() * sizeof(float), cudaMemcpyDeviceToHost));
    HX_CUDA(cudaMemcpy(ysum_h.data(), ysum, ysum_h.size() * sizeof(float), cudaMemcpyDeviceToHost));
    std::vector<bf16> got(HIDDEN);
    long bad = 0;
    std::string first;
    for (int i = 0; i < nsamp; i++) {
        HX_CUDA(cudaMemcpy(got.data(), p.out + (size_t)toks[i] * HIDDEN, HIDDEN * sizeof(bf16),
                           cudaMemcpyDeviceToHost));
        for (int j = 0; j < HIDDEN; j++) {
            double ref = 0.0, scale = 0.0;
            for (int k = 0; k < TOPK; k++) {
                size_t q = (size_t)(i * TOPK + k) * HIDDEN + j;
                ref += pair_w[i * TOPK + k] * y_h[q];
                scale += pair_w[i * TOPK + k] * ysum_h[q];
            }
            double tol = std::ldexp(std::fabs(ref), -7) + std::ldexp(scale, -9);
            double have = __bfloat162float(got[j]);
            if (!(std::fabs(have - ref) <= tol)) {
                if (bad == 0)
                    first = "out[" + std::to_string(toks[i]) + "][" + std::to_string(j) +
                            "] = " + std::to_string(have) + ", reference " + std::to_string(ref) +
                            " (tol " + std::to_string(tol) + ")";
                bad++;
            }
        }
    }
    HX_CUDA(cudaFree(tok_d));
    HX_CUDA(cudaFree(exp_d));
    HX_CUDA(cudaFree(y));
    HX_CUDA(cudaFree(ysum));
    if (bad) {
        reason = std::to_string(bad) + " of " + std::to_string((long)nsamp * HIDDEN) +
                 " checked outputs wrong; first: " + first;
        return false;
    }
    return true;
}

static void fill_inputs(hx_ctx &c, const Problem &p, uint64_t seed, cudaStream_t st = 0)
{
    fill_x<<<1024, 256, 0, st>>>(p.x, p.tokens, (long)c.rank * p.tokens, seed);
    HX_CHECK_LAUNCH();
    fill_logits<<<1024, 256, 0, st>>>(p.logits, p.tokens, p.experts, (long)c.rank * p.tokens, seed);
    HX_CHECK_LAUNCH();
}

int main(int argc, char **argv)
{
    hx_ctx c;
    hx_vouch vouch; // what hx_finalize vouches for: main's alone
    hx_init(&argc, &argv, c, vouch);
    Problem p;
    p.tokens = hx_arg_long(argc, argv, "--tokens", 4096);
    p.experts = (int)hx_arg_long(argc, argv, "--experts", 256);
    uint64_t seed = (uint64_t)hx_arg_long(argc, argv, "--seed", 1234);
    int warmup = (int)hx_arg_long(argc, argv, "--warmup", 3);
    int iters = (int)hx_arg_long(argc, argv, "--iters", 10);
    if (p.tokens <= 0 || p.experts < TOPK || p.experts > 512 || p.experts % c.nranks ||
        iters <= 0 || warmup < 0 || p.tokens * TOPK * c.nranks > INT32_MAX / 2) {
        hx_report_verification(c, vouch, false,
                               "bad sizes: --experts must be 8..512 and a multiple of the rank "
                               "count, --tokens positive, --iters positive");
        hx_finalize(c, vouch);
        return 2;
    }
    p.experts_local = p.experts / c.nranks;

    size_t x_bytes = (size_t)p.tokens * HIDDEN * sizeof(bf16);
    p.x = (bf16 *)step_alloc(c, x_bytes);
    p.out = (bf16 *)step_alloc(c, x_bytes);
    HX_CUDA(cudaMalloc(&p.logits, (size_t)p.tokens * p.experts * sizeof(float)));
    HX_CUDA(cudaMalloc(&p.w_up, (size_t)p.experts_local * HIDDEN * 2 * FFN * sizeof(bf16)));
    HX_CUDA(cudaMalloc(&p.w_down, (size_t)p.experts_local * FFN * HIDDEN * sizeof(bf16)));
    fill_weights<<<4096, 256>>>(p.w_up, p.w_down, p.experts_local, c.rank * p.experts_local, seed);
    HX_CHECK_LAUNCH();
    // The inputs step_setup sees are not the ones checked: a step that moved
    // them during setup instead of in the step fails verification.
    fill_inputs(c, p, seed ^ 0x5A5A5A5Aull);
    HX_CUDA(cudaDeviceSynchronize());

    StepState s;
    step_setup(c, p, s);

    // Verification: the real inputs, the output poisoned (bf16 0xFFFF is NaN),
    // one step, check.
    HX_CUDA(cudaDeviceSynchronize());
    fill_inputs(c, p, seed);
    HX_CUDA(cudaMemset(p.out, 0xFF, x_bytes));
    HX_CUDA(cudaDeviceSynchronize());
    MPI_Barrier(MPI_COMM_WORLD);
    step_run(c, p, s, PART_ALL);
    HX_CUDA(cudaStreamSynchronize(c.stream));
    HX_CUDA(cudaDeviceSynchronize());
    std::string reason;
    bool ok = check_tokens(c, p, seed, seed, 12, 0, reason);

    // The timed steps are verified steps: new tokens and routing each (the
    // weights stay), the output poisoned, 2 tokens checked after each.
    hx_checked_step all;
    all.prepare = [&](int i, cudaStream_t st) {
        fill_inputs(c, p, hx_iter_seed(seed, i), st);
        HX_CUDA(cudaMemsetAsync(p.out, 0xFF, x_bytes, st));
    };
    all.run = [&] { step_run(c, p, s, PART_ALL); };
    all.check = [&](int i, std::string &why) {
        return check_tokens(c, p, hx_iter_seed(seed, i), seed, 2, 37L * (i + 1), why);
    };
    bool timed_ok = true;
    std::string timed_reason;
    double t_all = hx_time_checked_ms(c, warmup, iters, all, timed_ok, timed_reason);
    ok = hx_report_verification(c, vouch, ok && timed_ok, ok ? timed_reason : reason);

    double t_compute =
        hx_time_ms(c, c.stream, warmup, iters, [&] { step_run(c, p, s, PART_COMPUTE); });
    double t_comm = hx_time_ms(c, c.stream, warmup, iters, [&] { step_run(c, p, s, PART_COMM); });

    // bytes this rank sends to other ranks (dispatch + combine) in the last
    // step, and the expert FLOPs it ran
    long remote_rows = 0, local_rows = 0;
    for (int e = 0; e < p.experts; e++)
        if (e / p.experts_local != c.rank)
            remote_rows += s.h_send_count[e];
    for (int e = 0; e < p.experts; e++)
        local_rows += s.h_recv_count[e];
    double sent_bytes = 2.0 * remote_rows * HIDDEN * sizeof(bf16);
    double flops = 2.0 * local_rows * ((double)HIDDEN * 2 * FFN + (double)FFN * HIDDEN);
    double sent_max = 0, flops_max = 0;
    MPI_Allreduce(&sent_bytes, &sent_max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(&flops, &flops_max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    char extra[512];
    snprintf(extra, sizeof extra,
             "\"tokens_per_rank\":%ld,\"experts\":%d,\"experts_per_rank\":%d,\"topk\":%d,"
             "\"hidden\":%d,\"ffn\":%d,\"bytes_sent_per_rank_max\":%.0f,"
             "\"expert_tflops_busiest_rank\":%.2f,\"a2a_gbps\":%.2f,\"comm_share\":%.4f,"
             "\"overlap_bound_ms\":%.6f",
             p.tokens, p.experts, p.experts_local, TOPK, HIDDEN, FFN, sent_max,
             flops_max / (t_compute * 1e9), sent_max / (t_comm * 1e6),
             t_comm / (t_compute + t_comm), std::max(t_compute, t_comm));
    hx_report_result(c, vouch, t_all, iters, t_compute, t_comm, extra);

    step_teardown(c, s);
    step_free(c, p.x);
    step_free(c, p.out);
    HX_CUDA(cudaFree(p.logits));
    HX_CUDA(cudaFree(p.w_up));
    HX_CUDA(cudaFree(p.w_down));
    hx_finalize(c, vouch);
    return ok ? 0 : 1;
}
