// What an all-gather running beside a GEMM costs the GEMM, with the gather's
// bytes moved by SMs (the device library's LSA kernel, launch.cuh) or by the
// copy engines (ce.cuh). The shape is gemm_allgather's own-rows GEMM at bench
// size on 2 ranks (4096 x 28672 x 4096 bf16, fp32 accumulate, cuBLAS) beside
// the gather of the other rank's rows (28672 x 2 bytes each). Per case, the
// median over the iterations of:
//   gemm        the GEMM alone
//   gather_sm   the SM all-gather alone (library default launch or --ctas)
//   gather_ce   the copy-engine all-gather alone
//   both_sm     the gather enqueued on its own stream, then the GEMM on
//               another, from one start event: the span to the later end,
//               and each stream's own end (gemm_end, gather_end)
//   both_ce     the same with the copy-engine gather
// Every gather's result is verified (poisoned output, every byte checked).
// Runs at 1 rank too (the gather is then a copy into the rank's own window):
// that shows the competition for SMs, not NVLink.
// Usage: overlap_bench --out FILE.json [--m 4096] [--k 28672] [--n 4096]
//        [--gather-bytes B] [--ctas C] [--iters N] [--warmup N] [--ranks N]
// One process, one thread per GPU.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <pthread.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "cuco_device.cuh"

struct Opts {
  std::string out, cmd;
  long m = 4096, k = 28672, n = 4096;
  size_t gatherBytes = 0;  // per rank; 0: m * k * 2 (one rank's rows)
  int ctas = 0, iters = 20, warmup = 5, ranks = -1;
};
static Opts g_o;

// One case's medians (ms); rank 0's are reported.
struct Case {
  std::string name;
  double spanMs = 0, gemmEndMs = 0, gatherEndMs = 0;
};

struct Ctx {
  int rank = 0, n = 1;
  ncclComm_t comm = nullptr;
  cudaStream_t sa = nullptr, sb = nullptr;  // GEMM, gather
  cudaEvent_t start = nullptr, gemmEnd = nullptr, gatherEnd = nullptr;
  cublasHandle_t blas = nullptr;
  cuco::Symm s;
  __nv_bfloat16 *a = nullptr, *b = nullptr, *c = nullptr;
  unsigned char* src = nullptr;
  unsigned long long* bad = nullptr;
  std::vector<Case> cases;
  bool verified = true;
};

struct Arg {
  int rank, n;
  ncclUniqueId id;
  int rc;
  Ctx* c;
};

__global__ void fill_bf16(__nv_bfloat16* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)(i * 2654435761u) ^ seed;
    p[i] = __float2bfloat16((float)(h % 17) / 16.0f - 0.5f);
  }
}
__device__ inline unsigned char byte_of(int rank, size_t i) { return (unsigned char)((i * 131 + rank * 71 + 7) & 0xff); }
__global__ void fill_src(unsigned char* p, size_t n, int rank) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    p[i] = byte_of(rank, i);
}
__global__ void check_gather(const unsigned char* out, size_t per, int nranks, unsigned long long* bad) {
  size_t total = per * nranks;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x)
    if (out[i] != byte_of((int)(i / per), i % per)) atomicAdd(bad, 1ULL);
}

#define DIE(x) do { if ((x) != 0) return -1; } while (0)

static size_t gather_bytes() { return g_o.gatherBytes ? g_o.gatherBytes : (size_t)g_o.m * g_o.k * 2; }

static int gemm(Ctx& c) {
  const float one = 1.0f, zero = 0.0f;
  // row-major C[m][n] = A[m][k] B[k][n] as column-major C^T = B^T A^T
  if (cublasGemmEx(c.blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)g_o.n, (int)g_o.m, (int)g_o.k, &one, c.b, CUDA_R_16BF,
                   (int)g_o.n, c.a, CUDA_R_16BF, (int)g_o.k, &zero, c.c, CUDA_R_16BF, (int)g_o.n, CUBLAS_COMPUTE_32F,
                   CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "rank %d: cublasGemmEx failed\n", c.rank);
    return -1;
  }
  return 0;
}

