/* packed_kv_decode.cu: multi-query decode attention over a KV cache split by
 * sequence across ranks, written C-style (plain functions, a context struct
 * passed by pointer, no classes). Each rank appends to its slice of the
 * cache as packed rows (K then V, one row per key), the slices are
 * all-gathered into one packed cache, and every head's block walks the
 * whole cache tile by tile with an online softmax: all blocks re-read all
 * keys. The query projection in between does not touch the cache. */
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { fprintf(stderr, "CUDA %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); MPI_Abort(MPI_COMM_WORLD, 1); } } while (0)
#define NK(call) do { ncclResult_t r_ = (call); if (r_ != ncclSuccess) { fprintf(stderr, "NCCL %s at %s:%d\n", ncclGetErrorString(r_), __FILE__, __LINE__); MPI_Abort(MPI_COMM_WORLD, 1); } } while (0)

enum { HEADS = 128, DIM = 64, ROW = 2 * DIM, TILE = 32, THREADS = 128 };

struct decode_ctx {
    int rank, nranks, keys; /* keys per rank */
    ncclComm_t comm;
    cudaStream_t stream;
    float *x, *q, *slice, *cache, *out; /* cache: nranks * keys packed rows */
};

__host__ __device__ static float key_val(long g, int d, int it) { return 0.01f * (float)((g * 7 + d * 3 + it) % 11 - 5); }
__host__ __device__ static float value_val(long g, int d, int it) { return 0.1f * (float)((g + d) % 13) + (float)it; }

__global__ void fill_slice(float *slice, int keys, int rank, int it)
{
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < (long)keys * ROW; i += (long)gridDim.x * blockDim.x) {
        long g = (long)rank * keys + i / ROW;
        int c = (int)(i % ROW);
        slice[i] = c < DIM ? key_val(g, c, it) : value_val(g, c - DIM, it);
    }
}

__global__ void project(const float *x, float *q, int it)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < HEADS * DIM)
        q[i] = 0.5f * x[i] + 0.01f * (float)it;
}

/* one block per head: out[h] = softmax(q[h] . K / sqrt(DIM)) V over all keys */
__global__ void decode_attend(const float *q, const float *cache, float *out, int nkeys)
{
    __shared__ float qs[DIM], tile[TILE * ROW], p[TILE];
    __shared__ float run_max, run_sum, corr;
    const int h = blockIdx.x;
    for (int i = threadIdx.x; i < DIM; i += blockDim.x)
        qs[i] = q[h * DIM + i];
    if (threadIdx.x == 0) {
        run_max = -INFINITY;
        run_sum = 0.0f;
    }
    float acc = 0.0f;
    __syncthreads();
    for (int t0 = 0; t0 < nkeys; t0 += TILE) {
        int nt = nkeys - t0 < TILE ? nkeys - t0 : TILE;
        for (int i = threadIdx.x; i < nt * ROW; i += blockDim.x)
            tile[i] = cache[(size_t)t0 * ROW + i];
        __syncthreads();
        if ((int)threadIdx.x < nt) {
            float s = 0.0f;
            for (int d = 0; d < DIM; d++)
                s += qs[d] * tile[threadIdx.x * ROW + d];
            p[threadIdx.x] = s * rsqrtf((float)DIM);
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            float m = run_max;
            for (int j = 0; j < nt; j++)
                m = fmaxf(m, p[j]);
            corr = expf(run_max - m);
            float l = run_sum * corr;
            for (int j = 0; j < nt; j++) {
                p[j] = expf(p[j] - m);
                l += p[j];
            }
            run_max = m;
            run_sum = l;
        }
        __syncthreads();
        if (threadIdx.x < DIM) {
            acc *= corr;
            for (int j = 0; j < nt; j++)
                acc += p[j] * tile[j * ROW + DIM + threadIdx.x];
        }
        __syncthreads();
    }
    if (threadIdx.x < DIM)
        out[h * DIM + threadIdx.x] = acc / run_sum;
}

