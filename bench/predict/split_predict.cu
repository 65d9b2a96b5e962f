// split_predict.cu: a one-GPU prediction of what the consumer-split schedule
// (CUCO_SPLIT_n: the GEMM's own rows first while the peer's rows are pulled
// by the copy engine, then the peer's rows) takes at 2 ranks, for a GEMM that
// consumes an all-gathered operand. The peer's NVLink traffic is stood in for
// by a local copy of the same bytes, paced to a given rate (the host enqueues
// each chunk at its time, so the pacing takes no SM), so the GEMM shares the
// GPU with a copy of the right size and speed. A local copy reads and writes
// this GPU's memory where a pull only writes it, and inside one GPU it runs
// on SMs, so the stand-in costs the GEMM more than the real pull: the
// prediction errs slow. --stand-in timed holds the stream until each chunk's
// arrival time instead (no traffic, no SM: it errs fast).
// Measured, median over iterations (ms):
//   gemm_full   the whole GEMM (m rows): the seed's computation
//   gemm_half   one rank's block (m/2 rows)
//   copy        the paced copy alone
//   own_end     the own block's GEMM beside the paced copy (same start)
//   copy_end    the paced copy beside it
//   split       own_end or copy_end, the later, plus gemm_half (the peer's
//               block waits for its rows, then runs alone)
//   scheduled   the schedule run whole from one start: own GEMM, paced copy
//               with an event per chunk, the peer's block as 1, 2 or 4 GEMMs
//               each after the chunk its rows need (CUCO_SPLIT_CHUNKS)
// Usage: split_predict --out FILE.json [--stand-in copy|timed] [--m 8192] [--k 28672] [--n 4096]
//        [--rate-gbps 250] [--chunks 16] [--iters 20]
#include "predict_common.cuh"

struct Bench {
  long m = 8192, k = 28672, n = 4096;
  double rate_gbps = 250;
  int chunks = 16, iters = 20;
  cublasHandle_t blas;
  cudaStream_t sa, sb;
  __nv_bfloat16 *x, *w, *y;
  char *src, *dst;
  size_t bytes() const { return (size_t)(m / 2) * k * sizeof(__nv_bfloat16); }
};

// Y[rows] = X[rows] * W on stream st (row-major, as gemm_allgather computes it).
static void gemm(Bench& b, long rows, long row0, cudaStream_t st) {
  const float one = 1.f, zero = 0.f;
  CB(cublasSetStream(b.blas, st));
  CB(cublasGemmEx(b.blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)b.n, (int)rows, (int)b.k, &one, b.w,
                  CUDA_R_16BF, (int)b.n, b.x + row0 * b.k, CUDA_R_16BF, (int)b.k, &zero,
                  b.y + row0 * b.n, CUDA_R_16BF, (int)b.n, CUBLAS_COMPUTE_32F,
                  CUBLAS_GEMM_DEFAULT));
}

// The peer's rows, chunk by chunk, each enqueued at its time from t0 (the
// host waits; the copy engine starts a chunk as soon as it is enqueued).
static void paced_copy(Bench& b, cudaStream_t st, double t0) {
  size_t per = b.bytes() / b.chunks;
  double chunk_s = per / (b.rate_gbps * 1e9);
  for (int i = 0; i < b.chunks; i++) {
    while (host_s() < t0 + i * chunk_s) {
    }
    stand_in_chunk(b.dst + i * per, b.src + i * per, per, b.rate_gbps, st);
  }
}

// The whole schedule as the transformed program runs it, from one start:
// the own block's GEMM on sa; the peer's rows paced on sb, an event after
// each chunk; the peer's block as peerChunks GEMMs on sa, each after the
// event of the last copy chunk its rows need. Returns the span in ms.
static float scheduled(Bench& b, int peerChunks, cudaEvent_t e0, cudaEvent_t ea) {
  std::vector<cudaEvent_t> ev(b.chunks);
  for (auto& e : ev) CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  CK(cudaDeviceSynchronize());
  CK(cudaEventRecord(e0, b.sa));
  CK(cudaStreamWaitEvent(b.sb, e0, 0));
  gemm(b, b.m / 2, 0, b.sa);
  size_t per = b.bytes() / b.chunks;
  double chunk_s = per / (b.rate_gbps * 1e9), t0 = host_s();
  long half = b.m / 2;
  int next = 0;  // next peer GEMM chunk to issue
  for (int i = 0; i < b.chunks; i++) {
    while (host_s() < t0 + i * chunk_s) {
    }
    stand_in_chunk(b.dst + i * per, b.src + i * per, per, b.rate_gbps, b.sb);
    CK(cudaEventRecord(ev[i], b.sb));
    // issue every GEMM chunk whose rows have all arrived with chunk i
    while (next < peerChunks) {
      long hi = half * (next + 1) / peerChunks;
      size_t need = (size_t)hi * b.k * sizeof(__nv_bfloat16);
      if (need > (size_t)(i + 1) * per && i + 1 < b.chunks) break;
      long lo = half * next / peerChunks;
      CK(cudaStreamWaitEvent(b.sa, ev[i], 0));
      gemm(b, hi - lo, half + lo, b.sa);
      next++;
    }
  }
  CK(cudaEventRecord(ea, b.sa));
  CK(cudaDeviceSynchronize());
  float ms;
  CK(cudaEventElapsedTime(&ms, e0, ea));
  for (auto& e : ev) CK(cudaEventDestroy(e));
  return ms;
}

