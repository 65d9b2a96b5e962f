// ddp_buckets.cu: bucketed gradient all-reduce the way data-parallel wrappers
// do it.
//
// Gradients of a small model (float and half tensors) are packed into
// buckets, each one flat device buffer per dtype. After the backward kernels
// fill a bucket, the buckets are all-reduced in place inside one NCCL group,
// through a template helper whose NCCL dtype comes from a traits template
// (NcclType<T>::value). A kernel then divides by the world size and applies
// the update to the parameters.
//
// Check: the host replays the steps for all ranks; float parameters must
// match to 1e-4, half ones to the precision of a half.
//
// mpirun -np N ./ddp_buckets [bucket_elems] [steps] [timed_iters]
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#define CUDA_CHECK(expr)                                                                   \
  do {                                                                                     \
    cudaError_t err_ = (expr);                                                             \
    if (err_ != cudaSuccess) {                                                             \
      fprintf(stderr, "CUDA error %s at %s:%d\n", cudaGetErrorString(err_), __FILE__, __LINE__); \
      MPI_Abort(MPI_COMM_WORLD, 1);                                                        \
    }                                                                                      \
  } while (0)

#define NCCL_CHECK(expr)                                                                   \
  do {                                                                                     \
    ncclResult_t res_ = (expr);                                                            \
    if (res_ != ncclSuccess)                                                               \
      throw std::runtime_error(std::string("NCCL error: ") + ncclGetErrorString(res_));    \
  } while (0)

template <typename T>
struct NcclType;
template <>
struct NcclType<float> {
  static constexpr ncclDataType_t value = ncclFloat32;
};
template <>
struct NcclType<__half> {
  static constexpr ncclDataType_t value = ncclFloat16;
};

template <typename T>
void all_reduce_inplace(T *data, size_t count, ncclComm_t comm, cudaStream_t stream) {
  NCCL_CHECK(ncclAllReduce(data, data, count, NcclType<T>::value, ncclSum, comm, stream));
}

struct Bucket {
  bool half_precision;
  size_t numel;
  float *flat_f32;   // gradients of a float bucket
  __half *flat_f16;  // gradients of a half bucket
  float *params;     // the parameters this bucket's gradients update (float master copy)
};

__host__ __device__ inline float grad_of(float p, size_t i, int bucket, int rank) {
  return 0.25f * p + 0.0625f * (float)((int)((i * 5 + (size_t)bucket * 3 + (size_t)rank * 7) % 17) - 8);
}
__host__ __device__ inline float param_init(size_t i, int bucket) { return (float)((i + (size_t)bucket) % 23) / 23.0f; }

__global__ void init_params(float *p, size_t n, int bucket) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) p[i] = param_init(i, bucket);
}

template <typename T>
__global__ void backward(const float *p, T *g, size_t n, int bucket, int rank) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) g[i] = (T)grad_of(p[i], i, bucket, rank);
}

template <typename T>
__global__ void apply_update(float *p, const T *g, size_t n, float lr_over_world) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) p[i] -= lr_over_world * (float)g[i];
}

static unsigned grid_for(size_t n) { return (unsigned)((n + 255) / 256); }

static void step(std::vector<Bucket> &buckets, int rank, int world, float lr, ncclComm_t comm,
                 cudaStream_t stream) {
  for (size_t b = 0; b < buckets.size(); ++b) {
    Bucket &bk = buckets[b];
    if (bk.half_precision)
      backward<__half><<<grid_for(bk.numel), 256, 0, stream>>>(bk.params, bk.flat_f16, bk.numel, (int)b, rank);
    else
      backward<float><<<grid_for(bk.numel), 256, 0, stream>>>(bk.params, bk.flat_f32, bk.numel, (int)b, rank);
  }
  NCCL_CHECK(ncclGroupStart());
  for (auto &bk : buckets) {
    if (bk.half_precision)
      all_reduce_inplace<__half>(bk.flat_f16, bk.numel, comm, stream);
    else
      all_reduce_inplace(bk.flat_f32, bk.numel, comm, stream);
  }
  NCCL_CHECK(ncclGroupEnd());
  for (auto &bk : buckets) {
    if (bk.half_precision)
      apply_update<__half><<<grid_for(bk.numel), 256, 0, stream>>>(bk.params, bk.flat_f16, bk.numel, lr / world);
    else
      apply_update<float><<<grid_for(bk.numel), 256, 0, stream>>>(bk.params, bk.flat_f32, bk.numel, lr / world);
  }
}

