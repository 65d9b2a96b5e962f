// attn_predict.cu: a one-GPU prediction of flash_attn_cp's schedules at 2
// ranks (causal, contiguous shards of L = seq/2 tokens): the attention split
// by source (the rank's own keys while the peer's K/V is pulled, then the
// peer's keys, merged by log-sum-exp) and, on top of it, the busiest rank's
// last queries lent to the idle rank (device/lend_plan.cuh's plan). It runs
// the workload's own kernel (flash_attn_fwd, included from its source) at
// each rank's shapes one after another: each rank has its GPU to itself, so
// a rank's time is the sum of its parts. Only the part that runs beside the
// peer's traffic is measured together with it. By default a local copy of
// the same bytes, paced to the link's rate (the host enqueues each chunk at
// its time), stands in for the pull: inside one GPU the copy runs on SMs and
// queues behind the attention's blocks, where a pull from the peer would
// not, so it errs slow; --stand-in timed holds the stream until the bytes
// have arrived at the link's rate (no traffic, no SM: it errs fast).
// Measured, median over iterations (ms):
//   seed_r0, seed_r1  each rank's attention over the gathered sequence
//   comm              the paced copy of the peer's K and V alone
//   own_r0, own_r1    each rank's queries over its own keys
//   own_end, copy_end rank 1's own part beside the paced copy (same start)
//   remote            rank 1's queries over rank 0's keys
//   merge             one log-sum-exp merge of rank 1's output rows
//   lent              rank 0 attends rank 1's last m queries (its own keys)
//   remote_kept       rank 1's first L - m queries over rank 0's keys
//   back              the lent queries' outputs and log-sum-exps returned
//                     (paced), and the m queries pushed (paced)
// Predicted step (the later rank):
//   seed   comm + max(seed_r0, seed_r1)   (both ranks wait for the gather)
//   split  max(own_r0, max(own_end, copy_end) + remote + merge)
//   lend   max(own_r0 + push + lent + back,
//              max(own_end, copy_end) + remote_kept + 2 merges)
// gap = seed - max(seed_r1, comm) (cuco bound's max(compute, comm) of the
// busiest rank); gap closed = (seed - predicted) / gap.
// Usage: attn_predict --out FILE.json [--stand-in copy|timed] [--seq 8192] [--heads 32]
//        [--kv-heads 32] [--rate-gbps 335] [--chunks 16] [--iters 15]
#include "predict_common.cuh"

#define main flash_attn_cp_main
#include "../../workloads/flash_attn_cp/flash_attn_cp.cu"
#undef main

#include "../../device/lend_plan.cuh"

struct Bench {
  long seq = 8192;
  int heads = 32, kv_heads = 32;
  double rate_gbps = 335;
  int chunks = 16, iters = 15;
  cudaStream_t sa, sb;
  bf16 *q, *k, *v, *out, *out2;
  float *lse, *lse2;
  char *src, *dst;
  long half() const { return seq / 2; }
  size_t q_row() const { return (size_t)heads * HEAD_DIM; }
  size_t kv_row() const { return (size_t)kv_heads * HEAD_DIM; }
  size_t peer_kv_bytes() const { return 2 * (size_t)half() * kv_row() * sizeof(bf16); }
};

// Queries [q0, q0 + nq) over keys [k0, k0 + nk), causal, into out/lse at
// the queries' own rows.
static void attend_part(Bench& b, long q0, long nq, long k0, long nk, bf16* out, float* lse,
                        cudaStream_t st) {
  dim3 grid((unsigned)b.heads, (unsigned)((nq + FA_BM - 1) / FA_BM));
  flash_attn_fwd<<<grid, FA_THREADS, sizeof(FaSmem), st>>>(
      b.q + q0 * b.q_row(), b.k + k0 * b.kv_row(), b.v + k0 * b.kv_row(), b.heads, b.kv_heads, nq,
      nk, q0, k0, true, out + q0 * b.q_row(), lse ? lse + q0 * b.heads : nullptr);
  CK(cudaGetLastError());
}

// out_a = the log-sum-exp merge of (out_a, lse_a) and (out_b, lse_b): 16
// threads per output row of HEAD_DIM elements, 8 each.
static __global__ void lse_merge(bf16* out_a, const float* lse_a, const bf16* out_b,
                                 const float* lse_b, long rows) {
  long r = blockIdx.x * (long)(blockDim.x / 16) + threadIdx.x / 16;
  if (r >= rows) return;
  float la = lse_a[r], lb = lse_b[r], m = fmaxf(la, lb);
  float wa = m == -INFINITY ? 0.f : expf(la - m), wb = m == -INFINITY ? 0.f : expf(lb - m);
  float s = wa + wb > 0.f ? 1.f / (wa + wb) : 0.f;
  size_t x = (size_t)r * HEAD_DIM + (threadIdx.x % 16) * 8;
  uint4 a = *reinterpret_cast<const uint4*>(out_a + x), c = *reinterpret_cast<const uint4*>(out_b + x);
  bf16* pa = reinterpret_cast<bf16*>(&a);
  const bf16* pc = reinterpret_cast<const bf16*>(&c);
  for (int i = 0; i < 8; i++)
    pa[i] = __float2bfloat16((wa * __bfloat162float(pa[i]) + wb * __bfloat162float(pc[i])) * s);
  *reinterpret_cast<uint4*>(out_a + x) = a;
}