static int gather(Ctx& c, bool ce) {
  if (ce) return cuco::all_gather_ce(c.s, c.src, 0, gather_bytes(), c.sb);
  cuco::Launch l;
  l.ctas = g_o.ctas;
  return cuco::all_gather<char>(c.s, reinterpret_cast<const char*>(c.src), 0, gather_bytes(), c.sb, l);
}

// One gather into a poisoned window, every byte checked.
static int verify(Ctx& c, bool ce) {
  size_t per = gather_bytes();
  CUCO_CUDA_TRY(cudaMemsetAsync(c.s.base, 0xA5, per * c.n, c.sb));
  CUCO_CUDA_TRY(cudaMemsetAsync(c.bad, 0, sizeof(*c.bad), c.sb));
  CUCO_TRY(cuco::symm_barrier(c.s, c.sb));
  DIE(gather(c, ce));
  check_gather<<<264, 512, 0, c.sb>>>(c.s.local<unsigned char>(0), per, c.n, c.bad);
  CUCO_CUDA_TRY(cudaGetLastError());
  unsigned long long h = 0;
  CUCO_CUDA_TRY(cudaMemcpyAsync(&h, c.bad, sizeof(h), cudaMemcpyDeviceToHost, c.sb));
  CUCO_CUDA_TRY(cudaStreamSynchronize(c.sb));
  if (h) {
    std::printf("FAIL rank %d %s gather: %llu bytes wrong\n", c.rank, ce ? "copy-engine" : "SM", h);
    c.verified = false;
  }
  return 0;
}

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// runGemm / gather: 0 none, 1 SM, 2 copy engine.
static int time_case(Ctx& c, const char* name, bool runGemm, int gatherKind) {
  std::vector<double> span, ge, ga;
  for (int it = 0; it < g_o.warmup + g_o.iters; it++) {
    CUCO_TRY(cuco::symm_barrier(c.s, c.sa));  // the ranks start together
    CUCO_CUDA_TRY(cudaEventRecord(c.start, c.sa));
    CUCO_CUDA_TRY(cudaStreamWaitEvent(c.sb, c.start, 0));
    if (gatherKind) DIE(gather(c, gatherKind == 2));  // the gather first, as a local-first step enqueues it
    CUCO_CUDA_TRY(cudaEventRecord(c.gatherEnd, c.sb));
    if (runGemm) DIE(gemm(c));
    CUCO_CUDA_TRY(cudaEventRecord(c.gemmEnd, c.sa));
    CUCO_CUDA_TRY(cudaEventSynchronize(c.gemmEnd));
    CUCO_CUDA_TRY(cudaEventSynchronize(c.gatherEnd));
    float a = 0, b = 0;
    CUCO_CUDA_TRY(cudaEventElapsedTime(&a, c.start, c.gemmEnd));
    CUCO_CUDA_TRY(cudaEventElapsedTime(&b, c.start, c.gatherEnd));
    if (it < g_o.warmup) continue;
    ge.push_back(a);
    ga.push_back(b);
    span.push_back(std::max(a, b));
  }
  Case r;
  r.name = name;
  r.spanMs = median(span);
  r.gemmEndMs = runGemm ? median(ge) : 0;
  r.gatherEndMs = gatherKind ? median(ga) : 0;
  c.cases.push_back(r);
  if (c.rank == 0) {
    std::fprintf(stderr, "progress %-10s span %.3f ms (gemm end %.3f, gather end %.3f)\n", name, r.spanMs,
                 r.gemmEndMs, r.gatherEndMs);
  }
  return 0;
}