int main(int argc, char *argv[]) {
  MPI_Init(&argc, &argv);
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  size_t bucket_elems = argc > 1 ? strtoull(argv[1], nullptr, 10) : (size_t)1 << 20;
  int steps = argc > 2 ? atoi(argv[2]) : 3;
  int timed = argc > 3 ? atoi(argv[3]) : 10;
  const float lr = 0.5f;

  int ndev = 0;
  CUDA_CHECK(cudaGetDeviceCount(&ndev));
  CUDA_CHECK(cudaSetDevice(rank % ndev));
  ncclUniqueId id;
  if (rank == 0) NCCL_CHECK(ncclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t comm;
  NCCL_CHECK(ncclCommInitRank(&comm, world, id, rank));
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  // three buckets: float, half, and a float tail of an odd size
  const bool kinds[3] = {false, true, false};
  const size_t sizes[3] = {bucket_elems, bucket_elems / 2 + 7, bucket_elems / 3 + 1};
  std::vector<Bucket> buckets(3);
  for (int b = 0; b < 3; ++b) {
    Bucket &bk = buckets[b];
    bk.half_precision = kinds[b];
    bk.numel = sizes[b];
    bk.flat_f32 = nullptr;
    bk.flat_f16 = nullptr;
    if (bk.half_precision)
      CUDA_CHECK(cudaMalloc(&bk.flat_f16, bk.numel * sizeof(__half)));
    else
      CUDA_CHECK(cudaMalloc(&bk.flat_f32, bk.numel * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&bk.params, bk.numel * sizeof(float)));
    init_params<<<grid_for(bk.numel), 256, 0, stream>>>(bk.params, bk.numel, b);
  }

  for (int s = 0; s < steps; ++s) step(buckets, rank, world, lr, comm, stream);
  CUDA_CHECK(cudaStreamSynchronize(stream));

  long bad = 0;
  for (int b = 0; b < 3; ++b) {
    const Bucket &bk = buckets[b];
    std::vector<float> got(bk.numel);
    CUDA_CHECK(cudaMemcpy(got.data(), bk.params, bk.numel * sizeof(float), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < bk.numel; ++i) {
      float p = param_init(i, b);
      for (int s = 0; s < steps; ++s) {
        float sum = 0.0f;
        for (int r = 0; r < world; ++r) {
          float g = grad_of(p, i, b, r);
          sum += bk.half_precision ? __half2float(__float2half(g)) : g;
        }
        p -= lr / world * sum;
      }
      float tol = bk.half_precision ? 4e-3f * world * steps : 1e-4f;
      if (std::fabs(got[i] - p) > tol * std::max(1.0f, std::fabs(p))) ++bad;
    }
  }
  long bad_all = 0;
  MPI_Allreduce(&bad, &bad_all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);

  cudaEvent_t t0, t1;
  CUDA_CHECK(cudaEventCreate(&t0));
  CUDA_CHECK(cudaEventCreate(&t1));
  std::vector<float> times;
  for (int it = 0; it < timed + 2; ++it) {
    CUDA_CHECK(cudaEventRecord(t0, stream));
    step(buckets, rank, world, lr, comm, stream);
    CUDA_CHECK(cudaEventRecord(t1, stream));
    CUDA_CHECK(cudaEventSynchronize(t1));
    float ms = 0.0f;
    CUDA_CHECK(cudaEventElapsedTime(&ms, t0, t1));
    if (it >= 2) times.push_back(ms);
  }
  std::sort(times.begin(), times.end());
  if (rank == 0) {
    if (bad_all == 0)
      printf("Verification: PASS\n");
    else
      printf("Verification: FAIL %ld parameters differ from the host replay\n", bad_all);
    printf("CUCO_RESULT {\"time_ms\": %.6f, \"iters\": %d, \"buckets\": 3}\n",
           times.empty() ? 0.0 : (double)times[times.size() / 2], timed);
  }
  CUDA_CHECK(cudaEventDestroy(t0));
  CUDA_CHECK(cudaEventDestroy(t1));
  for (auto &bk : buckets) {
    CUDA_CHECK(cudaFree(bk.flat_f32));
    CUDA_CHECK(cudaFree(bk.flat_f16));
    CUDA_CHECK(cudaFree(bk.params));
  }
  CUDA_CHECK(cudaStreamDestroy(stream));
  NCCL_CHECK(ncclCommDestroy(comm));
  MPI_Finalize();
  return bad_all != 0;
}
