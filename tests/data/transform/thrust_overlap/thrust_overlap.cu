// thrust_overlap.cu: layer-by-layer gradient all-reduce overlapped with the
// backward pass, with the tensors held in thrust::device_vector.
//
// The backward pass runs from the last layer to the first on the compute
// stream. As soon as a layer's gradient is written, an event is recorded and
// the communication stream waits for it and all-reduces that gradient in
// place (raw pointers from thrust::raw_pointer_cast), so earlier layers'
// backward kernels overlap later layers' communication. The optimizer waits
// for the communication stream through a second event per layer.
//
// Check: the host replays the steps for all ranks and compares every weight.
//
// mpirun -np N ./thrust_overlap [width] [steps] [timed_iters]
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>
#include <thrust/device_vector.h>
#include <thrust/host_vector.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(call)                                                                     \
  do {                                                                                  \
    cudaError_t e_ = (call);                                                            \
    if (e_ != cudaSuccess) {                                                            \
      std::fprintf(stderr, "%s:%d CUDA %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
      std::exit(1);                                                                     \
    }                                                                                   \
  } while (0)
#define NCCL(call)                                                                      \
  do {                                                                                  \
    ncclResult_t r_ = (call);                                                           \
    if (r_ != ncclSuccess) {                                                            \
      std::fprintf(stderr, "%s:%d NCCL %s\n", __FILE__, __LINE__, ncclGetErrorString(r_)); \
      std::exit(1);                                                                     \
    }                                                                                   \
  } while (0)

constexpr int kLayers = 4;

__host__ __device__ inline float grad_value(float w, int i, int layer, int rank) {
  return 0.5f * w + 0.01f * (float)((i * 7 + layer * 13 + rank * 5) % 23 - 11);
}

__global__ void layer_backward(const float *w, float *g, int n, int layer, int rank) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) g[i] = grad_value(w[i], i, layer, rank);
}

__global__ void sgd(float *w, const float *g, int n, float scale) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) w[i] -= scale * g[i];
}

struct Model {
  std::vector<thrust::device_vector<float>> weights, grads;
  std::vector<cudaEvent_t> grad_ready, reduced;
};

static void train_step(Model &m, int width, int rank, int world, float lr, ncclComm_t comm, cudaStream_t compute,
                       cudaStream_t comm_stream) {
  int blocks = (width + 255) / 256;
  for (int l = kLayers - 1; l >= 0; --l) {
    float *w = thrust::raw_pointer_cast(m.weights[l].data());
    float *g = thrust::raw_pointer_cast(m.grads[l].data());
    layer_backward<<<blocks, 256, 0, compute>>>(w, g, width, l, rank);
    CHECK(cudaEventRecord(m.grad_ready[l], compute));
    CHECK(cudaStreamWaitEvent(comm_stream, m.grad_ready[l], 0));
    NCCL(ncclAllReduce(g, g, width, ncclFloat, ncclSum, comm, comm_stream));
    CHECK(cudaEventRecord(m.reduced[l], comm_stream));
  }
  for (int l = 0; l < kLayers; ++l) {
    CHECK(cudaStreamWaitEvent(compute, m.reduced[l], 0));
    sgd<<<blocks, 256, 0, compute>>>(thrust::raw_pointer_cast(m.weights[l].data()),
                                     thrust::raw_pointer_cast(m.grads[l].data()), width, lr / world);
  }
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  int width = argc > 1 ? std::atoi(argv[1]) : 1 << 20;
  int steps = argc > 2 ? std::atoi(argv[2]) : 3;
  int timed = argc > 3 ? std::atoi(argv[3]) : 10;
  const float lr = 0.3f;
  int ndev = 0;
  CHECK(cudaGetDeviceCount(&ndev));
  CHECK(cudaSetDevice(rank % ndev));
  ncclUniqueId id;
  if (rank == 0) NCCL(ncclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t comm;
  NCCL(ncclCommInitRank(&comm, world, id, rank));
  cudaStream_t compute, comm_stream;
  CHECK(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&comm_stream, cudaStreamNonBlocking));

  long bad_all = 0;
  std::vector<float> times;
  {
    Model m;
    for (int l = 0; l < kLayers; ++l) {
      thrust::host_vector<float> init(width);
      for (int i = 0; i < width; ++i) init[i] = (float)((i + l) % 17) / 17.0f;
      m.weights.emplace_back(init);
      m.grads.emplace_back(width, 0.0f);
      cudaEvent_t a, b;
      CHECK(cudaEventCreateWithFlags(&a, cudaEventDisableTiming));
      CHECK(cudaEventCreateWithFlags(&b, cudaEventDisableTiming));
      m.grad_ready.push_back(a);
      m.reduced.push_back(b);
    }
    CHECK(cudaDeviceSynchronize());
    for (int s = 0; s < steps; ++s) train_step(m, width, rank, world, lr, comm, compute, comm_stream);
    CHECK(cudaStreamSynchronize(compute));

    long bad = 0;
    for (int l = 0; l < kLayers; ++l) {
      thrust::host_vector<float> got = m.weights[l];
      for (int i = 0; i < width; ++i) {
        float w = (float)((i + l) % 17) / 17.0f;
        for (int s = 0; s < steps; ++s) {
          float sum = 0.0f;
          for (int r = 0; r < world; ++r) sum += grad_value(w, i, l, r);
          w -= lr / world * sum;
        }
        if (std::fabs(got[i] - w) > 1e-4f * std::max(1.0f, std::fabs(w))) ++bad;
      }
    }
    MPI_Allreduce(&bad, &bad_all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);

    cudaEvent_t t0, t1;
    CHECK(cudaEventCreate(&t0));
    CHECK(cudaEventCreate(&t1));
    for (int it = 0; it < timed + 2; ++it) {
      CHECK(cudaEventRecord(t0, compute));
      train_step(m, width, rank, world, lr, comm, compute, comm_stream);
      CHECK(cudaEventRecord(t1, compute));
      CHECK(cudaEventSynchronize(t1));
      float ms = 0.0f;
      CHECK(cudaEventElapsedTime(&ms, t0, t1));
      if (it >= 2) times.push_back(ms);
    }
    CHECK(cudaEventDestroy(t0));
    CHECK(cudaEventDestroy(t1));
    for (int l = 0; l < kLayers; ++l) {
      CHECK(cudaEventDestroy(m.grad_ready[l]));
      CHECK(cudaEventDestroy(m.reduced[l]));
    }
  }
  std::sort(times.begin(), times.end());
  if (rank == 0) {
    if (bad_all == 0)
      std::printf("Verification: PASS\n");
    else
      std::printf("Verification: FAIL %ld weights differ from the host replay\n", bad_all);
    std::printf("CUCO_RESULT {\"time_ms\": %.6f, \"iters\": %d, \"layers\": %d}\n",
                times.empty() ? 0.0 : (double)times[times.size() / 2], timed, kLayers);
  }
  CHECK(cudaStreamDestroy(compute));
  CHECK(cudaStreamDestroy(comm_stream));
  NCCL(ncclCommDestroy(comm));
  MPI_Finalize();
  return bad_all != 0;
}