static void merge(Bench& b, long q0, long nq, cudaStream_t st) {
  long rows = nq * b.heads;
  lse_merge<<<(unsigned)((rows + 15) / 16), 256, 0, st>>>(b.out + q0 * b.q_row(), b.lse + q0 * b.heads,
                                                        b.out2 + q0 * b.q_row(),
                                                        b.lse2 + q0 * b.heads, rows);
  CK(cudaGetLastError());
}

// `bytes` in the link's chunks from t0 (the host waits for each chunk's time).
static void paced(Bench& b, size_t bytes, cudaStream_t st, double t0) {
  size_t per = (bytes + b.chunks - 1) / b.chunks;
  double chunk_s = per / (b.rate_gbps * 1e9);
  for (size_t off = 0; off < bytes; off += per, t0 += chunk_s) {
    while (host_s() < t0) {
    }
    stand_in_chunk(b.dst + off, b.src + off, std::min(per, bytes - off), b.rate_gbps, st);
  }
}

// Milliseconds of f() on stream sa alone.
template <class F>
static double timed(Bench& b, F f) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  CK(cudaDeviceSynchronize());
  CK(cudaEventRecord(e0, b.sa));
  f();
  CK(cudaEventRecord(e1, b.sa));
  CK(cudaEventSynchronize(e1));
  float ms;
  CK(cudaEventElapsedTime(&ms, e0, e1));
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  return ms;
}

// Rank 1's own part on sa beside the paced pull on sb, from one start:
// both ends in ms.
static void own_beside_pull(Bench& b, double* own_end, double* copy_end) {
  cudaEvent_t e0, ea, eb;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&ea));
  CK(cudaEventCreate(&eb));
  CK(cudaDeviceSynchronize());
  CK(cudaEventRecord(e0, b.sa));
  CK(cudaStreamWaitEvent(b.sb, e0, 0));
  attend_part(b, b.half(), b.half(), b.half(), b.half(), b.out, b.lse, b.sa);
  paced(b, b.peer_kv_bytes(), b.sb, host_s());
  CK(cudaEventRecord(ea, b.sa));
  CK(cudaEventRecord(eb, b.sb));
  CK(cudaDeviceSynchronize());
  float a, c;
  CK(cudaEventElapsedTime(&a, e0, ea));
  CK(cudaEventElapsedTime(&c, e0, eb));
  *own_end = a;
  *copy_end = c;
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(ea));
  CK(cudaEventDestroy(eb));
}

// The lend plan's deal for the two ranks (the glue's Info of each).
static cuco::lend::Deal lend_deal(const Bench& b) {
  cuco::lend::Info in[2];
  for (int r = 0; r < 2; r++) {
    cuco::lend::Info& x = in[r];
    x = cuco::lend::Info{};
    x.q0 = r * b.half();
    x.nq = b.half();
    x.k0 = 0;
    x.per = b.half();
    x.rpq = b.heads;
    x.outRows = b.half() * b.heads;
    x.outRowBytes = HEAD_DIM * sizeof(bf16);
    x.qRowBytes = (long long)(b.q_row() * sizeof(bf16));
    x.causal = 1;
    x.able = 1;
    x.chunks = 1;
    x.nqargs = 1;
    x.gridQ = (b.half() + FA_BM - 1) / FA_BM;
  }
  cuco::lend::Deal d[1];
  return cuco::lend::plan(in, 2, d) == 1 ? d[0] : cuco::lend::Deal{};
}

