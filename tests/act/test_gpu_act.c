/* GPU tests (H100/H200) of the gated activations (talon_silu_and_mul, talon_gelu_and_mul with
   erf and tanh): the program of tests/common/opcheck_tests.h over these ops, every output
   element against the fp64 reference of tests/common/opcheck.h. */
#include "opcheck_tests.h"

int main(void) {
    static const opcheck_op ops[] = {OPCHECK_SILU, OPCHECK_GELU_ERF, OPCHECK_GELU_TANH};
    return opcheck_tests_main("test_gpu_act", "talon GPU activations", ops, COUNT(ops));
}
