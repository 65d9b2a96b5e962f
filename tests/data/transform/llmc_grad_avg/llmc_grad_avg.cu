/*
Data-parallel gradient averaging in the style of a single-file GPT trainer.

Parameters and gradients each live in one cudaMalloc'd block, and a table of
pointers is pointed into it tensor by tensor. A MultiGpuConfig struct holds
the rank, the communicator, a dedicated NCCL stream and the event that orders
it after the compute stream. After the backward pass the gradients of every
tensor are averaged (ncclAvg, in place) in one NCCL group on the NCCL stream;
the compute stream waits for it before the update. Errors go through
ncclCheck()/cudaCheck() functions that print the file and line and exit.

Check: the host replays the steps for all ranks and compares every
parameter on every rank.

mpirun -np N ./llmc_grad_avg [scale] [steps] [timed_iters]
*/
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

void cuda_check(cudaError_t error, const char *file, int line) {
  if (error != cudaSuccess) {
    printf("[CUDA ERROR] at file %s:%d:\n%s\n", file, line, cudaGetErrorString(error));
    exit(EXIT_FAILURE);
  }
}
#define cudaCheck(err) (cuda_check(err, __FILE__, __LINE__))

void nccl_check(ncclResult_t status, const char *file, int line) {
  if (status != ncclSuccess) {
    printf("[NCCL ERROR] at file %s:%d:\n%s\n", file, line, ncclGetErrorString(status));
    exit(EXIT_FAILURE);
  }
}
#define ncclCheck(err) (nccl_check(err, __FILE__, __LINE__))

typedef struct {
  int process_rank;
  int num_processes;
  int local_device_idx;
  ncclComm_t nccl_comm;
  cudaStream_t nccl_stream;
  cudaEvent_t compute_nccl_sync;
  cudaEvent_t nccl_compute_sync;
} MultiGpuConfig;

#define NUM_PARAMETER_TENSORS 3
typedef struct {
  float *wte;  // embedding table
  float *fcw;  // MLP weight
  float *lnw;  // layernorm weight
} ParameterTensors;

MultiGpuConfig multi_gpu_config_init(int *argc, char ***argv) {
  MultiGpuConfig result;
  MPI_Init(argc, argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &result.process_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &result.num_processes);
  int ndev = 0;
  cudaCheck(cudaGetDeviceCount(&ndev));
  result.local_device_idx = result.process_rank % ndev;
  cudaCheck(cudaSetDevice(result.local_device_idx));
  ncclUniqueId nccl_id;
  if (result.process_rank == 0) {
    ncclCheck(ncclGetUniqueId(&nccl_id));
  }
  MPI_Bcast((void *)&nccl_id, sizeof(nccl_id), MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclCheck(ncclCommInitRank(&result.nccl_comm, result.num_processes, nccl_id, result.process_rank));
  cudaCheck(cudaStreamCreate(&result.nccl_stream));
  cudaCheck(cudaEventCreateWithFlags(&result.compute_nccl_sync, cudaEventDisableTiming));
  cudaCheck(cudaEventCreateWithFlags(&result.nccl_compute_sync, cudaEventDisableTiming));
  return result;
}

void multi_gpu_config_free(MultiGpuConfig *config) {
  ncclCheck(ncclCommDestroy(config->nccl_comm));
  cudaCheck(cudaStreamDestroy(config->nccl_stream));
  cudaCheck(cudaEventDestroy(config->compute_nccl_sync));
  cudaCheck(cudaEventDestroy(config->nccl_compute_sync));
  MPI_Finalize();
}

// one allocation for all tensors, then the table of pointers is pointed into it
float *malloc_and_point(ParameterTensors *tensors, const size_t *sizes) {
  size_t total = 0;
  for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) total += sizes[i];
  float *memory;
  cudaCheck(cudaMalloc((void **)&memory, total * sizeof(float)));
  float **ptrs[] = {&tensors->wte, &tensors->fcw, &tensors->lnw};
  float *iter = memory;
  for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
    *(ptrs[i]) = iter;
    iter += sizes[i];
  }
  return memory;
}

// Averages the gradients of every tensor across processes, on the NCCL
// stream, after everything queued so far on the compute stream.
void multi_gpu_async_reduce_gradient(float *const *pointers, const size_t *pointers_sizes,
                                     MultiGpuConfig *config, cudaStream_t compute_stream) {
  if (config->num_processes == 1) return;
  cudaCheck(cudaEventRecord(config->compute_nccl_sync, compute_stream));
  cudaCheck(cudaStreamWaitEvent(config->nccl_stream, config->compute_nccl_sync));
  ncclCheck(ncclGroupStart());
  for (int i = 0; i < NUM_PARAMETER_TENSORS; ++i) {
    ncclCheck(ncclAllReduce(pointers[i], pointers[i], pointers_sizes[i], ncclFloat, ncclAvg,
                            config->nccl_comm, config->nccl_stream));
  }
  ncclCheck(ncclGroupEnd());
  cudaCheck(cudaEventRecord(config->nccl_compute_sync, config->nccl_stream));
  cudaCheck(cudaStreamWaitEvent(compute_stream, config->nccl_compute_sync));
}

