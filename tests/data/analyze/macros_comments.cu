// Calls wrapped in check macros; calls in comments and strings are not calls.
#include <nccl.h>
#include <cstdio>
#define NCCLCHECK(cmd) do { ncclResult_t r_ = cmd; if (r_ != ncclSuccess) { \
    printf("NCCL error %s\n", ncclGetErrorString(r_)); } } while (0)
#define CUDACHECK(cmd) do { cudaError_t e_ = cmd; (void)e_; } while (0)

/* ncclAllReduce(a, b, 1, ncclFloat, ncclSum, comm, s); must not count */
void run(ncclComm_t comm, cudaStream_t s, float *sendbuf, float *recvbuf, size_t n)
{
    const char *msg = "ncclBroadcast(x, y, 1, ncclFloat, 0, comm, s);";
    // ncclReduceScatter(x, y, n, ncclFloat, ncclSum, comm, s);
    const char *raw = R"(ncclAllGather(a, b, 1, ncclFloat, comm, s);)";
    NCCLCHECK(ncclAllReduce((const void *)sendbuf, recvbuf, n, ncclFloat, ncclSum, comm, s));
    CUDACHECK(cudaStreamSynchronize(s));
    (void)msg; (void)raw;
}

/* A macro that hides the collective itself: reported as a note at its use. */
#define ALLREDUCE_SUM(buf, n, comm, s) ncclAllReduce(buf, buf, n, ncclFloat, ncclSum, comm, s)
void hidden(ncclComm_t comm, cudaStream_t s, float *buf) { ALLREDUCE_SUM(buf, 8, comm, s); }
