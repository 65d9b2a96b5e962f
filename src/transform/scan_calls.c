/* scan_calls.c: what the scans know of calls by name (scan_int.h): the
 * calls that synchronise, that launch work, that launch through an array of
 * argument pointers, and the host calls that touch nothing but their
 * arguments; and where a statement of a block ends. Read by the scan of a
 * block (schedule_scan.c) and by what a call may do (scan_callee.c). */
#include "scan_int.h"

/* Index after the statement that starts at i, inside a block closing at end. */
size_t scan_stmt_after(const sview *v, size_t i, size_t end)
{
    if (i >= end)
        return end;
    if (is(v, i, "{"))
        return close_of(v, i) + 1;
    if (is(v, i, "if") || is(v, i, "for") || is(v, i, "while") || is(v, i, "switch") ||
        is(v, i, "catch")) {
        size_t k = i + 1;
        if (is(v, k, "constexpr"))
            k++;
        if (!is(v, k, "("))
            return end;
        size_t b = scan_stmt_after(v, close_of(v, k) + 1, end);
        if (is(v, i, "if") && b < end && is(v, b, "else"))
            b = scan_stmt_after(v, b + 1, end);
        return b;
    }
    if (is(v, i, "do")) {
        size_t b = scan_stmt_after(v, i + 1, end);
        if (is(v, b, "while") && is(v, b + 1, "("))
            b = close_of(v, b + 1) + 1;
        return b < end && is(v, b, ";") ? b + 1 : b;
    }
    if (is(v, i, "try")) {
        size_t b = scan_stmt_after(v, i + 1, end);
        while (b < end && is(v, b, "catch"))
            b = scan_stmt_after(v, b, end);
        return b;
    }
    if (is(v, i, "case") || is(v, i, "default") || (ident(v, i) && is(v, i + 1, ":"))) {
        size_t k = i;
        while (k < end && !is(v, k, ":"))
            k++;
        return k < end ? k + 1 : end;
    }
    int d = 0;
    for (size_t k = i; k < end; k++) {
        if (is(v, k, "(") || is(v, k, "[") || is(v, k, "{"))
            d++;
        else if (is(v, k, ")") || is(v, k, "]") || is(v, k, "}"))
            d--;
        else if (d == 0 && is(v, k, ";"))
            return k + 1;
    }
    return end;
}

const char *const scan_sync_calls[] = {"cudaStreamSynchronize",
                                       "cudaDeviceSynchronize",
                                       "cudaEventSynchronize",
                                       "cudaEventRecord",
                                       "cudaEventRecordWithFlags",
                                       "cudaStreamWaitEvent",
                                       "cudaEventQuery",
                                       "cudaStreamQuery",
                                       "cudaEventElapsedTime",
                                       "cudaMemcpy",
                                       "cudaMemset",
                                       "cudaMemcpyToSymbol",
                                       "cudaMemcpyFromSymbol",
                                       "cudaMemcpy2D",
                                       "cudaFree",
                                       "cudaFreeAsync",
                                       "cudaFreeHost",
                                       "cudaGraphLaunch",
                                       "cudaStreamDestroy",
                                       "cudaStreamBeginCapture",
                                       "cudaStreamEndCapture",
                                       "cudaDeviceReset",
                                       "symm_free",
                                       "symm_free_async",
                                       "cudaMemPrefetchAsync",
                                       "cudaLaunchHostFunc",
                                       "cudaStreamAddCallback",
                                       "cudaStreamAttachMemAsync",
                                       "cudaMemcpyPeer",
                                       "cudaMemcpy3D",
                                       "cudaMemcpy3DPeer",
                                       "cudaMemcpyToArray",
                                       "cudaMemcpyFromArray",
                                       "cudaMemcpy2DToArray",
                                       "cudaMemcpy2DFromArray",
                                       "cudaThreadSynchronize",
                                       "cuStreamSynchronize",
                                       "cuCtxSynchronize",
                                       "cuEventSynchronize",
                                       "cuEventRecord",
                                       "cuEventRecordWithFlags",
                                       "cuStreamWaitEvent",
                                       "cuStreamQuery",
                                       "cuEventQuery",
                                       "cuMemcpy",
                                       "cuMemcpyDtoH",
                                       "cuMemcpyHtoD",
                                       "cuMemcpyDtoD",
                                       "cuMemsetD8",
                                       "cuMemsetD32",
                                       "cuMemFree",
                                       "cuGraphLaunch",
                                       "cuStreamBeginCapture",
                                       "cuStreamEndCapture",
                                       "cuLaunchHostFunc",
                                       NULL};
const char *const scan_work_calls[] = {"cudaMemcpyAsync",   "cudaMemsetAsync", "cudaMemcpy2DAsync",
                                       "cudaMemcpy3DAsync", "cublasLtMatmul",  NULL};
/* launches that take the kernel's arguments as an array of pointers: what
 * they read is not in the text, so they count as reading every buffer */
const char *const scan_indirect_launches[] = {"cudaLaunchKernel",
                                              "cudaLaunchCooperativeKernel",
                                              "cudaLaunchKernelEx",
                                              "cudaLaunchKernelExC",
                                              "cuLaunchKernel",
                                              "cuLaunchKernelEx",
                                              "cuLaunchCooperativeKernel",
                                              NULL};
/* host calls that touch no device buffer but their arguments */
const char *const scan_plain_calls[] = {"printf",
                                        "fprintf",
                                        "puts",
                                        "snprintf",
                                        "cudaGetLastError",
                                        "cudaPeekAtLastError",
                                        "cudaGetErrorString",
                                        "cudaGetDevice",
                                        "cudaSetDevice",
                                        "cudaEventCreate",
                                        "cudaEventCreateWithFlags",
                                        "cudaStreamCreate",
                                        "cudaStreamCreateWithFlags",
                                        "cudaStreamCreateWithPriority",
                                        "cudaMalloc",
                                        "cudaMallocAsync",
                                        "cublasSetStream",
                                        "cublasSetMathMode",
                                        "cublasSetWorkspace",
                                        "dim3",
                                        "min",
                                        "max",
                                        "abs",
                                        "fabs",
                                        "sqrt",
                                        "ceil",
                                        "floor",
                                        "exp",
                                        "log",
                                        "make_float2",
                                        "make_float4",
                                        "__float2half",
                                        "__half2float",
                                        "std::min",
                                        "std::max",
                                        "std::abs",
                                        "std::ceil",
                                        "std::sqrt",
                                        "std::move",
                                        "std::to_string",
                                        NULL};

const char *const scan_data_calls[] = {
    "ncclAllGather", "ncclReduceScatter", "ncclAllReduce",  "ncclBroadcast", "ncclBcast",
    "ncclReduce",    "ncclAlltoAll",      "ncclAllToAll",   "ncclGather",    "ncclScatter",
    "ncclSend",      "ncclRecv",          "ncclGroupStart", "ncclGroupEnd",  NULL};
