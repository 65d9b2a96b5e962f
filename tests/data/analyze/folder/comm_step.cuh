#pragma once
#include <nccl.h>
static ncclComm_t g_comm;
static void run_step(float *x) { ncclReduceScatter(x, x, 4, ncclFloat, ncclSum, g_comm, 0); }
