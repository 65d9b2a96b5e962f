// tp_events.cu: a sequence-parallel stack of linear layers, written the way
// hand-tuned tensor-parallel code often is: communication on its own
// stream (comm_stream), computation on compute_stream, the two joined by
// cudaEvent_t record/wait. Per layer: a normalisation writes this rank's
// rows (shard[l]), the shard is all-gathered on comm_stream into full[l],
// the layer's weights are cast from their master copy (independent of the
// gather), and the GEMM reads the gathered rows. The next layer's input is
// this rank's own rows of the GEMM output. Buffers are std::vector<float *>
// with one entry per layer.
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#define CUDA_CHECK(x)                                                                  \
  do {                                                                                 \
    cudaError_t e_ = (x);                                                              \
    if (e_ != cudaSuccess) {                                                           \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
      MPI_Abort(MPI_COMM_WORLD, 1);                                                    \
    }                                                                                  \
  } while (0)
#define NCCL_CHECK(x)                                                                  \
  do {                                                                                 \
    ncclResult_t r_ = (x);                                                             \
    if (r_ != ncclSuccess) {                                                           \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, ncclGetErrorString(r_)); \
      MPI_Abort(MPI_COMM_WORLD, 1);                                                    \
    }                                                                                  \
  } while (0)

constexpr int kHidden = 32;
constexpr int kLayers = 4;

__host__ __device__ inline float input_value(size_t row, int col) {
  return (float)((int)((row * 5 + (size_t)col * 3) % 17) - 8) / 16.0f;
}
__host__ __device__ inline float weight_value(int layer, int k, int j) {
  return (float)((k * 7 + j * 3 + layer * 5) % 11 - 5) / 64.0f;
}

// rows of x (width kHidden) scaled into shard: a cheap stand-in for a norm
__global__ void norm_rows(const float *x, float *shard, size_t rows) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < rows * kHidden;
       i += (size_t)gridDim.x * blockDim.x)
    shard[i] = 0.5f * x[i] + 0.25f;
}

__global__ void cast_weights(const double *master, float *w, int layer) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < kHidden * kHidden) w[i] = (float)master[i] + 0.0f * (float)layer;
}

// y[r, j] = sum_k a[r, k] * w[k, j]
__global__ void matmul_rows(const float *a, const float *w, float *y, size_t rows) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < rows * kHidden;
       i += (size_t)gridDim.x * blockDim.x) {
    size_t r = i / kHidden;
    int j = (int)(i % kHidden);
    float acc = 0.0f;
    for (int k = 0; k < kHidden; ++k) acc += a[r * kHidden + k] * w[k * kHidden + j];
    y[i] = acc;
  }
}

__global__ void init_input(float *x, size_t rows, size_t row0) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < rows * kHidden;
       i += (size_t)gridDim.x * blockDim.x)
    x[i] = input_value(row0 + i / kHidden, (int)(i % kHidden));
}

static unsigned blocks_for(size_t n) { return (unsigned)std::min<size_t>((n + 255) / 256, 1024); }

// make `waiter` wait for everything issued so far on `signaller`
static void stream_wait(cudaStream_t waiter, cudaStream_t signaller, cudaEvent_t ev) {
  CUDA_CHECK(cudaEventRecord(ev, signaller));
  CUDA_CHECK(cudaStreamWaitEvent(waiter, ev, 0));
}

// the layer's GEMM on the gathered rows
static void linear(cudaStream_t s, const float *a, const float *w, float *y, size_t rows) {
  matmul_rows<<<blocks_for(rows * kHidden), 256, 0, s>>>(a, w, y, rows);
  CUDA_CHECK(cudaGetLastError());
}

