// gather.cu - out[r, :] = in[indices[r], :], rows copied bit for bit; an index outside
// [0, in_rows) gives a zero row (checked mode: and is recorded, by the row's first thread).
//
// Strategy: purely streaming, as act.cu. The grid is rows x chunks, one block of 256 threads
// per chunk of a row, each thread one unit (16 bytes on the aligned path, else one element).
// The index is read once per thread (the block's threads share its cache line).
#include "dev/check.cuh"
#include "dev/kernel.cuh"
#include "talon/kernels/gather.def"

namespace talon::gather {
using namespace talon::dev;

template <int UNIT> struct unit_type;
template <> struct unit_type<16> { using t = uint4; };
template <> struct unit_type<4> { using t = uint32_t; };
template <> struct unit_type<2> { using t = uint16_t; };
template <> struct unit_type<1> { using t = uint8_t; };

template <int UNIT> __device__ void gather_rows(const talon__gather_params &p) {
    using U = typename unit_type<UNIT>::t;
    const unsigned chunks = (unsigned)p.chunks;
    const int64_t row = blockIdx.x / chunks;
    const int64_t j = (int64_t)(blockIdx.x % chunks) * blockDim.x + threadIdx.x;
    if (j >= p.row_units) return;
    const int64_t src = p.index64 ? reinterpret_cast<const int64_t *>(p.indices)[row]
                                  : (int64_t)reinterpret_cast<const int32_t *>(p.indices)[row];
    U v{};
    if (src >= 0 && src < p.in_rows) v = reinterpret_cast<const U *>(p.in)[src * p.in_stride + j];
    else if (checking(p.check) && j == 0) check_fail(p.check, TALON__CHECK_GATHER_INDEX, row, src, p.in_rows);
    reinterpret_cast<U *>(p.out)[row * p.out_stride + j] = v;
}

} // namespace talon::gather

TALON__KERNELS_gather(TALON_DEV_KERNEL)
