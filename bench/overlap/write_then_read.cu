// write_then_read.cu: does the way a buffer was last written change how fast
// a kernel that re-reads it runs? One GPU. Each round a writer fills a
// buffer (BYTES, default 8 MiB) from a source buffer, then a reader is timed
// alone with events: sum_all (every block sums the whole buffer, an
// attention over all keys: 256 re-reads from L2) or gemm (cublasGemmEx,
// bf16, the buffer as the M x K operand A, K = N = 4096). Writers: none (the
// reader alone, after one fill); the copy engine (cudaMemcpyAsync); SM copy
// kernels of G CTAs of 512 threads, each CTA one contiguous chunk (cuco's
// LSA copy) or the grid striding over 16-byte vectors, with plain, streaming
// (st.global.cs) or write-through (st.global.wt) stores; an SM copy through
// a bounce buffer and the copy engine; and a writer followed by one read
// pass of R blocks (timed apart, as pass_ms). One JSON line a writer on
// stdout: the reader's median and min of REPS rounds.
// Usage: write_then_read [REPS] [BYTES] [sum_all|gemm]
// Build: nvcc -std=c++17 -arch=sm_90 -O3 write_then_read.cu -lcublas
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "readers.cuh"

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1); } } while (0)

enum { COPY_THREADS = 512 };
enum Store { PLAIN, STREAMING, WRITE_THROUGH };

__device__ __forceinline__ void store(int4 *d, int4 v, int how)
{
    if (how == STREAMING)
        __stcs(d, v);
    else if (how == WRITE_THROUGH)
        __stwt(d, v);
    else
        *d = v;
}

// each CTA copies one contiguous chunk, as cuco's push does
__global__ void copy_chunked(const int4 *s, int4 *d, size_t nvec, int how)
{
    size_t chunk = (nvec + gridDim.x - 1) / gridDim.x, c0 = blockIdx.x * chunk;
    size_t c1 = c0 + chunk < nvec ? c0 + chunk : nvec;
    for (size_t i = c0 + threadIdx.x; i < c1; i += blockDim.x)
        store(d + i, s[i], how);
}

__global__ void copy_strided(const int4 *s, int4 *d, size_t nvec, int how)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < nvec; i += (size_t)gridDim.x * blockDim.x)
        store(d + i, s[i], how);
}

struct Writer {
    const char *name;
    int kind;  /* 0 none, 1 copy engine, 2 chunked, 3 strided, 5 chunked + CE bounce */
    int ctas, how;
    int pass_blocks; /* > 0: one read pass of this many blocks after the write */
};

static void write(const Writer &w, const float *src, float *dst, float *bounce, size_t bytes)
{
    const int4 *s = reinterpret_cast<const int4 *>(src);
    int4 *d = reinterpret_cast<int4 *>(dst);
    size_t nvec = bytes / 16;
    switch (w.kind) {
    case 1: CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice)); break;
    case 2: copy_chunked<<<w.ctas, COPY_THREADS>>>(s, d, nvec, w.how); break;
    case 3: copy_strided<<<w.ctas, COPY_THREADS>>>(s, d, nvec, w.how); break;
    case 5:
        copy_chunked<<<w.ctas, COPY_THREADS>>>(s, reinterpret_cast<int4 *>(bounce), nvec, w.how);
        CK(cudaMemcpyAsync(dst, bounce, bytes, cudaMemcpyDeviceToDevice));
        break;
    default: break;
    }
}

static double elapsed(cudaEvent_t a, cudaEvent_t b)
{
    float t = 0;
    CK(cudaEventElapsedTime(&t, a, b));
    return t;
}

struct Reader {
    bool gemm;
    cublasHandle_t h;
    int m;
    __nv_bfloat16 *b, *c;
};

