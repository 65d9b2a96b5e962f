// layer_send.cu -- prefill/decode hand-off of per-layer projections.
//
// Rank 0 (prefill) projects its activations through one weight matrix per
// layer with cuBLAS (out_l = W_l X, column-major), all layers into one
// buffer, and sends the whole buffer to rank 1 (decode), which checks every
// layer against the same product computed on the host. A plain host-driven
// program: the send waits for the last layer. With one rank, rank 0 sends
// to itself inside a group and checks.
//
// usage: mpirun -np 2 ./layer_send [--dim D] [--layers L] [--reps R]
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_)); MPI_Abort(MPI_COMM_WORLD, 2); } } while (0)
#define NK(x) do { ncclResult_t e_ = (x); if (e_ != ncclSuccess) { fprintf(stderr, "%s: %s\n", #x, ncclGetErrorString(e_)); MPI_Abort(MPI_COMM_WORLD, 2); } } while (0)
#define BK(x) do { if ((x) != CUBLAS_STATUS_SUCCESS) { fprintf(stderr, "%s failed\n", #x); MPI_Abort(MPI_COMM_WORLD, 2); } } while (0)

static float weight(int l, int i) { return (float)((i * 5 + l * 11) % 17 - 8) / 32.0f; }
static float act(int i) { return (float)((i * 3) % 13 - 6) / 8.0f; }

// kv[l] = W_l X for every layer, then the whole of kv to `to` (to itself
// inside a group when it is the only rank).
static void prefill_and_send(cublasHandle_t h, ncclComm_t comm, const float *w, const float *x, float *kv,
                             int dim, int layers, int to, cudaStream_t s)
{
    const size_t mat = (size_t)dim * dim, count = (size_t)layers * mat;
    const float one = 1.0f, zero = 0.0f;
    for (int l = 0; l < layers; l++)
        BK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, dim, dim, dim, &one, w + (size_t)l * mat, dim, x, dim, &zero,
                       kv + (size_t)l * mat, dim));
    if (to != 0) {
        NK(ncclSend(kv, count, ncclFloat, to, comm, s));
    } else {
        NK(ncclGroupStart());
        NK(ncclSend(kv, count, ncclFloat, 0, comm, s));
        NK(ncclRecv(kv, count, ncclFloat, 0, comm, s));
        NK(ncclGroupEnd());
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, nranks = 1, dim = 256, layers = 16, reps = 5;
    for (int a = 1; a + 1 < argc; a++) {
        if (!strcmp(argv[a], "--dim")) dim = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--layers")) layers = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--reps")) reps = atoi(argv[++a]);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    int ndev = 0;
    CK(cudaGetDeviceCount(&ndev));
    CK(cudaSetDevice(rank % ndev));
    ncclUniqueId id;
    if (rank == 0) NK(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    ncclComm_t comm;
    NK(ncclCommInitRank(&comm, nranks, id, rank));
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    cublasHandle_t h;
    BK(cublasCreate(&h));
    BK(cublasSetStream(h, s));

    const size_t mat = (size_t)dim * dim, count = (size_t)layers * mat;
    std::vector<float> hw(count), hx(mat);
    for (size_t i = 0; i < count; i++) hw[i] = weight((int)(i / mat), (int)(i % mat));
    for (size_t i = 0; i < mat; i++) hx[i] = act((int)i);
    float *w, *x, *kv;
    CK(cudaMalloc(&w, count * sizeof(float)));
    CK(cudaMalloc(&x, mat * sizeof(float)));
    CK(cudaMalloc(&kv, count * sizeof(float)));
    CK(cudaMemcpy(w, hw.data(), count * sizeof(float), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(x, hx.data(), mat * sizeof(float), cudaMemcpyHostToDevice));

    double best = 1e30;
    for (int r = 0; r < reps + 1; r++) {
        CK(cudaMemsetAsync(kv, 0xFF, count * sizeof(float), s));
        MPI_Barrier(MPI_COMM_WORLD);
        auto t0 = std::chrono::steady_clock::now();
        if (rank == 0)
            prefill_and_send(h, comm, w, x, kv, dim, layers, nranks > 1 ? 1 : 0, s);
        else if (rank == 1)
            NK(ncclRecv(kv, count, ncclFloat, 0, comm, s));
        CK(cudaStreamSynchronize(s));
        double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        if (r > 0 && ms < best) best = ms;
    }

    long bad = 0;
    if (rank == (nranks > 1 ? 1 : 0)) {
        std::vector<float> got(count);
        CK(cudaMemcpy(got.data(), kv, count * sizeof(float), cudaMemcpyDeviceToHost));
        for (int l = 0; l < layers; l++)
            for (int j = 0; j < dim; j += 7)
                for (int i = 0; i < dim; i += 5) {
                    double want = 0;
                    for (int k = 0; k < dim; k++)
                        want += (double)hw[(size_t)l * mat + (size_t)k * dim + i] * hx[(size_t)j * dim + k];
                    float g = got[(size_t)l * mat + (size_t)j * dim + i];
                    if (!(std::fabs(g - want) <= 1e-3 * (1.0 + std::fabs(want)))) bad++;
                }
    }
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("Verification: %s\n", bad ? "FAIL" : "PASS");
        printf("CUCO_RESULT {\"time_ms\": %.6f, \"layers\": %d, \"dim\": %d}\n", best, layers, dim);
    }
    BK(cublasDestroy(h));
    CK(cudaFree(kv));
    CK(cudaFree(w));
    CK(cudaFree(x));
    NK(ncclCommDestroy(comm));
    MPI_Finalize();
    return bad ? 1 : 0;
}
