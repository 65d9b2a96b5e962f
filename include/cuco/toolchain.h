/* toolchain.h: where the compilers and NCCL are on this machine.
 * NCCL is looked for in $NCCL_HOME, then the CUDA toolkit ($CUDA_HOME or
 * /usr/local/cuda), then the system paths (/usr/include,
 * /usr/lib/x86_64-linux-gnu); the first folder holding nccl.h wins, and its
 * library folder must hold libnccl.so.2 of the same version. */
#ifndef CUCO_TOOLCHAIN_H
#define CUCO_TOOLCHAIN_H

#include "cuco/err.h"

typedef struct cuco_toolchain {
    char *cuda_home;      /* e.g. /usr/local/cuda, or NULL */
    char *nvcc;           /* path, or NULL */
    char *nvcc_version;   /* "13.0", or NULL */
    char *nccl_include;   /* folder holding nccl.h, or NULL */
    char *nccl_lib;       /* folder holding libnccl.so.2, or NULL */
    char *nccl_source;    /* "NCCL_HOME", "CUDA toolkit" or "system" */
    int nccl_version;     /* NCCL_VERSION_CODE from nccl.h, e.g. 22809; 0 unknown */
    int nccl_device_api;  /* 1 if nccl_device.h is there */
    int nccl_gin;         /* 1 if nccl_device/gin.h is there (GIN headers, >= 2.28.7) */
    int nccl_lib_version; /* from the "NCCL version X.Y.Z" text in libnccl.so.2,
                             coded as nccl_version; 0 unknown */
    char *mpicc;          /* path, or NULL */
    char *mpirun;         /* path, or NULL */
} cuco_toolchain;

/* Detects; never fails for missing pieces (they stay NULL/0). Runs
 * `nvcc --version` (through cuco_proc_run). Returns CUCO_ENOMEM only. Free
 * with cuco_toolchain_free(). */
int cuco_toolchain_detect(cuco_toolchain *tc, cuco_err *e);
void cuco_toolchain_free(cuco_toolchain *tc);

/* NCCL's version code for X.Y.Z, as NCCL_VERSION() in nccl.h computes it
 * (X*1000+Y*100+Z up to 2.8, X*10000+Y*100+Z from 2.9 on). */
int cuco_nccl_version_code(int major, int minor, int patch);
/* "2.28.9" for a version code, "unknown" for 0. Caller frees. */
char *cuco_nccl_version_string(int code);

#endif
