// zero2.cu: the gradient path of ZeRO stage 2 as DeepSpeed runs it, written
// with host NCCL and no overlap code. One flat gradient buffer is cut into
// buckets; the backward pass accumulates each bucket's gradient, from the last
// bucket to the first, and reduce-scatters it into this rank's shard of the
// bucket as soon as it is made. Then the full gradients are released (zeroed
// for the next accumulation), the next micro-batch's input is staged, and the
// optimizer updates this rank's shard of the fp32 master parameters.
//
// usage: mpirun -np 2 ./zero2 [--n 4099] [--buckets 4] [--steps 3] [--rounds 8]
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
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

__host__ __device__ inline float grad_value(size_t i, int rank, int step) {
  return (float)((int)((i * 7 + (size_t)rank * 5 + (size_t)step * 3) % 13) - 6) / 32.0f;
}
__host__ __device__ inline float master_init(size_t i) { return (float)(i % 19) / 19.0f; }

// backward of one bucket: accumulates its gradient (global index base + i)
__global__ void bucket_backward(float *g, const float *act, size_t base, size_t n, int rounds, int rank, int step) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    float a = act[i % 1024], acc = 0.0f;
    for (int r = 0; r < rounds; ++r) acc = fmaf(acc, 0.5f, a);
    g[i] += grad_value(base + i, rank, step) + 0.0f * acc;
  }
}

__global__ void stage_input(const float *x, float *act, size_t n, int rounds) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    float v = x[i], a = 0.0f;
    for (int r = 0; r < rounds; ++r) a = fmaf(a, 0.5f, v);
    act[i] = v + 0.0f * a;
  }
}

__global__ void sgd_shard(float *master, const float *g, size_t n, float lr) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    master[i] -= lr * g[i];
}

__global__ void init_master(float *m, const size_t *gidx, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    m[i] = master_init(gidx[i]);
}

static inline unsigned blocks_for(size_t n) { return (unsigned)std::min<size_t>((n + 255) / 256, 1024); }

struct Bucket {
  float *grad;   // the bucket's slice of the flat gradient
  float *shard;  // this rank's part of the bucket's reduced gradient
  size_t numel;  // elements in the bucket (a multiple of the rank count)
};

class GradBucketer {
 public:
  GradBucketer(ncclComm_t comm, cudaStream_t stream, int rank, int nranks, size_t n, int nbuckets)
      : comm_(comm), stream_(stream), rank_(rank), nranks_(nranks), nbuckets_(nbuckets) {
    const size_t per = ((n + nbuckets - 1) / nbuckets + nranks - 1) / nranks * nranks;
    total_ = per * nbuckets;
    CUDA_CHECK(cudaMalloc(&flat_grad_, total_ * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&flat_shard_, total_ / nranks * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&master_, total_ / nranks * sizeof(float)));
    CUDA_CHECK(cudaMemset(flat_grad_, 0, total_ * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&act_, 1024 * sizeof(float)));
    CUDA_CHECK(cudaMemset(act_, 0, 1024 * sizeof(float)));
    size_t off = 0;
    for (int b = 0; b < nbuckets; ++b) {
      buckets_.push_back(Bucket{flat_grad_ + off, flat_shard_ + off / nranks, per});
      off += per;
    }
  }
  ~GradBucketer() {
    CUDA_CHECK(cudaFree(flat_grad_));
    CUDA_CHECK(cudaFree(flat_shard_));
    CUDA_CHECK(cudaFree(master_));
    CUDA_CHECK(cudaFree(act_));
  }

  inline float *grad_of(size_t i) const { return buckets_[i].grad; }
  size_t num_buckets() const { return buckets_.size(); }
  size_t shard_numel() const { return total_ / nranks_; }
  size_t total() const { return total_; }
  float *master() const { return master_; }

  // global index of each element of this rank's shard, for the checks
  std::vector<size_t> shard_index() const {
    std::vector<size_t> idx;
    size_t off = 0;
    for (size_t b = 0; b < buckets_.size(); ++b) {
      const size_t part = buckets_[b].numel / nranks_;
      for (size_t j = 0; j < part; ++j) idx.push_back(off + (size_t)rank_ * part + j);
      off += buckets_[b].numel;
    }
    return idx;
  }

  // backward, last bucket first; each bucket is reduce-scattered as soon as it is made
  void backward(int rounds, int step) {
    for (int i = (int)this->buckets_.size() - 1; i >= 0; --i) {
      bucket_backward<<<blocks_for(this->buckets_[i].numel), 256, 0, this->stream_>>>(
          this->grad_of(i), this->act_, (size_t)i * this->buckets_[i].numel, this->buckets_[i].numel, rounds,
          this->rank_, step);
      NCCL_CHECK(ncclReduceScatter(this->buckets_[i].grad, this->buckets_[i].shard,
                                   this->buckets_[i].numel / this->nranks_, ncclFloat, ncclSum, this->comm_,
                                   this->stream_));
    }
  }

  // the full gradients are not needed any more: clear them for the next accumulation
  void release_grads() { CUDA_CHECK(cudaMemsetAsync(flat_grad_, 0, total_ * sizeof(float), stream_)); }

