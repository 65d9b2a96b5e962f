// rowpar_linear.cu: the second linear layer of a tensor-parallel MLP, row
// parallel: rank r holds columns [r*in/R, (r+1)*in/R) of the activations and
// the matching rows of the weight, so its GEMM gives a partial output that
// the ranks sum with an in-place all-reduce. Column-major throughout, as
// cuBLAS sees it: out (out_features x tokens) = W^T (out x in_r) * X (in_r x tokens).
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#define CK(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));            \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                          \
        }                                                                                          \
    } while (0)
#define NK(call)                                                                                   \
    do {                                                                                           \
        ncclResult_t r_ = (call);                                                                  \
        if (r_ != ncclSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, ncclGetErrorString(r_));            \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                          \
        }                                                                                          \
    } while (0)
#define BK(call)                                                                                   \
    do {                                                                                           \
        if ((call) != CUBLAS_STATUS_SUCCESS) {                                                     \
            fprintf(stderr, "%s:%d: cuBLAS failed\n", __FILE__, __LINE__);                         \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                          \
        }                                                                                          \
    } while (0)

struct Shape {
    int tokens = 96, out = 160, in = 64, steps = 2;
};

static float weight_at(int i, int o) { return (float)((i * 7 + o * 3) % 11) / 11.0f - 0.5f; }
static float input_at(int t, int i, int step) { return (float)((t * 5 + i + step) % 13) / 13.0f; }

__global__ void fill_inputs(float *x, int in_r, int tokens, int col0, int step)
{
    long n = (long)in_r * tokens;
    for (long k = blockIdx.x * (long)blockDim.x + threadIdx.x; k < n; k += (long)gridDim.x * blockDim.x) {
        int i = (int)(k % in_r), t = (int)(k / in_r);
        x[k] = (float)((t * 5 + (col0 + i) + step) % 13) / 13.0f;
    }
}

// One layer step: the partial product, then its sum over the ranks.
static void linear_step(cublasHandle_t blas, const float *w, const float *x, float *y, const Shape &s,
                        int in_r, ncclComm_t comm, cudaStream_t stream)
{
    const float one = 1.0f, zero = 0.0f;
    BK(cublasSgemm(blas, CUBLAS_OP_T, CUBLAS_OP_N, s.out, s.tokens, in_r, &one, w, in_r, x, in_r, &zero,
                   y, s.out));
    NK(ncclAllReduce(y, y, (size_t)s.out * s.tokens, ncclFloat, ncclSum, comm, stream));
}

// Every output at small sizes; 256 spread samples at large ones (the host
// reference costs `in` multiply-adds per output).
static bool check(const std::vector<float> &got, const Shape &s, int step, std::string &why)
{
    long total = (long)s.tokens * s.out;
    long n = total <= 20000 ? total : 256;
    for (long k = 0; k < n; k++) {
        long at = n == total ? k : (k * 7919 + step * 104729L) % total;
        int t = (int)(at / s.out), o = (int)(at % s.out);
        double ref = 0;
        for (int i = 0; i < s.in; i++)
            ref += (double)weight_at(i, o) * input_at(t, i, step);
        double g = got[(size_t)t * s.out + o];
        if (std::fabs(g - ref) > 1e-3 * (1 + std::fabs(ref))) {
            why = "out[" + std::to_string(o) + "," + std::to_string(t) + "] = " + std::to_string(g) +
                  ", want " + std::to_string(ref);
            return false;
        }
    }
    return true;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, ranks, gpus;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    CK(cudaGetDeviceCount(&gpus));
    CK(cudaSetDevice(rank % gpus));
    Shape s;
    for (int a = 1; a + 1 < argc; a += 2) {
        int v = (int)strtol(argv[a + 1], nullptr, 10);
        if (!strcmp(argv[a], "--tokens")) s.tokens = v;
        else if (!strcmp(argv[a], "--out")) s.out = v;
        else if (!strcmp(argv[a], "--in")) s.in = v;
        else if (!strcmp(argv[a], "--steps")) s.steps = v;
    }
    int in_r = s.in / ranks, col0 = rank * in_r;

    ncclUniqueId id;
    if (rank == 0)
        NK(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    ncclComm_t comm;
    NK(ncclCommInitRank(&comm, ranks, id, rank));
    cudaStream_t stream;
    CK(cudaStreamCreate(&stream));
    cublasHandle_t blas;
    BK(cublasCreate(&blas));
    BK(cublasSetStream(blas, stream));

    float *w, *x, *y;
    CK(cudaMalloc(&w, sizeof(float) * in_r * s.out));
    CK(cudaMalloc(&x, sizeof(float) * in_r * s.tokens));
    CK(cudaMalloc(&y, sizeof(float) * s.out * s.tokens));
    std::vector<float> hw((size_t)in_r * s.out);
    for (int o = 0; o < s.out; o++)
        for (int i = 0; i < in_r; i++)
            hw[(size_t)o * in_r + i] = weight_at(col0 + i, o);
    CK(cudaMemcpy(w, hw.data(), sizeof(float) * hw.size(), cudaMemcpyHostToDevice));

    bool ok = true;
    std::string why;
    std::vector<float> got((size_t)s.out * s.tokens);
    cudaEvent_t t0, t1;
    CK(cudaEventCreate(&t0));
    CK(cudaEventCreate(&t1));
    float total_ms = 0;
    for (int step = 0; step < s.steps; step++) {
        fill_inputs<<<256, 256, 0, stream>>>(x, in_r, s.tokens, col0, step);
        CK(cudaMemsetAsync(y, 0xFF, sizeof(float) * s.out * s.tokens, stream));
        CK(cudaEventRecord(t0, stream));
        linear_step(blas, w, x, y, s, in_r, comm, stream);
        CK(cudaEventRecord(t1, stream));
        CK(cudaStreamSynchronize(stream));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, t0, t1));
        total_ms += ms;
        CK(cudaMemcpy(got.data(), y, sizeof(float) * got.size(), cudaMemcpyDeviceToHost));
        if (ok && !check(got, s, step, why)) {
            ok = false;
            why = "step " + std::to_string(step) + ": " + why;
        }
    }
    int mine = ok, all = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("Verification: %s%s\n", all ? "PASS" : "FAIL ", all ? "" : why.c_str());
        printf("CUCO_RESULT {\"time_ms\": %.6f, \"iters\": %d}\n", total_ms / s.steps, s.steps);
    }
    BK(cublasDestroy(blas));
    CK(cudaFree(w));
    CK(cudaFree(x));
    CK(cudaFree(y));
    NK(ncclCommDestroy(comm));
    MPI_Finalize();
    return all ? 0 : 1;
}
