// ddp_flat.cu (bench/probe): ddp_overlap with DDP's flat layout, every
// bucket's gradient a view into one buffer. CUCO_PROBE_STRIDE (elements,
// default n) sets how far apart the views start: below n they overlap, and
// the buckets' all-reduces may only run one after another (the loop guard's
// case); the verdict then does not hold, and the checksum of the
// parameters compares a program with its seed.
// The backward pass of data parallelism as DDP runs it,
// written with host NCCL and no overlap code. The gradients are split into
// buckets; the backward pass makes them from the last bucket to the first,
// and each bucket is summed over the ranks (in place) as soon as it is made.
// Then the next micro-batch's forward pass (which reads no gradient) and the
// update of every bucket. Two styles of the same loop: an array of
// gradients indexed by the bucket, and a range-for over bucket structs.
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

constexpr int kBuckets = 4;
constexpr float kLr = 0.125f;

struct Bucket {
  float *grad;
  float *param;
  size_t n;
};

__host__ __device__ inline float grad_value(size_t i, int rank, int step, int bucket) {
  return (float)((int)((i * 7 + (size_t)rank * 5 + (size_t)step * 3 + (size_t)bucket * 11) % 13) - 6) / 32.0f;
}
__host__ __device__ inline float param_init(size_t i, int bucket) { return (float)((i + (size_t)bucket * 3) % 19) / 19.0f; }

// the backward pass of one bucket: its gradient, after `rounds` of work
__global__ void backward(float *g, const float *act, size_t n, int rounds, int rank, int step, int bucket) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    float a = act[i], acc = 0.0f;
    for (int r = 0; r < rounds; ++r) acc = fmaf(acc, 0.5f, a);
    g[i] = grad_value(i, rank, step, bucket) + 0.0f * acc;
  }
}

__global__ void forward(const float *x, float *act, size_t n, int rounds) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    float v = x[i], a = 0.0f;
    for (int r = 0; r < rounds; ++r) a = fmaf(a, 0.5f, v);
    act[i] = a;
  }
}

__global__ void sgd(float *p, const float *g, size_t n, float lr) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    p[i] -= lr * g[i];
}

__global__ void init_param(float *p, size_t n, int bucket) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    p[i] = param_init(i, bucket);
}

static unsigned blocks_for(size_t n) { return (unsigned)std::min<size_t>((n + 255) / 256, 2048); }

// style 1: arrays of gradients and parameters, indexed by the bucket
static void step_indexed(float **grads, float **params, float *input, float *act, size_t n, int rounds,
                         int rank, int step, ncclComm_t comm, cudaStream_t stream) {
  for (int b = kBuckets - 1; b >= 0; --b) {
    backward<<<blocks_for(n), 256, 0, stream>>>(grads[b], act, n, rounds, rank, step, b);
    NCCL_CHECK(ncclAllReduce(grads[b], grads[b], n, ncclFloat, ncclSum, comm, stream));
  }
  forward<<<blocks_for(n), 256, 0, stream>>>(input, act, n, rounds);
  for (int b = 0; b < kBuckets; ++b)
    sgd<<<blocks_for(n), 256, 0, stream>>>(params[b], grads[b], n, kLr);
}

// style 2: a range-for over bucket structs
static void step_buckets(std::vector<Bucket> &buckets, float *input, float *act, int rounds, int rank, int step,
                         ncclComm_t comm, cudaStream_t stream) {
  int b = 0;
  for (Bucket &bk : buckets) {
    backward<<<blocks_for(bk.n), 256, 0, stream>>>(bk.grad, act, bk.n, rounds, rank, step, b++);
    NCCL_CHECK(ncclAllReduce(bk.grad, bk.grad, bk.n, ncclFloat, ncclSum, comm, stream));
  }
  forward<<<blocks_for(buckets[0].n), 256, 0, stream>>>(input, act, buckets[0].n, rounds);
  for (Bucket &bk : buckets)
    sgd<<<blocks_for(bk.n), 256, 0, stream>>>(bk.param, bk.grad, bk.n, kLr);
}

