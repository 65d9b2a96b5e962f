// Error checking for the device library's host code: every CUDA and NCCL call
// goes through a macro that reports the call text, file and line and makes the
// enclosing function return -1 (the library never exits the process).
#pragma once
#include <cstdio>
#include <cuda_runtime.h>
#include <nccl.h>

#define CUCO_CUDA_TRY(call)                                                        \
  do {                                                                             \
    cudaError_t cuco_e_ = (call);                                                  \
    if (cuco_e_ != cudaSuccess) {                                                  \
      std::fprintf(stderr, "cuco device: %s:%d: %s failed: %s\n", __FILE__,       \
                   __LINE__, #call, cudaGetErrorString(cuco_e_));                  \
      return -1;                                                                   \
    }                                                                              \
  } while (0)

#define CUCO_NCCL_TRY(call)                                                        \
  do {                                                                             \
    ncclResult_t cuco_r_ = (call);                                                 \
    if (cuco_r_ != ncclSuccess) {                                                  \
      std::fprintf(stderr, "cuco device: %s:%d: %s failed: %s (%s)\n", __FILE__,  \
                   __LINE__, #call, ncclGetErrorString(cuco_r_),                   \
                   ncclGetLastError(nullptr));                                     \
      return -1;                                                                   \
    }                                                                              \
  } while (0)

// Checks a condition on arguments; the message is a printf format.
#define CUCO_ARG_TRY(cond, ...)                                                    \
  do {                                                                             \
    if (!(cond)) {                                                                 \
      std::fprintf(stderr, "cuco device: %s:%d: %s: ", __FILE__, __LINE__, #cond); \
      std::fprintf(stderr, __VA_ARGS__);                                           \
      std::fputc('\n', stderr);                                                    \
      return -1;                                                                   \
    }                                                                              \
  } while (0)

// Propagates a -1 from a library call.
#define CUCO_TRY(call)                                                             \
  do {                                                                             \
    if ((call) != 0) {                                                             \
      std::fprintf(stderr, "cuco device: %s:%d: %s failed\n", __FILE__, __LINE__, \
                   #call);                                                         \
      return -1;                                                                   \
    }                                                                              \
  } while (0)