static void decode_step(decode_ctx *c, int it)
{
    fill_slice<<<256, 256, 0, c->stream>>>(c->slice, c->keys, c->rank, it);
    NK(ncclAllGather(c->slice, c->cache, (size_t)c->keys * ROW, ncclFloat32, c->comm, c->stream));
    project<<<(HEADS * DIM + 255) / 256, 256, 0, c->stream>>>(c->x, c->q, it);
    decode_attend<<<HEADS, THREADS, 0, c->stream>>>(c->q, c->cache, c->out, c->keys * c->nranks);
}

static int verify(const decode_ctx *c, const std::vector<float> &out, int it)
{
    int bad = 0;
    long nkeys = (long)c->keys * c->nranks;
    std::vector<double> s(nkeys);
    for (int h = 0; h < HEADS; h++) {
        double m = -1e300, l = 0;
        for (long g = 0; g < nkeys; g++) {
            double dot = 0;
            for (int d = 0; d < DIM; d++)
                dot += (0.5 * (double)((h * DIM + d) % 9) + 0.01 * it) * key_val(g, d, it);
            s[g] = dot / std::sqrt((double)DIM);
            m = s[g] > m ? s[g] : m;
        }
        for (long g = 0; g < nkeys; g++)
            l += std::exp(s[g] - m);
        for (int d = 0; d < DIM; d++) {
            double want = 0;
            for (long g = 0; g < nkeys; g++)
                want += std::exp(s[g] - m) / l * value_val(g, d, it);
            bad += std::fabs(out[h * DIM + d] - want) > 1e-3 * std::fabs(want) + 1e-3;
        }
    }
    return bad;
}

static int arg_int(int argc, char **argv, const char *name, int dflt)
{
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], name) == 0)
            return atoi(argv[i + 1]);
    return dflt;
}

static void ctx_open(decode_ctx *c, int keys)
{
    int ndev = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &c->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &c->nranks);
    CK(cudaGetDeviceCount(&ndev));
    CK(cudaSetDevice(c->rank % ndev));
    ncclUniqueId id;
    if (c->rank == 0)
        NK(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    NK(ncclCommInitRank(&c->comm, c->nranks, id, c->rank));
    CK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    c->keys = keys;
    std::vector<float> hx(HEADS * DIM);
    for (int i = 0; i < HEADS * DIM; i++)
        hx[i] = (float)(i % 9);
    CK(cudaMalloc(&c->x, HEADS * DIM * sizeof(float)));
    CK(cudaMalloc(&c->q, HEADS * DIM * sizeof(float)));
    CK(cudaMalloc(&c->out, HEADS * DIM * sizeof(float)));
    CK(cudaMalloc(&c->slice, (size_t)keys * ROW * sizeof(float)));
    CK(cudaMalloc(&c->cache, (size_t)keys * c->nranks * ROW * sizeof(float)));
    CK(cudaMemcpy(c->x, hx.data(), HEADS * DIM * sizeof(float), cudaMemcpyHostToDevice));
}

static void ctx_close(decode_ctx *c)
{
    CK(cudaFree(c->x));
    CK(cudaFree(c->q));
    CK(cudaFree(c->out));
    CK(cudaFree(c->slice));
    CK(cudaFree(c->cache));
    CK(cudaStreamDestroy(c->stream));
    NK(ncclCommDestroy(c->comm));
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    decode_ctx c;
    ctx_open(&c, arg_int(argc, argv, "--keys", 16384));
    const int iters = 3;
    for (int it = 0; it < iters; it++)
        decode_step(&c, it);
    CK(cudaStreamSynchronize(c.stream));
    std::vector<float> host(HEADS * DIM);
    CK(cudaMemcpy(host.data(), c.out, host.size() * sizeof(float), cudaMemcpyDeviceToHost));
    int bad = verify(&c, host, iters - 1), bad_all = 0;
    MPI_Allreduce(&bad, &bad_all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (c.rank == 0)
        printf("Verification: %s\n", bad_all ? "FAIL wrong attention outputs" : "PASS");
    auto t0 = std::chrono::steady_clock::now();
    for (int it = 0; it < 10; it++)
        decode_step(&c, it);
    CK(cudaStreamSynchronize(c.stream));
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / 10;
    if (c.rank == 0)
        printf("CUCO_RESULT {\"time_ms\": %.6f, \"iters\": 10}\n", ms);
    ctx_close(&c);
    MPI_Finalize();
    return bad_all != 0;
}