int main(int argc, char** argv) {
  Bench b;
  std::string out = "attn_predict.json";
  if (!read_opts(argc, argv, &out, {{"--seq", &b.seq}, {"--heads", &b.heads}, {"--kv-heads", &b.kv_heads}, {"--rate-gbps", &b.rate_gbps}, {"--chunks", &b.chunks}, {"--iters", &b.iters}}))
    return 2;
  cuco::lend::Deal deal = lend_deal(b);
  if (deal.lender != 1 || deal.helper != 0 || deal.source != 0 || deal.m <= 0) {
    fprintf(stderr, "attn_predict: the lend plan gives no deal from rank 1 to rank 0 over rank 0's keys\n");
    return 1;
  }
  long L = b.half(), m = deal.m;
  CK(cudaStreamCreateWithFlags(&b.sa, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&b.sb, cudaStreamNonBlocking));
  size_t qn = (size_t)b.seq * b.q_row(), kn = (size_t)b.seq * b.kv_row();
  CK(cudaMalloc(&b.q, qn * sizeof(bf16)));
  CK(cudaMalloc(&b.k, kn * sizeof(bf16)));
  CK(cudaMalloc(&b.v, kn * sizeof(bf16)));
  CK(cudaMalloc(&b.out, qn * sizeof(bf16)));
  CK(cudaMalloc(&b.out2, qn * sizeof(bf16)));
  CK(cudaMalloc(&b.lse, (size_t)b.seq * b.heads * sizeof(float)));
  CK(cudaMalloc(&b.lse2, (size_t)b.seq * b.heads * sizeof(float)));
  CK(cudaMalloc(&b.src, b.peer_kv_bytes()));
  CK(cudaMalloc(&b.dst, b.peer_kv_bytes()));
  fill<<<1024, 256>>>(b.q, qn, 1);
  fill<<<1024, 256>>>(b.k, kn, 2);
  fill<<<1024, 256>>>(b.v, kn, 3);
  CK(cudaGetLastError());
  CK(cudaMemset(b.src, 1, b.peer_kv_bytes()));
  CK(cudaFuncSetAttribute(flash_attn_fwd, cudaFuncAttributeMaxDynamicSharedMemorySize,
                          (int)sizeof(FaSmem)));
  size_t push = (size_t)m * b.q_row() * sizeof(bf16);
  size_t back = (size_t)m * b.q_row() * sizeof(bf16) + (size_t)m * b.heads * sizeof(float);
  std::vector<double> seed0, seed1, comm, own0, own1, own_end, copy_end, remote, mrg, lent,
      kept, moved;
  for (int it = -2; it < b.iters; it++) {
    auto keep = [&](std::vector<double>& v, double x) { if (it >= 0) v.push_back(x); };
    keep(seed0, timed(b, [&] { attend_part(b, 0, L, 0, b.seq, b.out, nullptr, b.sa); }));
    keep(seed1, timed(b, [&] { attend_part(b, L, L, 0, b.seq, b.out, nullptr, b.sa); }));
    keep(comm, timed(b, [&] { paced(b, b.peer_kv_bytes(), b.sa, host_s()); }));
    keep(own0, timed(b, [&] { attend_part(b, 0, L, 0, L, b.out, b.lse, b.sa); }));
    keep(own1, timed(b, [&] { attend_part(b, L, L, L, L, b.out, b.lse, b.sa); }));
    double oe, ce;
    own_beside_pull(b, &oe, &ce);
    keep(own_end, oe);
    keep(copy_end, ce);
    keep(remote, timed(b, [&] { attend_part(b, L, L, 0, L, b.out2, b.lse2, b.sa); }));
    keep(mrg, timed(b, [&] { merge(b, L, L, b.sa); }));
    keep(lent, timed(b, [&] { attend_part(b, 2 * L - m, m, 0, L, b.out2, b.lse2, b.sa); }));
    keep(kept, timed(b, [&] { attend_part(b, L, L - m, 0, L, b.out2, b.lse2, b.sa); }));
    keep(moved, timed(b, [&] { paced(b, push + back, b.sa, host_s()); }));
  }
  double s0 = median(seed0), s1 = median(seed1), c = median(comm), o0 = median(own0),
         o1 = median(own1), oe = median(own_end), ce = median(copy_end), rm = median(remote),
         mg = median(mrg), ln = median(lent), kp = median(kept), mv = median(moved);
  double seed = c + std::max(s0, s1);
  double split = std::max(o0, std::max(oe, ce) + rm + mg);
  double lend = std::max(o0 + ln + mv, std::max(oe, ce) + kp + 2 * mg);
  double gap = seed - std::max(s1, c);
  cudaDeviceProp prop;
  FILE* fo = result_file(out, &prop);
  if (!fo) return 1;
  fprintf(fo,
          "{\"gpu\":\"%s\",\"stand_in\":\"%s\",\"seq\":%ld,\"heads\":%d,\"kv_heads\":%d,\"ranks\":2,\"causal\":true,"
          "\"peer_kv_bytes\":%zu,\"rate_gbps\":%.1f,\"chunks\":%d,\"iters\":%d,\"lent_queries\":%ld,"
          "\"ms\":{\"seed_r0\":%.4f,\"seed_r1\":%.4f,\"comm\":%.4f,\"own_r0\":%.4f,\"own_r1\":%.4f,"
          "\"own_end\":%.4f,\"copy_end\":%.4f,\"remote\":%.4f,\"merge\":%.4f,\"lent\":%.4f,"
          "\"remote_kept\":%.4f,\"push_and_back\":%.4f},"
          "\"predicted_ms\":{\"seed\":%.4f,\"split\":%.4f,\"lend\":%.4f},\"gap_ms\":%.4f,"
          "\"gap_closed\":{\"split\":%.3f,\"lend\":%.3f}}\n",
          prop.name, stand_in_name(), b.seq, b.heads, b.kv_heads, b.peer_kv_bytes(), b.rate_gbps, b.chunks, b.iters,
          m, s0, s1, c, o0, o1, oe, ce, rm, mg, ln, kp, mv, seed, split, lend, gap,
          (seed - split) / gap, (seed - lend) / gap);
  fclose(fo);
  printf("seed %.4f (comm %.4f + rank 1 %.4f) split %.4f lend %.4f (m %ld) ms; gap %.4f ms, "
         "closed: split %.0f%%, lend %.0f%%\n",
         seed, c, s1, split, lend, m, gap, 100 * (seed - split) / gap, 100 * (seed - lend) / gap);
  return 0;
}