int main(int argc, char** argv) {
  Bench b;
  std::string out = "split_predict.json";
  if (!read_opts(argc, argv, &out, {{"--m", &b.m}, {"--k", &b.k}, {"--n", &b.n}, {"--rate-gbps", &b.rate_gbps}, {"--chunks", &b.chunks}, {"--iters", &b.iters}}))
    return 2;
  CB(cublasCreate(&b.blas));
  CK(cudaStreamCreateWithFlags(&b.sa, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&b.sb, cudaStreamNonBlocking));
  CK(cudaMalloc(&b.x, (size_t)b.m * b.k * 2));
  CK(cudaMalloc(&b.w, (size_t)b.k * b.n * 2));
  CK(cudaMalloc(&b.y, (size_t)b.m * b.n * 2));
  CK(cudaMalloc(&b.src, b.bytes()));
  CK(cudaMalloc(&b.dst, b.bytes()));
  fill<<<1024, 256>>>(b.x, (size_t)b.m * b.k, 1);
  fill<<<1024, 256>>>(b.w, (size_t)b.k * b.n, 2);
  CK(cudaGetLastError());
  CK(cudaMemset(b.src, 1, b.bytes()));
  cudaEvent_t e0, ea, eb;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&ea));
  CK(cudaEventCreate(&eb));
  std::vector<double> full, half, copy, own_end, copy_end, sched1, sched2, sched4;
  for (int it = -3; it < b.iters; it++) {
    float ms;
    // alone
    CK(cudaEventRecord(e0, b.sa));
    gemm(b, b.m, 0, b.sa);
    CK(cudaEventRecord(ea, b.sa));
    CK(cudaEventSynchronize(ea));
    CK(cudaEventElapsedTime(&ms, e0, ea));
    if (it >= 0) full.push_back(ms);
    CK(cudaEventRecord(e0, b.sa));
    gemm(b, b.m / 2, 0, b.sa);
    CK(cudaEventRecord(ea, b.sa));
    CK(cudaEventSynchronize(ea));
    CK(cudaEventElapsedTime(&ms, e0, ea));
    if (it >= 0) half.push_back(ms);
    CK(cudaEventRecord(e0, b.sb));
    paced_copy(b, b.sb, host_s());
    CK(cudaEventRecord(eb, b.sb));
    CK(cudaEventSynchronize(eb));
    CK(cudaEventElapsedTime(&ms, e0, eb));
    if (it >= 0) copy.push_back(ms);
    // together, from one start
    CK(cudaDeviceSynchronize());
    CK(cudaEventRecord(e0, b.sa));
    CK(cudaStreamWaitEvent(b.sb, e0, 0));
    gemm(b, b.m / 2, 0, b.sa);
    paced_copy(b, b.sb, host_s());
    CK(cudaEventRecord(ea, b.sa));
    CK(cudaEventRecord(eb, b.sb));
    CK(cudaDeviceSynchronize());
    float a_ms, b_ms;
    CK(cudaEventElapsedTime(&a_ms, e0, ea));
    CK(cudaEventElapsedTime(&b_ms, e0, eb));
    if (it >= 0) {
      own_end.push_back(a_ms);
      copy_end.push_back(b_ms);
    }
    float s1 = scheduled(b, 1, e0, ea), s2 = scheduled(b, 2, e0, ea), s4 = scheduled(b, 4, e0, ea);
    if (it >= 0) {
      sched1.push_back(s1);
      sched2.push_back(s2);
      sched4.push_back(s4);
    }
  }
  double f = median(full), h = median(half), c = median(copy), oe = median(own_end),
         ce = median(copy_end);
  double split = std::max(oe, ce) + h;
  double s1 = median(sched1), s2 = median(sched2), s4 = median(sched4);
  cudaDeviceProp prop;
  FILE* fo = result_file(out, &prop);
  if (!fo) return 1;
  fprintf(fo,
          "{\"gpu\":\"%s\",\"stand_in\":\"%s\",\"m\":%ld,\"k\":%ld,\"n\":%ld,\"peer_bytes\":%zu,\"rate_gbps\":%.1f,"
          "\"chunks\":%d,\"iters\":%d,\"gemm_full_ms\":%.4f,\"gemm_half_ms\":%.4f,"
          "\"copy_ms\":%.4f,\"own_end_ms\":%.4f,\"copy_end_ms\":%.4f,\"split_ms\":%.4f,"
          "\"scheduled_ms\":{\"1\":%.4f,\"2\":%.4f,\"4\":%.4f}}\n",
          prop.name, stand_in_name(), b.m, b.k, b.n, b.bytes(), b.rate_gbps, b.chunks, b.iters, f, h, c, oe, ce,
          split, s1, s2, s4);
  fclose(fo);
  printf("gemm_full %.4f gemm_half %.4f copy %.4f own_end %.4f copy_end %.4f split %.4f ms; "
         "scheduled (peer block in 1/2/4 GEMMs) %.4f %.4f %.4f ms\n",
         f, h, c, oe, ce, split, s1, s2, s4);
  return 0;
}
