/* c_globals.cu: a data-parallel step written the way C tutorials write it:
 * the communicator, the stream and every device buffer are file-scope
 * globals set up by init() and used by step(), launch sizes come from a
 * small helper, and errors abort through a macro. Each step makes the
 * gradient, sums it over the ranks in place, runs the next micro-batch's
 * forward kernel (which does not read the gradient) and applies the
 * update. */
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call)                                                                                \
    do {                                                                                           \
        int err_ = (int)(call);                                                                    \
        if (err_ != 0) {                                                                           \
            fprintf(stderr, "%s:%d: %s failed (%d)\n", __FILE__, __LINE__, #call, err_);          \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                          \
        }                                                                                          \
    } while (0)

static ncclComm_t g_comm;
static cudaStream_t g_stream;
static int g_rank, g_nranks;
static size_t g_n = 4099, g_m = 8192;
static int g_rounds = 64;
static float *d_params, *d_grad, *d_input, *d_act;

static float grad_value(size_t i, int rank, int step)
{
    return (float)((i * 7 + (size_t)rank * 13 + (size_t)step * 5) % 17) / 64.0f;
}

__global__ void init_values(float *p, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = (float)(i % 29) / 8.0f;
}

__global__ void make_grad(float *g, size_t n, int rank, int step)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        g[i] = (float)((i * 7 + (size_t)rank * 13 + (size_t)step * 5) % 17) / 64.0f;
}

__global__ void forward(const float *x, float *act, size_t m, int rounds)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < m; i += (size_t)gridDim.x * blockDim.x) {
        float v = x[i], a = 0.0f;
        for (int r = 0; r < rounds; r++)
            a = fmaf(a, 0.5f, v);
        act[i] = a;
    }
}

__global__ void sgd(float *p, const float *g, size_t n, float lr)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] -= lr * g[i];
}

/* blocks of 256 threads for n elements, at most 1024 */
static int blocks_for(size_t n)
{
    size_t b = (n + 255) / 256;
    return b > 1024 ? 1024 : (int)b;
}

static void init(void)
{
    ncclUniqueId id;
    int ndev = 1;
    CHECK(cudaGetDeviceCount(&ndev));
    CHECK(cudaSetDevice(g_rank % ndev));
    if (g_rank == 0)
        CHECK(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    CHECK(ncclCommInitRank(&g_comm, g_nranks, id, g_rank));
    CHECK(cudaStreamCreate(&g_stream));
    CHECK(cudaMalloc((void **)&d_params, g_n * sizeof(float)));
    CHECK(cudaMalloc((void **)&d_grad, g_n * sizeof(float)));
    CHECK(cudaMalloc((void **)&d_input, g_m * sizeof(float)));
    CHECK(cudaMalloc((void **)&d_act, g_m * sizeof(float)));
    init_values<<<blocks_for(g_m), 256, 0, g_stream>>>(d_input, g_m);
}

static void step(int k)
{
    make_grad<<<blocks_for(g_n), 256, 0, g_stream>>>(d_grad, g_n, g_rank, k);
    CHECK(ncclAllReduce(d_grad, d_grad, g_n, ncclFloat, ncclSum, g_comm, g_stream));
    forward<<<blocks_for(g_m), 256, 0, g_stream>>>(d_input, d_act, g_m, g_rounds);
    sgd<<<blocks_for(g_n), 256, 0, g_stream>>>(d_params, d_grad, g_n, 0.01f);
}

static void finish(void)
{
    CHECK(cudaFree(d_params));
    CHECK(cudaFree(d_grad));
    CHECK(cudaFree(d_input));
    CHECK(cudaFree(d_act));
    CHECK(ncclCommDestroy(g_comm));
}

/* parameters sampled on the host against the sum the ranks made */
static int count_wrong(int steps)
{
    float *h = (float *)malloc(g_n * sizeof(float));
    int wrong = 0;
    if (!h)
        return -1;
    CHECK(cudaMemcpy(h, d_params, g_n * sizeof(float), cudaMemcpyDeviceToHost));
    size_t stride = g_n > 4096 ? g_n / 1024 : 1;
    for (size_t i = 0; i < g_n; i += stride) {
        double want = (double)(i % 29) / 8.0;
        for (int k = 0; k < steps; k++) {
            double sum = 0.0;
            for (int r = 0; r < g_nranks; r++)
                sum += grad_value(i, r, k);
            want -= 0.01 * sum;
        }
        if (fabs(h[i] - want) > 1e-3 * (1.0 + fabs(want)))
            wrong++;
    }
    free(h);
    return wrong;
}

int main(int argc, char **argv)
{
    int steps = 3;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_nranks);
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--n"))
            g_n = (size_t)atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--m"))
            g_m = (size_t)atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--steps"))
            steps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--rounds"))
            g_rounds = atoi(argv[i + 1]);
    }
    init();
    init_values<<<blocks_for(g_n), 256, 0, g_stream>>>(d_params, g_n);
    for (int k = 0; k < steps; k++)
        step(k);
    CHECK(cudaStreamSynchronize(g_stream));
    int wrong = count_wrong(steps);

    init_values<<<blocks_for(g_n), 256, 0, g_stream>>>(d_params, g_n);
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(cudaEventRecord(a, g_stream));
    for (int k = 0; k < steps; k++)
        step(k);
    CHECK(cudaEventRecord(b, g_stream));
    CHECK(cudaEventSynchronize(b));
    float ms = 0.0f;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    wrong += count_wrong(steps);
    int all = 0;
    MPI_Allreduce(&wrong, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (g_rank == 0) {
        if (all == 0)
            printf("Verification: PASS\n");
        else
            printf("Verification: FAIL %d parameters wrong\n", all);
        printf("CUCO_RESULT {\"time_ms\": %.6f, \"iters\": %d}\n", ms / steps, steps);
    }
    finish();
    MPI_Finalize();
    return 0;
}
