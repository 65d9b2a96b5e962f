// hvd_fusion.cu: Horovod-style tensor fusion. Each step, the gradients of
// several tensors of different sizes are packed into one fusion buffer at
// increasing offsets, the fusion buffer is summed over the ranks with one
// ncclAllReduce, and the sums are unpacked back into the gradients, which
// the optimizer then applies. Between the sum and the unpack the next
// micro-batch's forward kernel runs (it reads no gradient). Two styles of
// the step: per-tensor cudaMemcpyAsync (device to device) at offsets, and
// Horovod's batched D2D memcpy kernel, which reads tables of pointers that
// were uploaded once.
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

#define NUM_TENSORS 5
static const float kLr = 0.25f;

__host__ __device__ inline float grad_value(size_t i, int rank, int step, int t) {
  return (float)((int)((i * 3 + (size_t)rank * 7 + (size_t)step * 5 + (size_t)t * 2) % 11) - 5) / 16.0f;
}
__host__ __device__ inline float param_init(size_t i, int t) { return (float)((i + (size_t)t) % 23) / 23.0f; }

__global__ void backward(float *g, size_t n, int rank, int step, int t) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    g[i] = grad_value(i, rank, step, t);
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
__global__ void init_param(float *p, size_t n, int t) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    p[i] = param_init(i, t);
}
// Horovod's BatchedD2DMemcpy: block b copies entry b of the tables
__global__ void batched_d2d_memcpy(float *const *dst, const float *const *src, const size_t *count, int entries) {
  int e = blockIdx.x;
  if (e >= entries) return;
  for (size_t i = threadIdx.x; i < count[e]; i += blockDim.x) dst[e][i] = src[e][i];
}

static unsigned blocks_for(size_t n) { return (unsigned)std::min<size_t>((n + 255) / 256, 1024); }

struct FusionPlan {
  size_t count[NUM_TENSORS];
  size_t offset[NUM_TENSORS];
  size_t total;
};

// style 1: per-tensor copies into and out of the fusion buffer
static void step_memcpy(float **grads, float **params, const FusionPlan &plan, float *fusion, const float *input,
                        float *act, size_t n, int rounds, int rank, int nranks, int step, ncclComm_t comm,
                        cudaStream_t stream) {
  for (int t = 0; t < NUM_TENSORS; ++t)
    backward<<<blocks_for(plan.count[t]), 256, 0, stream>>>(grads[t], plan.count[t], rank, step, t);
  for (int t = 0; t < NUM_TENSORS; ++t)
    CUDA_CHECK(cudaMemcpyAsync(fusion + plan.offset[t], grads[t], plan.count[t] * sizeof(float),
                               cudaMemcpyDeviceToDevice, stream));
  NCCL_CHECK(ncclAllReduce(fusion, fusion, plan.total, ncclFloat, ncclSum, comm, stream));
  forward<<<blocks_for(n), 256, 0, stream>>>(input, act, n, rounds);
  for (int t = 0; t < NUM_TENSORS; ++t)
    CUDA_CHECK(cudaMemcpyAsync(grads[t], fusion + plan.offset[t], plan.count[t] * sizeof(float),
                               cudaMemcpyDeviceToDevice, stream));
  for (int t = 0; t < NUM_TENSORS; ++t)
    sgd<<<blocks_for(plan.count[t]), 256, 0, stream>>>(params[t], grads[t], plan.count[t], kLr / nranks);
}

// device tables of the batched copy: into the fusion buffer and back out
struct BatchTables {
  float **in_dst;
  float **in_src;
  float **out_dst;
  float **out_src;
  size_t *count;
};