static int run_rank(Arg* ag, Ctx& c) {
  c.rank = ag->rank;
  c.n = ag->n;
  CUCO_CUDA_TRY(cudaSetDevice(c.rank));
  CUCO_NCCL_TRY(ncclCommInitRank(&c.comm, c.n, ag->id, c.rank));
  CUCO_CUDA_TRY(cudaStreamCreateWithFlags(&c.sa, cudaStreamNonBlocking));
  CUCO_CUDA_TRY(cudaStreamCreateWithFlags(&c.sb, cudaStreamNonBlocking));
  CUCO_CUDA_TRY(cudaEventCreate(&c.start));
  CUCO_CUDA_TRY(cudaEventCreate(&c.gemmEnd));
  CUCO_CUDA_TRY(cudaEventCreate(&c.gatherEnd));
  if (cublasCreate(&c.blas) != CUBLAS_STATUS_SUCCESS || cublasSetStream(c.blas, c.sa) != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "rank %d: cuBLAS setup failed\n", c.rank);
    return -1;
  }
  size_t per = gather_bytes();
  CUCO_TRY(cuco::symm_create(c.comm, per * c.n, 132, 1, c.sa, &c.s));
  CUCO_CUDA_TRY(cudaMalloc(&c.a, (size_t)g_o.m * g_o.k * 2));
  CUCO_CUDA_TRY(cudaMalloc(&c.b, (size_t)g_o.k * g_o.n * 2));
  CUCO_CUDA_TRY(cudaMalloc(&c.c, (size_t)g_o.m * g_o.n * 2));
  CUCO_CUDA_TRY(cudaMalloc(&c.src, per));
  CUCO_CUDA_TRY(cudaMalloc(&c.bad, sizeof(*c.bad)));
  fill_bf16<<<264, 512, 0, c.sa>>>(c.a, (size_t)g_o.m * g_o.k, 1u + c.rank);
  fill_bf16<<<264, 512, 0, c.sa>>>(c.b, (size_t)g_o.k * g_o.n, 77u);
  fill_src<<<264, 512, 0, c.sa>>>(c.src, per, c.rank);
  CUCO_CUDA_TRY(cudaGetLastError());
  CUCO_CUDA_TRY(cudaStreamSynchronize(c.sa));
  CUCO_TRY(cuco::load_kernels<float>());
  DIE(verify(c, false));
  DIE(verify(c, true));
  DIE(time_case(c, "gemm", true, 0));
  DIE(time_case(c, "gather_sm", false, 1));
  DIE(time_case(c, "gather_ce", false, 2));
  DIE(time_case(c, "both_sm", true, 1));
  DIE(time_case(c, "both_ce", true, 2));
  DIE(verify(c, false));  // after the timed runs too
  DIE(verify(c, true));
  CUCO_TRY(cuco::symm_destroy(&c.s, c.sa));
  cublasDestroy(c.blas);
  CUCO_CUDA_TRY(cudaFree(c.a));
  CUCO_CUDA_TRY(cudaFree(c.b));
  CUCO_CUDA_TRY(cudaFree(c.c));
  CUCO_CUDA_TRY(cudaFree(c.src));
  CUCO_CUDA_TRY(cudaFree(c.bad));
  CUCO_NCCL_TRY(ncclCommDestroy(c.comm));
  return c.verified ? 0 : 1;
}

static void* worker(void* p) {
  Arg* a = static_cast<Arg*>(p);
  a->rc = run_rank(a, *a->c);
  return nullptr;
}

static const Case* find_case(const std::vector<Case>& v, const char* name) {
  for (const Case& c : v)
    if (c.name == name) return &c;
  return nullptr;
}

static int usage(const char* argv0) {
  std::fprintf(stderr, "usage: %s --out FILE.json [--m 4096] [--k 28672] [--n 4096] [--gather-bytes B] "
               "[--ctas C] [--iters N] [--warmup N] [--ranks N]\n", argv0);
  return 2;
}

