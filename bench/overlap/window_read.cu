// window_read.cu: does a kernel read memory that cuco moved into a symmetric
// window (ncclMemAlloc, registered with ncclCommWindowRegister) as fast as
// memory from cudaMalloc? One GPU, one rank. Two readers: every block sums
// the whole buffer (an attention over all keys: L2-resident re-reads), and
// one pass over the buffer (HBM streaming). Allocations: cudaMalloc;
// ncclMemAlloc; ncclMemAlloc registered as a window of a 1-rank
// communicator. One JSON line a (allocation, bytes, reader) on stdout:
// median and min of --reps timed launches.
// Build: nvcc -std=c++17 -arch=sm_90 -O3 -I$NCCL_HOME/include window_read.cu
//        -L$NCCL_HOME/lib -l:libnccl.so.2
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "readers.cuh"

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1); } } while (0)
#define NK(x) do { ncclResult_t r_ = (x); if (r_ != ncclSuccess) { fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, ncclGetErrorString(r_)); exit(1); } } while (0)


static double time_reader(const char *reader, const float *p, size_t bytes, float *out, int reps, double *min_ms)
{
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    std::vector<double> ms;
    for (int r = 0; r < reps + 2; r++) {
        CK(cudaEventRecord(a));
        if (strcmp(reader, "sum_all") == 0)
            sum_all<<<256, READER_THREADS>>>(p, bytes / sizeof(float), out);
        else
            one_pass<<<1056, READER_THREADS>>>(reinterpret_cast<const float4 *>(p), bytes / 16, out);
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        float t = 0;
        CK(cudaEventElapsedTime(&t, a, b));
        if (r >= 2)
            ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    *min_ms = ms.front();
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    return ms[ms.size() / 2];
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 30;
    ncclComm_t comm;
    int dev = 0;
    NK(ncclCommInitAll(&comm, 1, &dev));
    float *out;
    CK(cudaMalloc(&out, 4096 * sizeof(float)));
    const size_t sizes[] = {(size_t)8 << 20, (size_t)512 << 20};
    const char *allocs[] = {"cudaMalloc", "ncclMemAlloc", "window"};
    const char *readers[] = {"sum_all", "one_pass"};
    for (size_t s : sizes)
        for (const char *al : allocs) {
            void *p = nullptr;
            ncclWindow_t win = nullptr;
            if (strcmp(al, "cudaMalloc") == 0)
                CK(cudaMalloc(&p, s));
            else
                NK(ncclMemAlloc(&p, s));
            if (strcmp(al, "window") == 0)
                NK(ncclCommWindowRegister(comm, p, s, &win, NCCL_WIN_COLL_SYMMETRIC));
            fill<<<1024, READER_THREADS>>>(static_cast<float *>(p), s / sizeof(float));
            CK(cudaDeviceSynchronize());
            for (const char *rd : readers) {
                if (strcmp(rd, "sum_all") == 0 && s > ((size_t)64 << 20))
                    continue; /* 256 re-reads of 512 MiB: not the case in question */
                double mn = 0, med = time_reader(rd, static_cast<const float *>(p), s, out, reps, &mn);
                printf("{\"alloc\":\"%s\",\"bytes\":%zu,\"reader\":\"%s\",\"median_ms\":%.4f,\"min_ms\":%.4f,\"reps\":%d}\n", al,
                       s, rd, med, mn, reps);
            }
            if (win)
                NK(ncclCommWindowDeregister(comm, win));
            if (strcmp(al, "cudaMalloc") == 0)
                CK(cudaFree(p));
            else
                NK(ncclMemFree(p));
        }
    CK(cudaFree(out));
    NK(ncclCommDestroy(comm));
    return 0;
}