static void read(const Reader &rd, const float *dst, size_t bytes, float *out)
{
    if (!rd.gemm) {
        sum_all<<<256, READER_THREADS>>>(dst, bytes / sizeof(float), out);
        return;
    }
    const float one = 1.0f, zero = 0.0f;
    const int k = 4096, n = 4096;
    /* row-major A (m x k) read as column-major A^T: C^T = B^T A^T */
    if (cublasGemmEx(rd.h, CUBLAS_OP_N, CUBLAS_OP_N, n, rd.m, k, &one, rd.b, CUDA_R_16BF, n, dst, CUDA_R_16BF, k, &zero,
                     rd.c, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "cublasGemmEx failed\n");
        exit(1);
    }
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 20;
    const size_t bytes = argc > 2 ? strtoull(argv[2], NULL, 10) : (size_t)8 << 20;
    Reader rd = {argc > 3 && strcmp(argv[3], "gemm") == 0, nullptr, (int)(bytes / 2 / 4096), nullptr, nullptr};
    float *src, *dst, *bounce, *out;
    CK(cudaMalloc(&src, bytes));
    CK(cudaMalloc(&dst, bytes));
    CK(cudaMalloc(&bounce, bytes));
    CK(cudaMalloc(&out, 4096 * sizeof(float)));
    fill<<<1024, READER_THREADS>>>(src, bytes / sizeof(float));
    fill<<<1024, READER_THREADS>>>(dst, bytes / sizeof(float));
    if (rd.gemm) {
        if (cublasCreate(&rd.h) != CUBLAS_STATUS_SUCCESS)
            return 1;
        CK(cudaMalloc(&rd.b, (size_t)4096 * 4096 * 2));
        CK(cudaMalloc(&rd.c, (size_t)rd.m * 4096 * 2));
        fill<<<1024, READER_THREADS>>>(reinterpret_cast<float *>(rd.b), (size_t)4096 * 4096 / 2);
    }
    const Writer writers[] = {
        {"none", 0, 0, PLAIN, 0},
        {"copy_engine", 1, 0, PLAIN, 0},
        {"chunked_8", 2, 8, PLAIN, 0},
        {"chunked_32", 2, 32, PLAIN, 0},
        {"chunked_528", 2, 528, PLAIN, 0},
        {"strided_132", 3, 132, PLAIN, 0},
        {"chunked_32_cs", 2, 32, STREAMING, 0},
        {"chunked_32_wt", 2, 32, WRITE_THROUGH, 0},
        {"chunked_32_ce_bounce", 5, 32, PLAIN, 0},
        {"chunked_32_pass_32", 2, 32, PLAIN, 32},
        {"chunked_32_pass_132", 2, 32, PLAIN, 132},
        {"chunked_32_pass_1056", 2, 32, PLAIN, 1056},
        {"copy_engine_pass_1056", 1, 0, PLAIN, 1056},
    };
    cudaEvent_t a, b, c;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    CK(cudaEventCreate(&c));
    for (const Writer &w : writers) {
        std::vector<double> ms, pass;
        for (int r = 0; r < reps + 2; r++) {
            write(w, src, dst, bounce, bytes);
            CK(cudaEventRecord(c));
            if (w.pass_blocks)
                one_pass<<<w.pass_blocks, READER_THREADS>>>(reinterpret_cast<const float4 *>(dst), bytes / 16, out);
            CK(cudaEventRecord(a));
            read(rd, dst, bytes, out);
            CK(cudaEventRecord(b));
            CK(cudaEventSynchronize(b));
            if (r >= 2) {
                ms.push_back(elapsed(a, b));
                pass.push_back(elapsed(c, a));
            }
        }
        std::sort(ms.begin(), ms.end());
        std::sort(pass.begin(), pass.end());
        printf("{\"writer\":\"%s\",\"bytes\":%zu,\"reader\":\"%s\",\"median_ms\":%.4f,\"min_ms\":%.4f,"
               "\"pass_ms\":%.4f,\"reps\":%d}\n",
               w.name, bytes, rd.gemm ? "gemm" : "sum_all", ms[ms.size() / 2], ms.front(), pass[pass.size() / 2], reps);
    }
    CK(cudaFree(src));
    CK(cudaFree(dst));
    CK(cudaFree(bounce));
    CK(cudaFree(out));
    return 0;
}
