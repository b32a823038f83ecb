// A ring of STAGES shared-memory stages between one producer thread (TMA issue) and consumer
// threads, on two mbarriers per stage:
//   full[s]:  1 arrival (the producer's arrive_expect_tx) + the stage's TMA bytes; or, filled
//             by cp.async, one arrival per producing thread (cp_async_mbar_arrive_noinc).
//   empty[s]: `consumers` arrivals (e.g. 256 = every thread of two consumer warpgroups, each
//             arriving after its wgmmas on the stage have been waited on).
// Both sides walk the ring with a PipeState (stage index, phase parity). The producer's first
// pass waits on the empty barriers' "preceding" phase (parity 1), which counts as complete
// on a fresh barrier, so the ring starts all-empty without pre-arrivals.
#pragma once
#include <cstdint>
#include "mbarrier.cuh"

namespace talon::dev {

template <int STAGES> struct PipeState {
    uint32_t stage = 0, phase = 0;
    __device__ __forceinline__ void advance() {
        if (++stage == STAGES) {
            stage = 0;
            phase ^= 1;
        }
    }
    // n stages on at once (a consumer passing over stages that another one takes)
    __device__ __forceinline__ void skip(uint32_t n) {
        stage += n;
        phase ^= (stage / STAGES) & 1;
        stage %= STAGES;
    }
};

template <int STAGES> struct Pipeline {
    uint64_t full[STAGES];
    uint64_t empty[STAGES];

    // One thread; then __syncthreads() (cluster_sync() if other CTAs arrive here). producers:
    // arrivals that fill a stage (1: the TMA producer's arrive_expect_tx; n: n threads'
    // cp_async_mbar_arrive_noinc).
    __device__ __forceinline__ void init(uint32_t consumers, uint32_t producers = 1) {
#pragma unroll
        for (int s = 0; s < STAGES; s++) {
            mbar_init(&full[s], producers);
            mbar_init(&empty[s], consumers);
        }
        mbar_fence_init();
    }

    // Producer: wait until consumers released stage st.stage; returns its full barrier, to hand
    // to the TMA loads after producer_commit.
    __device__ __forceinline__ uint64_t *producer_acquire(const PipeState<STAGES> &st) {
        mbar_wait(&empty[st.stage], st.phase ^ 1);
        return &full[st.stage];
    }
    // Producer: announce the stage's total TMA bytes (arrives once on full).
    __device__ __forceinline__ void producer_commit(const PipeState<STAGES> &st, uint32_t tx_bytes) {
        mbar_arrive_expect_tx(&full[st.stage], tx_bytes);
    }
    // Consumers: wait until the stage's data has landed.
    __device__ __forceinline__ void consumer_wait(const PipeState<STAGES> &st) {
        mbar_wait(&full[st.stage], st.phase);
    }
    // Consumers: done reading the stage (every one of the `consumers` arrivals).
    __device__ __forceinline__ void consumer_release(const PipeState<STAGES> &st) {
        mbar_arrive(&empty[st.stage]);
    }
};

} // namespace talon::dev