static int count_wrong(float **params, size_t n, int nranks, int steps) {
  std::vector<float> h(n);
  int wrong = 0;
  const size_t stride = n > 8192 ? n / 4096 : 1;
  for (int b = 0; b < kBuckets; ++b) {
    CUDA_CHECK(cudaMemcpy(h.data(), params[b], n * sizeof(float), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i += stride) {
      double want = param_init(i, b);
      for (int k = 0; k < steps; ++k) {
        double sum = 0.0;
        for (int r = 0; r < nranks; ++r) sum += grad_value(i, r, k, b);
        want -= (double)kLr * sum;
      }
      if (std::fabs(h[i] - want) > 1e-3 * (1.0 + std::fabs(want))) ++wrong;
    }
  }
  return wrong;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, nranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  size_t n = 4099;
  int steps = 4, rounds = 16;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string opt = argv[i];
    if (opt == "--n") n = (size_t)std::atol(argv[i + 1]);
    else if (opt == "--steps") steps = std::atoi(argv[i + 1]);
    else if (opt == "--rounds") rounds = std::atoi(argv[i + 1]);
  }
  int ndev = 1;
  CUDA_CHECK(cudaGetDeviceCount(&ndev));
  CUDA_CHECK(cudaSetDevice(rank % ndev));
  ncclUniqueId id;
  if (rank == 0) NCCL_CHECK(ncclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t comm;
  NCCL_CHECK(ncclCommInitRank(&comm, nranks, id, rank));
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreate(&stream));

  const size_t bytes = n * sizeof(float);
  float *grads[kBuckets], *params[kBuckets];
  // one flat gradient buffer, a bucket a view into it (DDP's layout); with
  // CUCO_PROBE_STRIDE < n the views overlap
  const char *st = getenv("CUCO_PROBE_STRIDE");
  size_t stride = st ? (size_t)atol(st) : n;
  float *flat = nullptr;
  CUDA_CHECK(cudaMalloc(&flat, (stride * (kBuckets - 1) + n) * sizeof(float)));
  for (int b = 0; b < kBuckets; ++b) {
    grads[b] = flat + (size_t)b * stride;
    CUDA_CHECK(cudaMalloc(&params[b], bytes));
  }
  std::vector<Bucket> buckets(kBuckets);
  for (int b = 0; b < kBuckets; ++b) buckets[b] = Bucket{grads[b], params[b], n};
  float *input = nullptr, *act = nullptr;
  CUDA_CHECK(cudaMalloc(&input, bytes));
  CUDA_CHECK(cudaMalloc(&act, bytes));
  CUDA_CHECK(cudaMemset(input, 0, bytes));
  CUDA_CHECK(cudaMemset(act, 0, bytes));

  cudaEvent_t t0, t1;
  CUDA_CHECK(cudaEventCreate(&t0));
  CUDA_CHECK(cudaEventCreate(&t1));
  int wrong = 0;
  float ms = 0.0f;
  for (int pass = 0; pass < 2; ++pass) {
    for (int b = 0; b < kBuckets; ++b) init_param<<<blocks_for(n), 256, 0, stream>>>(params[b], n, b);
    MPI_Barrier(MPI_COMM_WORLD);
    CUDA_CHECK(cudaEventRecord(t0, stream));
    for (int k = 0; k < steps; ++k) {
      if (k % 2 == 0)
        step_indexed(grads, params, input, act, n, rounds, rank, k, comm, stream);
      else
        step_buckets(buckets, input, act, rounds, rank, k, comm, stream);
    }
    CUDA_CHECK(cudaEventRecord(t1, stream));
    CUDA_CHECK(cudaEventSynchronize(t1));
    CUDA_CHECK(cudaEventElapsedTime(&ms, t0, t1));
    wrong += count_wrong(params, n, nranks, steps);
  }
  double checksum = 0.0;
  {
    std::vector<float> h(n);
    for (int b = 0; b < kBuckets; ++b) {
      CUDA_CHECK(cudaMemcpy(h.data(), params[b], n * sizeof(float), cudaMemcpyDeviceToHost));
      for (size_t i = 0; i < n; ++i) checksum += (double)h[i] * (double)((i % 7) + 1 + b);
    }
  }
  int all_wrong = 0;
  MPI_Allreduce(&wrong, &all_wrong, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) {
    if (all_wrong == 0) std::printf("Verification: PASS\n");
    else std::printf("Verification: FAIL %d values wrong\n", all_wrong);
    std::printf("CHECKSUM %.9e\n", checksum);
    std::printf("CUCO_RESULT {\"time_ms\": %.6f, \"iters\": %d}\n", ms / steps, steps);
  }
  for (int b = 0; b < kBuckets; ++b) CUDA_CHECK(cudaFree(params[b]));
  CUDA_CHECK(cudaFree(flat));
  CUDA_CHECK(cudaFree(input));
  CUDA_CHECK(cudaFree(act));
  NCCL_CHECK(ncclCommDestroy(comm));
  MPI_Finalize();
  return 0;
}