static void forward(std::vector<float *> &shard, std::vector<float *> &full, std::vector<float *> &wts,
                    std::vector<double *> &master, std::vector<float *> &outs, float *x, size_t rows, int rank,
                    int nranks, ncclComm_t comm, cudaStream_t compute_stream, cudaStream_t comm_stream,
                    std::vector<cudaEvent_t> &ev_ready, std::vector<cudaEvent_t> &ev_gathered) {
  const size_t total = rows * (size_t)nranks;
  for (int l = 0; l < kLayers; ++l) {
    const float *in = l == 0 ? x : outs[l - 1] + (size_t)rank * rows * kHidden;
    norm_rows<<<blocks_for(rows * kHidden), 256, 0, compute_stream>>>(in, shard[l], rows);
    CUDA_CHECK(cudaEventRecord(ev_ready[l], compute_stream));
    CUDA_CHECK(cudaStreamWaitEvent(comm_stream, ev_ready[l], 0));
    NCCL_CHECK(ncclAllGather(shard[l], full[l], rows * kHidden, ncclFloat, comm, comm_stream));
    cast_weights<<<(kHidden * kHidden + 255) / 256, 256, 0, compute_stream>>>(master[l], wts[l], l);
    stream_wait(compute_stream, comm_stream, ev_gathered[l]);
    linear(compute_stream, full[l], wts[l], outs[l], total);
  }
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, nranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  size_t rows = 4099;
  int iters = 4;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string opt = argv[i];
    if (opt == "--n") rows = (size_t)std::atol(argv[i + 1]);
    else if (opt == "--iters") iters = std::atoi(argv[i + 1]);
  }
  int ndev = 1;
  CUDA_CHECK(cudaGetDeviceCount(&ndev));
  CUDA_CHECK(cudaSetDevice(rank % ndev));
  ncclUniqueId id;
  if (rank == 0) NCCL_CHECK(ncclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t comm;
  NCCL_CHECK(ncclCommInitRank(&comm, nranks, id, rank));
  cudaStream_t compute_stream, comm_stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&compute_stream, cudaStreamNonBlocking));
  CUDA_CHECK(cudaStreamCreateWithFlags(&comm_stream, cudaStreamNonBlocking));

  const size_t total = rows * (size_t)nranks;
  std::vector<float *> shard(kLayers), full(kLayers), wts(kLayers), outs(kLayers);
  std::vector<double *> master(kLayers);
  std::vector<cudaEvent_t> ev_ready(kLayers), ev_gathered(kLayers);
  std::vector<double> hw((size_t)kHidden * kHidden);
  for (int l = 0; l < kLayers; ++l) {
    CUDA_CHECK(cudaMalloc(&shard[l], rows * kHidden * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&full[l], total * kHidden * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&wts[l], kHidden * kHidden * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&outs[l], total * kHidden * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&master[l], kHidden * kHidden * sizeof(double)));
    for (int k = 0; k < kHidden; ++k)
      for (int j = 0; j < kHidden; ++j) hw[(size_t)k * kHidden + j] = weight_value(l, k, j);
    CUDA_CHECK(cudaMemcpy(master[l], hw.data(), hw.size() * sizeof(double), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaEventCreateWithFlags(&ev_ready[l], cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&ev_gathered[l], cudaEventDisableTiming));
  }
  float *x = nullptr;
  CUDA_CHECK(cudaMalloc(&x, rows * kHidden * sizeof(float)));
  init_input<<<blocks_for(rows * kHidden), 256, 0, compute_stream>>>(x, rows, (size_t)rank * rows);
  CUDA_CHECK(cudaStreamSynchronize(compute_stream));

  cudaEvent_t t0, t1;
  CUDA_CHECK(cudaEventCreate(&t0));
  CUDA_CHECK(cudaEventCreate(&t1));
  MPI_Barrier(MPI_COMM_WORLD);
  CUDA_CHECK(cudaEventRecord(t0, compute_stream));
  for (int it = 0; it < iters; ++it)
    forward(shard, full, wts, master, outs, x, rows, rank, nranks, comm, compute_stream, comm_stream, ev_ready,
            ev_gathered);
  CUDA_CHECK(cudaEventRecord(t1, compute_stream));
  CUDA_CHECK(cudaEventSynchronize(t1));
  float ms = 0.0f;
  CUDA_CHECK(cudaEventElapsedTime(&ms, t0, t1));

  // host reference of the whole stack, every rank's rows
  std::vector<float> ref(total * kHidden), cur(total * kHidden), nxt(total * kHidden);
  for (size_t r = 0; r < total; ++r)
    for (int c = 0; c < kHidden; ++c) cur[r * kHidden + c] = input_value(r, c);
  for (int l = 0; l < kLayers; ++l) {
    for (size_t r = 0; r < total; ++r)
      for (int j = 0; j < kHidden; ++j) {
        float acc = 0.0f;
        for (int k = 0; k < kHidden; ++k) acc += (0.5f * cur[r * kHidden + k] + 0.25f) * (float)weight_value(l, k, j);
        nxt[r * kHidden + j] = acc;
      }
    cur.swap(nxt);
  }
  std::vector<float> got(total * kHidden);
  CUDA_CHECK(cudaMemcpy(got.data(), outs[kLayers - 1], got.size() * sizeof(float), cudaMemcpyDeviceToHost));
  int wrong = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (std::fabs(got[i] - cur[i]) > 1e-3f * (1.0f + std::fabs(cur[i]))) ++wrong;
  int all_wrong = 0;
  MPI_Allreduce(&wrong, &all_wrong, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) {
    if (all_wrong == 0) std::printf("Verification: PASS\n");
    else std::printf("Verification: FAIL %d values wrong\n", all_wrong);
    std::printf("CUCO_RESULT {\"time_ms\": %.6f, \"iters\": %d}\n", ms / iters, iters);
  }
  for (int l = 0; l < kLayers; ++l) {
    CUDA_CHECK(cudaFree(shard[l]));
    CUDA_CHECK(cudaFree(full[l]));
    CUDA_CHECK(cudaFree(wts[l]));
    CUDA_CHECK(cudaFree(outs[l]));
    CUDA_CHECK(cudaFree(master[l]));
    CUDA_CHECK(cudaEventDestroy(ev_ready[l]));
    CUDA_CHECK(cudaEventDestroy(ev_gathered[l]));
  }
  CUDA_CHECK(cudaFree(x));
  NCCL_CHECK(ncclCommDestroy(comm));
  MPI_Finalize();
  return 0;
}
