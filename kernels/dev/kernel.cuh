// The one way a kernel is defined: every kernel source ends with
//     TALON__KERNELS_<image>(TALON_DEV_KERNEL)
// which emits, for each row of include/talon/kernels/<family>.def,
//     extern "C" __global__ void __launch_bounds__(block, min_blocks) [__cluster_dims__(cluster)]
//     symbol(const __grid_constant__ params p) { talon::<image>::body<targs>(p); }
// so launch bounds, cluster shape and template arguments all come from the table row.
#pragma once
#include "talon/kernels/common.def"
#include "vec.cuh"

// A compile-time cluster (a plain cuLaunchKernel forms it); size 1 means no cluster attribute.
#define TALON__DEV_CLUSTER_1
#define TALON__DEV_CLUSTER_2 __cluster_dims__(2, 1, 1)
#define TALON__DEV_CLUSTER_4 __cluster_dims__(4, 1, 1)
#define TALON__DEV_CLUSTER_8 __cluster_dims__(8, 1, 1)
#define TALON__DEV_CLUSTER_16 __cluster_dims__(16, 1, 1)
#define TALON__DEV_CLUSTER(n) TALON__DEV_CLUSTER_##n

#define TALON_DEV_KERNEL(sym, image, body, targs, block, min_blocks, cluster, smem, P)         \
    extern "C" __global__ void __launch_bounds__(block, min_blocks) TALON__DEV_CLUSTER(cluster)  \
        sym(const __grid_constant__ P p) {                                                     \
        talon::image::body<TALON__UNPAREN targs>(p);                                           \
    }
