// send_predict.cu: a one-GPU prediction of what the send_as_produced
// schedule (CUCO_SENDP_n: a buffer that a loop of GEMMs makes layer by layer
// is sent in CUCO_P2P_PIECES pieces, each as soon as the GEMMs that make it
// are done, by the copy engine) takes at 2 ranks, on the sending side. The
// link is stood in for by a local copy of the same bytes, paced to a given
// rate (the host enqueues each chunk at its time once the piece is made, so
// the pacing takes no SM). A local copy reads and writes this GPU's memory
// where a send only reads it, and inside one GPU it runs on SMs, so the
// stand-in costs the GEMMs more than the real send: the prediction errs slow.
// --stand-in timed holds the stream until each chunk's arrival time instead
// (no traffic, no SM: it errs fast).
// Measured, median over iterations (ms):
//   gemms       the layer loop alone (the compute)
//   copy        the paced copy of the whole buffer alone (the communication)
//   seed        the seed's order, from one start: every GEMM, then the copy
//   scheduled   the schedule, from one start, in 4, 8 and 16 pieces
// The receiving side's work after the transfer is the same in both and is
// left out: gap = seed - max(gemms, copy) on this span.
// Usage: send_predict --out FILE.json [--stand-in copy|timed] [--layers 32] [--seq 8192]
//        [--hidden 4096] [--row 2048] [--rate-gbps 250] [--chunk-mib 4]
//        [--iters 10]
#include "predict_common.cuh"

struct Bench {
  long layers = 32, seq = 8192, hidden = 4096, row = 2048;
  double rate_gbps = 250;
  long chunk_mib = 4;
  size_t chunk = 4u << 20;  // chunk_mib's bytes
  int iters = 10;
  cublasHandle_t blas;
  cudaStream_t sa, sb;
  __nv_bfloat16 *x, *w, *cache;
  char* dst;
  size_t layer_bytes() const { return (size_t)seq * row * sizeof(__nv_bfloat16); }
  size_t bytes() const { return layer_bytes() * (size_t)layers; }
};