int main(int argc, char** argv) {
  for (int i = 0; i < argc; i++) g_o.cmd += (i ? " " : "") + std::string(argv[i]);
  for (int i = 1; i < argc; i += 2) {
    std::string k = argv[i];
    if (i + 1 >= argc) return usage(argv[0]);
    const char* v = argv[i + 1];
    if (k == "--out") g_o.out = v;
    else if (k == "--m") g_o.m = std::atol(v);
    else if (k == "--k") g_o.k = std::atol(v);
    else if (k == "--n") g_o.n = std::atol(v);
    else if (k == "--gather-bytes") g_o.gatherBytes = std::strtoull(v, nullptr, 0);
    else if (k == "--ctas") g_o.ctas = std::atoi(v);
    else if (k == "--iters") g_o.iters = std::atoi(v);
    else if (k == "--warmup") g_o.warmup = std::atoi(v);
    else if (k == "--ranks") g_o.ranks = std::atoi(v);
    else return usage(argv[0]);
  }
  if (g_o.out.empty() || g_o.m < 1 || g_o.k < 1 || g_o.n < 1 || g_o.iters < 1 || g_o.warmup < 0) return usage(argv[0]);
  int ngpu = 0;
  if (cudaGetDeviceCount(&ngpu) != cudaSuccess || ngpu < 1) {
    std::fprintf(stderr, "no GPU\n");
    return 77;
  }
  int n = g_o.ranks > 0 ? std::min(g_o.ranks, ngpu) : ngpu;
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  int ver = 0;
  ncclGetVersion(&ver);
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return 1;
  std::vector<Ctx> ctx(n);
  std::vector<Arg> a(n);
  std::vector<pthread_t> t(n);
  for (int i = 0; i < n; i++) {
    a[i] = Arg{i, n, id, -1, &ctx[i]};
    pthread_create(&t[i], nullptr, worker, &a[i]);
  }
  int rc = 0;
  for (int i = 0; i < n; i++) {
    pthread_join(t[i], nullptr);
    if (a[i].rc != 0) rc = 1;
  }
  const std::vector<Case>& cs = ctx[0].cases;
  const Case *g = find_case(cs, "gemm"), *sm = find_case(cs, "gather_sm"), *ce = find_case(cs, "gather_ce"),
             *bsm = find_case(cs, "both_sm"), *bce = find_case(cs, "both_ce");
  FILE* f = std::fopen(g_o.out.c_str(), "w");
  if (!f) {
    std::perror(g_o.out.c_str());
    return 1;
  }
  char date[64];
  time_t now = time(nullptr);
  strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
  std::string cmd;
  for (char ch : g_o.cmd) {
    if (ch == '"' || ch == '\\') cmd += '\\';
    cmd += ch;
  }
  std::fprintf(f, "{\n \"command\": \"%s\",\n \"gpu\": \"%s\",\n \"gpus\": %d,\n \"nccl_version\": %d,\n \"date\": \"%s\",\n"
               " \"m\": %ld, \"k\": %ld, \"n\": %ld, \"gather_bytes_per_rank\": %zu, \"ctas\": %d, \"iters\": %d,\n"
               " \"verified\": %s,\n \"cases_ms\": {", cmd.c_str(), prop.name, n, ver, date, g_o.m, g_o.k, g_o.n,
               gather_bytes(), g_o.ctas, g_o.iters, rc ? "false" : "true");
  for (size_t i = 0; i < cs.size(); i++)
    std::fprintf(f, "%s\n  \"%s\": {\"span\": %.4f, \"gemm_end\": %.4f, \"gather_end\": %.4f}", i ? "," : "",
                 cs[i].name.c_str(), cs[i].spanMs, cs[i].gemmEndMs, cs[i].gatherEndMs);
  std::fprintf(f, "\n }");
  if (g && sm && ce && bsm && bce) {
    // hidden share: how much of the gather the overlap took off the serial sum
    double hsm = (g->spanMs + sm->spanMs - bsm->spanMs) / sm->spanMs;
    double hce = (g->spanMs + ce->spanMs - bce->spanMs) / ce->spanMs;
    std::fprintf(f, ",\n \"gather_hidden_share\": {\"sm\": %.3f, \"ce\": %.3f},\n"
                 " \"gemm_slowdown_beside_gather\": {\"sm\": %.3f, \"ce\": %.3f}", hsm, hce,
                 bsm->gemmEndMs / g->spanMs, bce->gemmEndMs / g->spanMs);
    std::printf("%-10s %9s %9s %9s\n", "case", "span_ms", "gemm_end", "gath_end");
    for (const Case& x : cs)
      std::printf("%-10s %9.3f %9.3f %9.3f\n", x.name.c_str(), x.spanMs, x.gemmEndMs, x.gatherEndMs);
    std::printf("gather hidden behind the GEMM: SM %.0f%%, copy engine %.0f%%\n", 100 * hsm, 100 * hce);
  }
  std::fprintf(f, "\n}\n");
  std::fclose(f);
  std::printf("Verification: %s\n", rc ? "FAIL" : "PASS");
  return rc;
}