// style 2: the batched copy kernel over pointer tables in device memory
static void step_batched(float **grads, float **params, const FusionPlan &plan, float *fusion,
                         const BatchTables &tab, const float *input, float *act, size_t n, int rounds, int rank,
                         int nranks, int step, ncclComm_t comm, cudaStream_t stream) {
  for (int t = 0; t < NUM_TENSORS; ++t)
    backward<<<blocks_for(plan.count[t]), 256, 0, stream>>>(grads[t], plan.count[t], rank, step, t);
  batched_d2d_memcpy<<<NUM_TENSORS, 256, 0, stream>>>(tab.in_dst, tab.in_src, tab.count, NUM_TENSORS);
  NCCL_CHECK(ncclAllReduce(fusion, fusion, plan.total, ncclFloat, ncclSum, comm, stream));
  forward<<<blocks_for(n), 256, 0, stream>>>(input, act, n, rounds);
  batched_d2d_memcpy<<<NUM_TENSORS, 256, 0, stream>>>(tab.out_dst, tab.out_src, tab.count, NUM_TENSORS);
  for (int t = 0; t < NUM_TENSORS; ++t)
    sgd<<<blocks_for(plan.count[t]), 256, 0, stream>>>(params[t], grads[t], plan.count[t], kLr / nranks);
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

  FusionPlan plan;
  const size_t sizes[NUM_TENSORS] = {n, n / 2 + 3, 2 * n + 1, 7, n / 3 + 5};
  plan.total = 0;
  for (int t = 0; t < NUM_TENSORS; ++t) {
    plan.count[t] = sizes[t];
    plan.offset[t] = plan.total;
    plan.total += sizes[t];
  }
  float *grads[NUM_TENSORS];
  float *params[NUM_TENSORS];
  for (int t = 0; t < NUM_TENSORS; ++t) {
    CUDA_CHECK(cudaMalloc(&grads[t], plan.count[t] * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&params[t], plan.count[t] * sizeof(float)));
  }
  float *fusion = nullptr;
  CUDA_CHECK(cudaMalloc(&fusion, plan.total * sizeof(float)));
  float *input = nullptr;
  float *act = nullptr;
  CUDA_CHECK(cudaMalloc(&input, n * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&act, n * sizeof(float)));
  CUDA_CHECK(cudaMemset(input, 0, n * sizeof(float)));

  // the batched copy's tables: into the fusion buffer and back out
  float *h_in_dst[NUM_TENSORS];
  float *h_in_src[NUM_TENSORS];
  float *h_out_dst[NUM_TENSORS];
  float *h_out_src[NUM_TENSORS];
  for (int t = 0; t < NUM_TENSORS; ++t) {
    h_in_dst[t] = fusion + plan.offset[t];
    h_in_src[t] = grads[t];
    h_out_dst[t] = grads[t];
    h_out_src[t] = fusion + plan.offset[t];
  }
  float **d_tables = nullptr;
  size_t *d_count = nullptr;
  CUDA_CHECK(cudaMalloc(&d_tables, 4 * NUM_TENSORS * sizeof(float *)));
  CUDA_CHECK(cudaMalloc(&d_count, NUM_TENSORS * sizeof(size_t)));
  float **d_in_dst = d_tables;
  float **d_in_src = d_tables + NUM_TENSORS;
  float **d_out_dst = d_tables + 2 * NUM_TENSORS;
  float **d_out_src = d_tables + 3 * NUM_TENSORS;
  CUDA_CHECK(cudaMemcpy(d_in_dst, h_in_dst, sizeof(h_in_dst), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d_in_src, h_in_src, sizeof(h_in_src), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d_out_dst, h_out_dst, sizeof(h_out_dst), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d_out_src, h_out_src, sizeof(h_out_src), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d_count, plan.count, sizeof(plan.count), cudaMemcpyHostToDevice));
  BatchTables tab;
  tab.in_dst = d_in_dst;
  tab.in_src = d_in_src;
  tab.out_dst = d_out_dst;
  tab.out_src = d_out_src;
  tab.count = d_count;

  for (int t = 0; t < NUM_TENSORS; ++t) init_param<<<blocks_for(plan.count[t]), 256, 0, stream>>>(params[t], plan.count[t], t);
  cudaEvent_t t0, t1;
  CUDA_CHECK(cudaEventCreate(&t0));
  CUDA_CHECK(cudaEventCreate(&t1));
  MPI_Barrier(MPI_COMM_WORLD);
  CUDA_CHECK(cudaEventRecord(t0, stream));
  for (int k = 0; k < steps; ++k) {
    if (k % 2 == 0)
      step_memcpy(grads, params, plan, fusion, input, act, n, rounds, rank, nranks, k, comm, stream);
    else
      step_batched(grads, params, plan, fusion, tab, input, act, n, rounds, rank, nranks, k, comm, stream);
  }
  CUDA_CHECK(cudaEventRecord(t1, stream));
  CUDA_CHECK(cudaEventSynchronize(t1));
  float ms = 0.0f;
  CUDA_CHECK(cudaEventElapsedTime(&ms, t0, t1));

  int wrong = 0;
  for (int t = 0; t < NUM_TENSORS; ++t) {
    std::vector<float> h(plan.count[t]);
    CUDA_CHECK(cudaMemcpy(h.data(), params[t], h.size() * sizeof(float), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < h.size(); ++i) {
      double want = param_init(i, t);
      for (int k = 0; k < steps; ++k) {
        double sum = 0.0;
        for (int r = 0; r < nranks; ++r) sum += grad_value(i, r, k, t);
        want -= (double)(kLr / nranks) * sum;
      }
      if (std::fabs(h[i] - want) > 1e-4 * (1.0 + std::fabs(want))) ++wrong;
    }
  }
  int all_wrong = 0;
  MPI_Allreduce(&wrong, &all_wrong, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) {
    if (all_wrong == 0) std::printf("Verification: PASS\n");
    else std::printf("Verification: FAIL %d values wrong\n", all_wrong);
    std::printf("CUCO_RESULT {\"time_ms\": %.6f, \"iters\": %d}\n", ms / steps, steps);
  }
  for (int t = 0; t < NUM_TENSORS; ++t) {
    CUDA_CHECK(cudaFree(grads[t]));
    CUDA_CHECK(cudaFree(params[t]));
  }
  CUDA_CHECK(cudaFree(fusion));
  CUDA_CHECK(cudaFree(input));
  CUDA_CHECK(cudaFree(act));
  CUDA_CHECK(cudaFree(d_tables));
  CUDA_CHECK(cudaFree(d_count));
  NCCL_CHECK(ncclCommDestroy(comm));
  MPI_Finalize();
  return 0;
}
