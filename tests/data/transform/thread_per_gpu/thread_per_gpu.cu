/* thread_per_gpu.cu: one process, one host thread per GPU.
 *
 * main() makes one NCCL id and starts a pthread per device; each thread
 * selects its device, joins the communicator with ncclCommInitRank (its
 * thread index is its rank), fills its buffer with a rank pattern, reduces
 * it with ncclReduceScatter followed by ncclAllGather (a two-phase
 * all-reduce) and checks the result against the host sum.
 *
 * ./thread_per_gpu [count_per_rank] [threads] [timed_iters]
 */
#include <cuda_runtime.h>
#include <nccl.h>
#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CUDA_OK(x)                                                                          \
    do {                                                                                    \
        cudaError_t e_ = (x);                                                               \
        if (e_ != cudaSuccess) {                                                            \
            fprintf(stderr, "cuda %s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
            abort();                                                                        \
        }                                                                                   \
    } while (0)
#define NCCL_OK(x)                                                                          \
    do {                                                                                    \
        ncclResult_t r_ = (x);                                                              \
        if (r_ != ncclSuccess) {                                                            \
            fprintf(stderr, "nccl %s:%d %s\n", __FILE__, __LINE__, ncclGetErrorString(r_)); \
            abort();                                                                        \
        }                                                                                   \
    } while (0)

struct worker_args {
    int dev, nthreads, timed;
    size_t count; /* elements each rank owns after the reduce-scatter */
    ncclUniqueId id;
    long bad;
    double ms;
};

__host__ __device__ static float value_of(size_t i, int r) { return (float)((i * 5 + (size_t)r * 11) % 17) - 8.0f; }

__global__ void fill_values(float *x, size_t n, int r)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] = value_of(i, r);
}

static void *worker(void *p)
{
    worker_args *a = (worker_args *)p;
    CUDA_OK(cudaSetDevice(a->dev));
    ncclComm_t comm;
    NCCL_OK(ncclCommInitRank(&comm, a->nthreads, a->id, a->dev));
    cudaStream_t st;
    CUDA_OK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    size_t total = a->count * (size_t)a->nthreads;
    float *full, *part;
    CUDA_OK(cudaMalloc(&full, total * sizeof(float)));
    CUDA_OK(cudaMalloc(&part, a->count * sizeof(float)));
    std::vector<double> times;
    for (int it = 0; it <= a->timed; ++it) {
        auto t0 = std::chrono::steady_clock::now();
        fill_values<<<128, 256, 0, st>>>(full, total, a->dev);
        NCCL_OK(ncclReduceScatter(full, part, a->count, ncclFloat, ncclSum, comm, st));
        NCCL_OK(ncclAllGather(part, full, a->count, ncclFloat, comm, st));
        CUDA_OK(cudaStreamSynchronize(st));
        auto t1 = std::chrono::steady_clock::now();
        if (it > 0)
            times.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    }
    std::vector<float> got(total);
    CUDA_OK(cudaMemcpy(got.data(), full, total * sizeof(float), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < total; ++i) {
        float want = 0.0f;
        for (int r = 0; r < a->nthreads; ++r)
            want += value_of(i, r);
        if (fabsf(got[i] - want) > 1e-4f * std::max(1.0f, fabsf(want)))
            a->bad++;
    }
    std::sort(times.begin(), times.end());
    a->ms = times.empty() ? 0.0 : times[times.size() / 2];
    CUDA_OK(cudaFree(part));
    CUDA_OK(cudaFree(full));
    CUDA_OK(cudaStreamDestroy(st));
    NCCL_OK(ncclCommDestroy(comm));
    return NULL;
}

int main(int argc, char **argv)
{
    size_t count = argc > 1 ? strtoull(argv[1], NULL, 10) : 1 << 22;
    int visible = 0;
    CUDA_OK(cudaGetDeviceCount(&visible));
    int nthreads = argc > 2 ? (int)strtol(argv[2], NULL, 10) : visible;
    int timed = argc > 3 ? (int)strtol(argv[3], NULL, 10) : 10;
    if (nthreads < 1 || nthreads > visible)
        nthreads = visible;
    ncclUniqueId id;
    NCCL_OK(ncclGetUniqueId(&id));
    std::vector<worker_args> args(nthreads);
    std::vector<pthread_t> threads(nthreads);
    for (int t = 0; t < nthreads; ++t) {
        args[t] = worker_args{t, nthreads, timed, count, id, 0, 0.0};
        pthread_create(&threads[t], NULL, worker, &args[t]);
    }
    long bad = 0;
    double ms = 0.0;
    for (int t = 0; t < nthreads; ++t) {
        pthread_join(threads[t], NULL);
        bad += args[t].bad;
        ms = std::max(ms, args[t].ms);
    }
    if (bad == 0)
        printf("Verification: PASS\n");
    else
        printf("Verification: FAIL %ld elements differ from the host sum\n", bad);
    printf("CUCO_RESULT {\"time_ms\": %.6f, \"iters\": %d, \"threads\": %d}\n", ms, timed, nthreads);
    return bad != 0;
}
