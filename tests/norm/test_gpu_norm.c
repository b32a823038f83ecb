/* GPU tests (H100/H200) of the norms (talon_rmsnorm, talon_fused_add_rmsnorm, talon_layernorm
   with and without bias): the program of tests/common/opcheck_tests.h over these ops, every
   output element against the fp64 reference of tests/common/opcheck.h. */
#include "opcheck_tests.h"

int main(void) {
    static const opcheck_op ops[] = {OPCHECK_RMSNORM, OPCHECK_FUSED_ADD_RMSNORM,
                                     OPCHECK_LAYERNORM, OPCHECK_LAYERNORM_BIAS};
    return opcheck_tests_main("test_gpu_norm", "talon GPU norms", ops, COUNT(ops));
}
