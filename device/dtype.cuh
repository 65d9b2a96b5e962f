// Element types the reductions support and how they accumulate: float and
// int32 in their own type, __half and __nv_bfloat16 in float. Pack<T> is one
// 16-byte vector of T with its accumulator.
#pragma once
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <nccl.h>

namespace cuco {

template <typename T> struct DType;
template <> struct DType<float> {
  using Acc = float;
  static constexpr ncclDataType_t nccl = ncclFloat32;
  static constexpr const char* name = "float";
  __device__ static Acc to(float v) { return v; }
  __device__ static float from(Acc a) { return a; }
};
template <> struct DType<int32_t> {
  using Acc = int32_t;
  static constexpr ncclDataType_t nccl = ncclInt32;
  static constexpr const char* name = "int32";
  __device__ static Acc to(int32_t v) { return v; }
  __device__ static int32_t from(Acc a) { return a; }
};
template <> struct DType<__half> {
  using Acc = float;
  static constexpr ncclDataType_t nccl = ncclFloat16;
  static constexpr const char* name = "half";
  __device__ static Acc to(__half v) { return __half2float(v); }
  __device__ static __half from(Acc a) { return __float2half_rn(a); }
};
template <> struct DType<__nv_bfloat16> {
  using Acc = float;
  static constexpr ncclDataType_t nccl = ncclBfloat16;
  static constexpr const char* name = "bf16";
  __device__ static Acc to(__nv_bfloat16 v) { return __bfloat162float(v); }
  __device__ static __nv_bfloat16 from(Acc a) { return __float2bfloat16_rn(a); }
};

// 16 bytes of T, accumulated in DType<T>::Acc.
template <typename T> struct Pack {
  static constexpr int n = 16 / sizeof(T);
  typename DType<T>::Acc a[n];
  __device__ __forceinline__ void set(int4 raw) {
    const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
    for (int i = 0; i < n; i++) a[i] = DType<T>::to(e[i]);
  }
  __device__ __forceinline__ void add(int4 raw) {
    const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
    for (int i = 0; i < n; i++) a[i] += DType<T>::to(e[i]);
  }
  __device__ __forceinline__ int4 get() const {
    int4 raw;
    T* e = reinterpret_cast<T*>(&raw);
#pragma unroll
    for (int i = 0; i < n; i++) e[i] = DType<T>::from(a[i]);
    return raw;
  }
};

}  // namespace cuco