// Layer l of the cache: [seq][row] = X_l [seq][hidden] * W [hidden][row]
// (row-major, as kv_transfer's prefill computes it; one W for every layer).
static void layer_gemm(Bench& b, long l) {
  const float one = 1.f, zero = 0.f;
  CB(cublasGemmEx(b.blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)b.row, (int)b.seq, (int)b.hidden, &one,
                  b.w, CUDA_R_16BF, (int)b.row, b.x + (size_t)(l % 2) * b.seq * b.hidden,
                  CUDA_R_16BF, (int)b.hidden, &zero, b.cache + (size_t)l * b.seq * b.row,
                  CUDA_R_16BF, (int)b.row, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

// Bytes [lo, hi) of the cache, chunk by chunk at the link's rate from t0
// (the host waits for each chunk's time); returns when the last is queued.
static double paced(Bench& b, size_t lo, size_t hi, double t0) {
  double chunk_s = b.chunk / (b.rate_gbps * 1e9);
  const char* src = reinterpret_cast<const char*>(b.cache);
  for (size_t off = lo; off < hi; off += b.chunk, t0 += chunk_s) {
    while (host_s() < t0) {
    }
    size_t n = std::min(b.chunk, hi - off);
    stand_in_chunk(b.dst + off, src + off, n, b.rate_gbps, b.sb);
  }
  return t0;
}

// The span from one start to the later of both streams' ends, in ms.
static float span(Bench& b, cudaEvent_t e0, cudaEvent_t ea, cudaEvent_t eb) {
  CK(cudaEventRecord(ea, b.sa));
  CK(cudaEventRecord(eb, b.sb));
  CK(cudaDeviceSynchronize());
  float a, c;
  CK(cudaEventElapsedTime(&a, e0, ea));
  CK(cudaEventElapsedTime(&c, e0, eb));
  return std::max(a, c);
}

static void start(Bench& b, cudaEvent_t e0) {
  CK(cudaDeviceSynchronize());
  CK(cudaEventRecord(e0, b.sa));
  CK(cudaStreamWaitEvent(b.sb, e0, 0));
}

// pieces 0: the seed (every GEMM, then the whole copy); else the schedule:
// piece j goes as soon as the GEMMs of its layers are done.
static float run(Bench& b, int pieces, bool gemms, bool copy, cudaEvent_t e0, cudaEvent_t ea,
                 cudaEvent_t eb) {
  int n = pieces > 0 ? pieces : 1;
  std::vector<cudaEvent_t> made(n);
  for (auto& e : made) CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  start(b, e0);
  for (long l = 0; gemms && l < b.layers; l++) {
    layer_gemm(b, l);
    for (int j = 0; j < n; j++)
      if ((l + 1) == b.layers * (j + 1) / n) CK(cudaEventRecord(made[j], b.sa));
  }
  if (!gemms)
    for (auto& e : made) CK(cudaEventRecord(e, b.sa));
  double link_free = 0;
  for (int j = 0; copy && j < n; j++) {
    while (cudaEventQuery(made[j]) == cudaErrorNotReady) {
    }
    size_t lo = b.layer_bytes() * (size_t)(b.layers * j / n),
           hi = b.layer_bytes() * (size_t)(b.layers * (j + 1) / n);
    link_free = paced(b, lo, hi, std::max(host_s(), link_free));
  }
  float ms = span(b, e0, ea, eb);
  for (auto& e : made) CK(cudaEventDestroy(e));
  return ms;
}

int main(int argc, char** argv) {
  Bench b;
  std::string out = "send_predict.json";
  if (!read_opts(argc, argv, &out, {{"--layers", &b.layers}, {"--seq", &b.seq}, {"--hidden", &b.hidden}, {"--row", &b.row}, {"--rate-gbps", &b.rate_gbps}, {"--chunk-mib", &b.chunk_mib}, {"--iters", &b.iters}}))
    return 2;
  b.chunk = (size_t)b.chunk_mib << 20;
  if (b.layers < 16 || b.chunk_mib < 1) { fprintf(stderr, "need --layers >= 16, --chunk-mib >= 1\n"); return 2; }
  CB(cublasCreate(&b.blas));
  CK(cudaStreamCreateWithFlags(&b.sa, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&b.sb, cudaStreamNonBlocking));
  CB(cublasSetStream(b.blas, b.sa));
  CK(cudaMalloc(&b.x, 2 * (size_t)b.seq * b.hidden * 2));
  CK(cudaMalloc(&b.w, (size_t)b.hidden * b.row * 2));
  CK(cudaMalloc(&b.cache, b.bytes()));
  CK(cudaMalloc(&b.dst, b.bytes()));
  fill<<<1024, 256>>>(b.x, 2 * (size_t)b.seq * b.hidden, 1);
  fill<<<1024, 256>>>(b.w, (size_t)b.hidden * b.row, 2);
  CK(cudaGetLastError());
  cudaEvent_t e0, ea, eb;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&ea));
  CK(cudaEventCreate(&eb));
  const int piece_counts[] = {4, 8, 16};
  std::vector<double> gemms, copy, seed, sched[3];
  for (int it = -2; it < b.iters; it++) {
    float g = run(b, 0, true, false, e0, ea, eb), c = run(b, 0, false, true, e0, ea, eb),
          s = run(b, 0, true, true, e0, ea, eb);
    float p[3];
    for (int k = 0; k < 3; k++) p[k] = run(b, piece_counts[k], true, true, e0, ea, eb);
    if (it < 0) continue;
    gemms.push_back(g);
    copy.push_back(c);
    seed.push_back(s);
    for (int k = 0; k < 3; k++) sched[k].push_back(p[k]);
  }
  double g = median(gemms), c = median(copy), s = median(seed), bound = std::max(g, c);
  double p[3], closed[3];
  for (int k = 0; k < 3; k++) {
    p[k] = median(sched[k]);
    closed[k] = s > bound ? (s - p[k]) / (s - bound) : 0;
  }
  cudaDeviceProp prop;
  FILE* fo = result_file(out, &prop);
  if (!fo) return 1;
  fprintf(fo,
          "{\"gpu\":\"%s\",\"stand_in\":\"%s\",\"layers\":%ld,\"seq\":%ld,\"hidden\":%ld,\"row\":%ld,\"bytes\":%zu,"
          "\"rate_gbps\":%.1f,\"chunk_bytes\":%zu,\"iters\":%d,\"gemms_ms\":%.4f,\"copy_ms\":%.4f,"
          "\"seed_ms\":%.4f,\"bound_ms\":%.4f,\"scheduled_ms\":{\"4\":%.4f,\"8\":%.4f,\"16\":%.4f},"
          "\"gap_closed\":{\"4\":%.3f,\"8\":%.3f,\"16\":%.3f}}\n",
          prop.name, stand_in_name(), b.layers, b.seq, b.hidden, b.row, b.bytes(), b.rate_gbps, b.chunk, b.iters, g,
          c, s, bound, p[0], p[1], p[2], closed[0], closed[1], closed[2]);
  fclose(fo);
  printf("gemms %.4f copy %.4f seed %.4f bound %.4f ms; scheduled (4/8/16 pieces) %.4f %.4f %.4f ms, "
         "gap closed %.0f%% %.0f%% %.0f%%\n",
         g, c, s, bound, p[0], p[1], p[2], 100 * closed[0], 100 * closed[1], 100 * closed[2]);
  return 0;
}
