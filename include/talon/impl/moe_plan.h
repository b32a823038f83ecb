/* talon/impl/moe_plan.h - the moe family's plans: which moe_align kernel and grid, and
   moe_sum's slices per thread, from host values alone. Pure host functions the tests call
   directly. Part of talon.h's implementation (TALON_IMPLEMENTATION); not a public header. */
#ifndef TALON_IMPL_MOE_PLAN_H
#define TALON_IMPL_MOE_PLAN_H

typedef struct talon__moe_align_plan {
    int ids;      /* register kernels: ids the cluster holds at most; 0: the looped kernel */
    int cluster;  /* 1 or TALON__MOE_ALIGN_CLUSTER */
    int block;    /* threads per block */
    int sliced;   /* one-block problems over several blocks, each writing a slice */
    int64_t grid; /* blocks */
    int chunk;    /* ids per warp, a multiple of 32 */
    int64_t sorted_slice, expert_ids_slice; /* per block of the sliced kernel; else 0 */
} talon__moe_align_plan;

/* n = tokens * k ids: held in registers by one block (<= SMALL_MAX), by a cluster of 8 (two
   sizes), else the looped cluster. One block's problem is spread over a block per SLICE slots
   of sorted_token_ids (at most SLICES_MAX) so the sentinel fill runs on many SMs. */
static talon__moe_align_plan talon__moe_align_plan_make(int64_t n, int64_t sorted_capacity,
                                                       int64_t expert_ids_capacity) {
    talon__moe_align_plan pl;
    memset(&pl, 0, sizeof pl);
    pl.ids = n <= TALON__MOE_ALIGN_SMALL_MAX ? TALON__MOE_ALIGN_SMALL_MAX
             : n <= TALON__MOE_ALIGN_C8_MAX  ? TALON__MOE_ALIGN_C8_MAX
             : n <= TALON__MOE_ALIGN_C8W_MAX ? TALON__MOE_ALIGN_C8W_MAX : 0;
    pl.cluster = n <= TALON__MOE_ALIGN_SMALL_MAX ? 1 : TALON__MOE_ALIGN_CLUSTER;
    pl.block = pl.ids ? 512 : 1024;
    pl.chunk = (int)((n + pl.block * pl.cluster - 1) / (pl.block * pl.cluster) * 32);
    pl.grid = pl.cluster;
    if (pl.cluster == 1 && sorted_capacity > TALON__MOE_ALIGN_SLICE) {
        pl.grid = (sorted_capacity + TALON__MOE_ALIGN_SLICE - 1) / TALON__MOE_ALIGN_SLICE;
        if (pl.grid > TALON__MOE_ALIGN_SLICES_MAX) pl.grid = TALON__MOE_ALIGN_SLICES_MAX;
        pl.sorted_slice = ((sorted_capacity + pl.grid - 1) / pl.grid + 3) & ~(int64_t)3;
        pl.expert_ids_slice = (expert_ids_capacity + pl.grid - 1) / pl.grid;
        pl.sliced = 1;
    }
    return pl;
}

/* moe_sum: 16-byte slices of hidden per thread, so that each keeps eight 16-byte loads in
   flight as k = 8 does (kernels/moe/moe.cu): 4 for k <= 2, 2 for k <= 4, else 1 (and 1 off
   the 16-byte path). */
static int talon__moe_sum_slices(int vec, int64_t k) {
    return vec == 8 && k <= 2 ? 4 : vec == 8 && k <= 4 ? 2 : 1;
}

#endif
