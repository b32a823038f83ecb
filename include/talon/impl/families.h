/* talon/impl/families.h - every family's host code (validate -> plan -> launch), after the
   core and the shared validation rules. Part of talon.h's implementation
   (TALON_IMPLEMENTATION); not a public header. */
#ifndef TALON_IMPL_FAMILIES_H
#define TALON_IMPL_FAMILIES_H

#ifdef __cplusplus
extern "C" {
#endif

#include "validate.h"
#include "paged_kv.h"
#include "tma.h"
#include "norm.h"
#include "act.h"
#include "topk_plan.h"
#include "topk.h"
#include "rope.h"
#include "kv_cache.h"
#include "moe_plan.h"
#include "moe.h"
#include "router.h"
#include "decode_plan.h"
#include "decode.h"
#include "gemm_plan.h"
#include "gemm.h"
#include "quant.h"
#include "prefill.h"
#include "moe_gemm_plan.h"
#include "moe_gemm.h"
#include "gather.h"

#ifdef __cplusplus
}
#endif
#endif
