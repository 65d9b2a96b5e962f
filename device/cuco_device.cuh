// Umbrella header of cuco's device collective library (header-only CUDA C++
// on NCCL's device API). See docs/device.md.
#pragma once
#include "check.cuh"
#include "dtype.cuh"
#include "host.cuh"
#include "policy.cuh"
#include "lsa.cuh"
#include "launch.cuh"
#include "ce.cuh"
#include "gin.cuh"
#include "lend_plan.cuh"
#include "produce_plan.cuh"
