/* init_all_single.cu: one process drives every visible GPU.
 *
 * ncclCommInitAll creates one communicator per device; every step fills
 * each device's buffer with a device-specific pattern, then an all-reduce is
 * issued for every device from a loop inside ncclGroupStart/ncclGroupEnd,
 * and each device's stream is synchronized in a second loop. Buffers and
 * streams are arrays indexed by device, as in NCCL's single-process example.
 *
 * Check: the host sums the patterns of all devices and compares the result
 * on each device.
 *
 * ./init_all_single [count] [ndev] [timed_iters]
 */
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CUDACHECK(cmd)                                                                     \
    do {                                                                                   \
        cudaError_t err = cmd;                                                             \
        if (err != cudaSuccess) {                                                          \
            printf("Failed: Cuda error %s:%d '%s'\n", __FILE__, __LINE__,                  \
                   cudaGetErrorString(err));                                               \
            exit(EXIT_FAILURE);                                                            \
        }                                                                                  \
    } while (0)

#define NCCLCHECK(cmd)                                                                     \
    do {                                                                                   \
        ncclResult_t res = cmd;                                                            \
        if (res != ncclSuccess) {                                                          \
            printf("Failed, NCCL error %s:%d '%s'\n", __FILE__, __LINE__,                  \
                   ncclGetErrorString(res));                                               \
            exit(EXIT_FAILURE);                                                            \
        }                                                                                  \
    } while (0)

__host__ __device__ static float pattern(size_t i, int dev) { return (float)((i * 13 + (size_t)dev * 5) % 19) - 9.0f; }

__global__ void fill(float *p, size_t n, int dev)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = pattern(i, dev);
}

static void all_reduce_step(int ndev, float **sendbuff, float **recvbuff, size_t count, ncclComm_t *comms,
                            cudaStream_t *s)
{
    for (int i = 0; i < ndev; ++i) {
        CUDACHECK(cudaSetDevice(i));
        fill<<<128, 256, 0, s[i]>>>(sendbuff[i], count, i);
    }
    NCCLCHECK(ncclGroupStart());
    for (int i = 0; i < ndev; ++i)
        NCCLCHECK(ncclAllReduce((const void *)sendbuff[i], (void *)recvbuff[i], count, ncclFloat, ncclSum,
                                comms[i], s[i]));
    NCCLCHECK(ncclGroupEnd());
    for (int i = 0; i < ndev; ++i) {
        CUDACHECK(cudaSetDevice(i));
        CUDACHECK(cudaStreamSynchronize(s[i]));
    }
}

int main(int argc, char *argv[])
{
    size_t count = argc > 1 ? strtoull(argv[1], NULL, 10) : 32 * 1024 * 1024;
    int visible = 0;
    CUDACHECK(cudaGetDeviceCount(&visible));
    int ndev = argc > 2 ? atoi(argv[2]) : visible;
    int timed = argc > 3 ? atoi(argv[3]) : 10;
    if (ndev < 1 || ndev > visible)
        ndev = visible;

    std::vector<ncclComm_t> comms(ndev);
    std::vector<int> devs(ndev);
    for (int i = 0; i < ndev; ++i)
        devs[i] = i;
    float **sendbuff = (float **)malloc(ndev * sizeof(float *));
    float **recvbuff = (float **)malloc(ndev * sizeof(float *));
    cudaStream_t *s = (cudaStream_t *)malloc(sizeof(cudaStream_t) * ndev);
    for (int i = 0; i < ndev; ++i) {
        CUDACHECK(cudaSetDevice(i));
        CUDACHECK(cudaMalloc((void **)sendbuff + i, count * sizeof(float)));
        CUDACHECK(cudaMalloc((void **)recvbuff + i, count * sizeof(float)));
        CUDACHECK(cudaMemset(recvbuff[i], 0, count * sizeof(float)));
        CUDACHECK(cudaStreamCreate(s + i));
    }
    NCCLCHECK(ncclCommInitAll(comms.data(), ndev, devs.data()));

    all_reduce_step(ndev, sendbuff, recvbuff, count, comms.data(), s);
    long bad = 0;
    std::vector<float> got(count);
    for (int i = 0; i < ndev; ++i) {
        CUDACHECK(cudaSetDevice(i));
        CUDACHECK(cudaMemcpy(got.data(), recvbuff[i], count * sizeof(float), cudaMemcpyDeviceToHost));
        for (size_t k = 0; k < count; ++k) {
            float ref = 0.0f;
            for (int d = 0; d < ndev; ++d)
                ref += pattern(k, d);
            if (fabsf(got[k] - ref) > 1e-5f * std::max(1.0f, fabsf(ref)))
                bad++;
        }
    }

    std::vector<double> times;
    for (int it = 0; it < timed + 2; ++it) {
        auto t0 = std::chrono::steady_clock::now();
        all_reduce_step(ndev, sendbuff, recvbuff, count, comms.data(), s);
        auto t1 = std::chrono::steady_clock::now();
        if (it >= 2)
            times.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    }
    std::sort(times.begin(), times.end());
    if (bad == 0)
        printf("Verification: PASS\n");
    else
        printf("Verification: FAIL %ld elements differ from the host sum\n", bad);
    printf("CUCO_RESULT {\"time_ms\": %.6f, \"iters\": %d, \"devices\": %d}\n",
           times.empty() ? 0.0 : times[times.size() / 2], timed, ndev);

    for (int i = 0; i < ndev; ++i) {
        CUDACHECK(cudaSetDevice(i));
        CUDACHECK(cudaFree(sendbuff[i]));
        CUDACHECK(cudaFree(recvbuff[i]));
        CUDACHECK(cudaStreamDestroy(s[i]));
    }
    for (int i = 0; i < ndev; ++i)
        ncclCommDestroy(comms[i]);
    free(sendbuff);
    free(recvbuff);
    free(s);
    return bad != 0;
}
