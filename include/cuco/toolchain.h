/* toolchain.h: where the compilers and NCCL are on this machine.
 * NCCL is looked for in $NCCL_HOME, then the CUDA toolkit ($CUDA_HOME or
 * /usr/local/cuda), then the system paths (/usr/include,
 * /usr/lib/x86_64-linux-gnu); the first folder holding nccl.h wins, and its
 * library folder must hold libnccl.so.2 of the same version. */
#ifndef CUCO_TOOLCHAIN_H
#define CUCO_TOOLCHAIN_H

#include "cuco/err.h"

typedef struct cuco_toolchain {
    char *cuda_home;     /* e.g. /usr/local/cuda, or NULL */
    char *nvcc;          /* path, or NULL */
    char *nvcc_version;  /* "13.0", or NULL */
    char *nccl_include;  /* folder holding nccl.h, or NULL */
    char *nccl_lib;      /* folder holding libnccl.so.2, or NULL */
    char *nccl_source;   /* "NCCL_HOME", "CUDA toolkit" or "system" */
    int nccl_version;    /* NCCL_VERSION_CODE from nccl.h, e.g. 22809; 0 unknown */
    int nccl_device_api; /* 1 if nccl_device.h is there */
    int nccl_gin;        /* 1 if nccl_device/gin.h is there (GIN headers, >= 2.28.7) */
    char *mpicc;         /* path, or NULL */
    char *mpirun;        /* path, or NULL */
} cuco_toolchain;

/* Detects; never fails for missing pieces (they stay NULL/0). */
int cuco_toolchain_detect(cuco_toolchain *tc, cuco_err *e);
void cuco_toolchain_free(cuco_toolchain *tc);

#endif