__host__ __device__ inline float init_value(size_t i) { return (float)((i * 37) % 101) / 50.0f - 1.0f; }
__host__ __device__ inline float local_grad(float p, size_t i, int rank) {
  return p * 0.5f + (float)((int)((i + (size_t)rank * 5) % 9) - 4) * 0.125f;
}

__global__ void init_kernel(float *p, size_t n) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) p[i] = init_value(i);
}

__global__ void backward_kernel(const float *params, float *grads, size_t n, int rank) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) grads[i] = local_grad(params[i], i, rank);
}

__global__ void sgd_kernel(float *params, const float *grads, size_t n, float lr) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) params[i] -= lr * grads[i];
}

static inline unsigned blocks_for(size_t n) { return (unsigned)((n + 255) / 256); }

void train_step(float *params, float *grads, float *const *grad_ptrs, const size_t *sizes, size_t total,
                MultiGpuConfig *config, cudaStream_t main_stream, float lr) {
  backward_kernel<<<blocks_for(total), 256, 0, main_stream>>>(params, grads, total, config->process_rank);
  multi_gpu_async_reduce_gradient(grad_ptrs, sizes, config, main_stream);
  sgd_kernel<<<blocks_for(total), 256, 0, main_stream>>>(params, grads, total, lr);
}

int main(int argc, char **argv) {
  MultiGpuConfig multi_gpu_config = multi_gpu_config_init(&argc, &argv);
  size_t scale = argc > 1 ? strtoull(argv[1], NULL, 10) : 65536;
  int steps = argc > 2 ? atoi(argv[2]) : 3;
  int timed = argc > 3 ? atoi(argv[3]) : 10;
  const float lr = 0.2f;
  size_t sizes[NUM_PARAMETER_TENSORS] = {scale * 4, scale * 2 + 3, scale / 2 + 1};
  size_t total = sizes[0] + sizes[1] + sizes[2];

  cudaStream_t main_stream;
  cudaCheck(cudaStreamCreate(&main_stream));
  ParameterTensors params, grads;
  float *params_memory = malloc_and_point(&params, sizes);
  float *grads_memory = malloc_and_point(&grads, sizes);
  float *grad_ptrs[NUM_PARAMETER_TENSORS] = {grads.wte, grads.fcw, grads.lnw};

  init_kernel<<<blocks_for(total), 256, 0, main_stream>>>(params_memory, total);
  for (int s = 0; s < steps; s++)
    train_step(params_memory, grads_memory, grad_ptrs, sizes, total, &multi_gpu_config, main_stream, lr);
  cudaCheck(cudaStreamSynchronize(main_stream));

  std::vector<float> got(total);
  cudaCheck(cudaMemcpy(got.data(), params.wte, total * sizeof(float), cudaMemcpyDeviceToHost));
  long bad = 0;
  int nproc = multi_gpu_config.num_processes;
  for (size_t i = 0; i < total; i++) {
    float p = init_value(i);
    for (int s = 0; s < steps; s++) {
      float sum = 0.0f;
      for (int r = 0; r < nproc; r++) sum += local_grad(p, i, r);
      p -= lr * (sum / (float)nproc);
    }
    if (fabsf(got[i] - p) > 1e-4f * std::max(1.0f, fabsf(p))) bad++;
  }
  long bad_all = 0;
  MPI_Allreduce(&bad, &bad_all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);

  cudaEvent_t start, end;
  cudaCheck(cudaEventCreate(&start));
  cudaCheck(cudaEventCreate(&end));
  std::vector<float> times;
  for (int it = 0; it < timed + 2; it++) {
    cudaCheck(cudaEventRecord(start, main_stream));
    train_step(params_memory, grads_memory, grad_ptrs, sizes, total, &multi_gpu_config, main_stream, lr);
    cudaCheck(cudaEventRecord(end, main_stream));
    cudaCheck(cudaEventSynchronize(end));
    float ms = 0.0f;
    cudaCheck(cudaEventElapsedTime(&ms, start, end));
    if (it >= 2) times.push_back(ms);
  }
  std::sort(times.begin(), times.end());
  if (multi_gpu_config.process_rank == 0) {
    if (bad_all == 0)
      printf("Verification: PASS\n");
    else
      printf("Verification: FAIL %ld parameters differ from the host replay\n", bad_all);
    printf("CUCO_RESULT {\"time_ms\": %.6f, \"iters\": %d, \"params\": %zu}\n",
           times.empty() ? 0.0 : (double)times[times.size() / 2], timed, total);
  }
  cudaCheck(cudaEventDestroy(start));
  cudaCheck(cudaEventDestroy(end));
  cudaCheck(cudaFree(params_memory));
  cudaCheck(cudaFree(grads_memory));
  cudaCheck(cudaStreamDestroy(main_stream));
  multi_gpu_config_free(&multi_gpu_config);
  return bad_all != 0;
}
