/* reduce_scatter_grad.cu: ZeRO-style sharded SGD step.
 *
 * Every rank computes a gradient for the whole flat parameter vector (its own
 * data: the gradient depends on the rank), the gradients are averaged with
 * ncclReduceScatter (ncclAvg) so that rank r owns shard r of the mean, rank r applies
 * SGD to its shard of the parameters in place, and ncclAllGather brings the
 * updated shards back into the flat parameter buffer on every rank. The
 * parameter count is padded up to a multiple of the rank count.
 *
 * Check: the host replays the same steps for all ranks' gradients and
 * compares the full parameter vector on every rank.
 *
 * mpirun -np N ./reduce_scatter_grad [nparams] [steps] [timed_iters]
 */
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

static int g_rank = 0;

#define CU(x) cu_check((x), #x, __LINE__)
#define NC(x) nc_check((x), #x, __LINE__)

static void cu_check(cudaError_t e, const char *expr, int line)
{
    if (e == cudaSuccess)
        return;
    fprintf(stderr, "rank %d: line %d: %s: %s\n", g_rank, line, expr, cudaGetErrorString(e));
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static void nc_check(ncclResult_t e, const char *expr, int line)
{
    if (e == ncclSuccess)
        return;
    fprintf(stderr, "rank %d: line %d: %s: %s\n", g_rank, line, expr, ncclGetErrorString(e));
    MPI_Abort(MPI_COMM_WORLD, 1);
}

__host__ __device__ static float param_init(size_t i) { return (float)(i % 97) / 32.0f - 1.5f; }

/* the local gradient of rank r: a pull of p towards a rank-specific target */
__host__ __device__ static float local_grad(float p, size_t i, int r)
{
    float target = (float)((int)((i * 3 + (size_t)r * 11) % 13) - 6) / 4.0f;
    return 0.5f * (p - target);
}

__global__ void init_params(float *p, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)blockDim.x * gridDim.x)
        p[i] = param_init(i);
}

__global__ void compute_grads(const float *p, float *g, size_t n, int r)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)blockDim.x * gridDim.x)
        g[i] = local_grad(p[i], i, r);
}

__global__ void sgd_update(float *p, const float *g, size_t n, float lr)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)blockDim.x * gridDim.x)
        p[i] -= lr * g[i];
}

static void train_step(float *params, float *grads, float *grad_shard, size_t shard, int rank, int nranks,
                       float lr, ncclComm_t comm, cudaStream_t stream)
{
    size_t total = shard * (size_t)nranks;
    compute_grads<<<256, 256, 0, stream>>>(params, grads, total, rank);
    NC(ncclReduceScatter(grads, grad_shard, shard, ncclFloat32, ncclAvg, comm, stream));
    float *my_params = params + rank * shard;
    sgd_update<<<128, 256, 0, stream>>>(my_params, grad_shard, shard, lr);
    NC(ncclAllGather(params + rank * shard, params, shard, ncclFloat32, comm, stream));
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    size_t nparams = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000003;
    int steps = argc > 2 ? atoi(argv[2]) : 3;
    int timed = argc > 3 ? atoi(argv[3]) : 10;
    const float lr = 0.25f;

    int ndev;
    CU(cudaGetDeviceCount(&ndev));
    CU(cudaSetDevice(g_rank % ndev));
    ncclUniqueId id;
    if (g_rank == 0)
        NC(ncclGetUniqueId(&id));
    MPI_Bcast(&id, (int)sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
    ncclComm_t comm;
    NC(ncclCommInitRank(&comm, nranks, id, g_rank));
    cudaStream_t stream;
    CU(cudaStreamCreate(&stream));

    size_t shard = (nparams + nranks - 1) / nranks;
    size_t padded = shard * nranks;
    float *params = NULL, *grads = NULL, *grad_shard = NULL;
    CU(cudaMalloc((void **)&params, padded * sizeof(float)));
    CU(cudaMalloc((void **)&grads, padded * sizeof(float)));
    CU(cudaMalloc((void **)&grad_shard, shard * sizeof(float)));

    init_params<<<256, 256, 0, stream>>>(params, padded);
    for (int s = 0; s < steps; s++)
        train_step(params, grads, grad_shard, shard, g_rank, nranks, lr, comm, stream);
    CU(cudaStreamSynchronize(stream));

    std::vector<float> got(padded), ref(padded);
    CU(cudaMemcpy(got.data(), params, padded * sizeof(float), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < padded; i++) {
        float p = param_init(i);
        for (int s = 0; s < steps; s++) {
            float sum = 0.0f;
            for (int r = 0; r < nranks; r++)
                sum += local_grad(p, i, r);
            p -= lr * (sum / nranks);
        }
        ref[i] = p;
    }
    long bad = 0;
    for (size_t i = 0; i < padded; i++)
        if (fabsf(got[i] - ref[i]) > 1e-4f * std::max(1.0f, fabsf(ref[i])))
            bad++;
    long bad_all = 0;
    MPI_Allreduce(&bad, &bad_all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);

    cudaEvent_t t0, t1;
    CU(cudaEventCreate(&t0));
    CU(cudaEventCreate(&t1));
    std::vector<float> times;
    for (int it = 0; it < timed + 2; it++) {
        CU(cudaEventRecord(t0, stream));
        train_step(params, grads, grad_shard, shard, g_rank, nranks, lr, comm, stream);
        CU(cudaEventRecord(t1, stream));
        CU(cudaEventSynchronize(t1));
        float ms;
        CU(cudaEventElapsedTime(&ms, t0, t1));
        if (it >= 2)
            times.push_back(ms);
    }
    std::sort(times.begin(), times.end());
    if (g_rank == 0) {
        if (bad_all == 0)
            printf("Verification: PASS\n");
        else
            printf("Verification: FAIL %ld parameters differ from the host replay\n", bad_all);
        printf("CUCO_RESULT {\"time_ms\": %.6f, \"iters\": %d, \"params\": %zu}\n",
               times.empty() ? 0.0 : (double)times[times.size() / 2], timed, padded);
    }

    CU(cudaEventDestroy(t0));
    CU(cudaEventDestroy(t1));
    CU(cudaFree(grad_shard));
    CU(cudaFree(grads));
    CU(cudaFree(params));
    NC(ncclCommDestroy(comm));
    MPI_Finalize();
    return bad_all != 0;
}