  void optimizer_step(float lr) {
    sgd_shard<<<blocks_for(shard_numel()), 256, 0, stream_>>>(master_, flat_shard_, shard_numel(), lr);
  }

  // one training step: backward + reduce-scatter, release, stage the next input, update
  void train_step(const float *x, size_t act_n, int rounds, int step, float lr) {
    backward(rounds, step);
    release_grads();
    stage_input<<<blocks_for(act_n), 256, 0, stream_>>>(x, act_, act_n, rounds);
    optimizer_step(lr);
  }

  // the same step written inline, as a second style
  void train_step_inline(const float *x, size_t act_n, int rounds, int step, float lr) {
    for (int i = nbuckets_ - 1; i >= 0; --i) {
      bucket_backward<<<blocks_for(buckets_[i].numel), 256, 0, stream_>>>(
          buckets_[i].grad, act_, (size_t)i * buckets_[i].numel, buckets_[i].numel, rounds, rank_, step);
      NCCL_CHECK(ncclReduceScatter(buckets_[i].grad, buckets_[i].shard, buckets_[i].numel / nranks_, ncclFloat,
                                   ncclSum, comm_, stream_));
    }
    CUDA_CHECK(cudaMemsetAsync(flat_grad_, 0, total_ * sizeof(float), stream_));
    stage_input<<<blocks_for(act_n), 256, 0, stream_>>>(x, act_, act_n, rounds);
    sgd_shard<<<blocks_for(shard_numel()), 256, 0, stream_>>>(master_, flat_shard_, shard_numel(), lr);
  }

 private:
  ncclComm_t comm_;
  cudaStream_t stream_;
  int rank_, nranks_, nbuckets_;
  size_t total_ = 0;
  float *flat_grad_ = nullptr, *flat_shard_ = nullptr, *master_ = nullptr, *act_ = nullptr;
  std::vector<Bucket> buckets_;
};

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, nranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  size_t n = 4099;
  int nbuckets = 4, steps = 3, rounds = 8;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string opt = argv[i];
    if (opt == "--n") n = (size_t)std::atol(argv[i + 1]);
    else if (opt == "--buckets") nbuckets = std::atoi(argv[i + 1]);
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

  const float lr = 0.125f;
  const size_t act_n = 1024;
  float *x = nullptr, *act = nullptr;
  size_t *gidx = nullptr;
  {
    GradBucketer zero(comm, stream, rank, nranks, n, nbuckets);
    const std::vector<size_t> idx = zero.shard_index();
    CUDA_CHECK(cudaMalloc(&x, act_n * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&act, act_n * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&gidx, idx.size() * sizeof(size_t)));
    CUDA_CHECK(cudaMemset(x, 0, act_n * sizeof(float)));
    CUDA_CHECK(cudaMemset(act, 0, act_n * sizeof(float)));
    CUDA_CHECK(cudaMemcpy(gidx, idx.data(), idx.size() * sizeof(size_t), cudaMemcpyHostToDevice));
    init_master<<<blocks_for(idx.size()), 256, 0, stream>>>(zero.master(), gidx, idx.size());

    cudaEvent_t t0, t1;
    CUDA_CHECK(cudaEventCreate(&t0));
    CUDA_CHECK(cudaEventCreate(&t1));
    MPI_Barrier(MPI_COMM_WORLD);
    CUDA_CHECK(cudaEventRecord(t0, stream));
    for (int k = 0; k < steps; ++k) {
      if (k % 2 == 0) zero.train_step(x, act_n, rounds, k, lr);
      else zero.train_step_inline(x, act_n, rounds, k, lr);
    }
    CUDA_CHECK(cudaEventRecord(t1, stream));
    CUDA_CHECK(cudaEventSynchronize(t1));
    float ms = 0.0f;
    CUDA_CHECK(cudaEventElapsedTime(&ms, t0, t1));

    std::vector<float> h(idx.size());
    CUDA_CHECK(cudaMemcpy(h.data(), zero.master(), h.size() * sizeof(float), cudaMemcpyDeviceToHost));
    int wrong = 0;
    for (size_t j = 0; j < h.size(); ++j) {
      double want = master_init(idx[j]);
      for (int k = 0; k < steps; ++k) {
        double sum = 0.0;
        for (int r = 0; r < nranks; ++r) sum += grad_value(idx[j], r, k);
        want -= (double)lr * sum;
      }
      if (std::fabs(h[j] - want) > 1e-3 * (1.0 + std::fabs(want))) ++wrong;
    }
    int all_wrong = 0;
    MPI_Allreduce(&wrong, &all_wrong, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
      if (all_wrong == 0) std::printf("Verification: PASS\n");
      else std::printf("Verification: FAIL %d values wrong\n", all_wrong);
      std::printf("CUCO_RESULT {\"time_ms\": %.6f, \"iters\": %d}\n", ms / steps, steps);
    }
  }
  CUDA_CHECK(cudaFree(x));
  CUDA_CHECK(cudaFree(act));
  CUDA_CHECK(cudaFree(gidx));
  NCCL_CHECK(ncclCommDestroy(comm));
  MPI_Finalize();
  return 0;
}
