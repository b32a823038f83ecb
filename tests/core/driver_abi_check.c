/* Compile-time check: every driver entry point that talon (and the GPU test helpers) resolve
   with cuGetProcAddress is declared with the signature of the ABI version it asks for, i.e.
   each table field has the type cudaTypedefs.h gives PFN_<name>_v<version>. A mismatch would
   make the driver hand back a function with another signature: a crash, not an error. */
#define TALON_IMPLEMENTATION
#include "talon.h"
#include "gpu.h"
#include <cudaTypedefs.h>

/* The PFN name is pasted where `name` is still unexpanded: cuda.h maps some names to their
   _v2 symbols (cuCtxPushCurrent -> cuCtxPushCurrent_v2), in the fields too. */
#define CHECK(table, field, pfn)                                                               \
    _Static_assert(_Generic(((table *)0)->field, pfn: 1, default: 0),                         \
                   #table "." #field " is not " #pfn);
#define CHECK_TALON(name, version, args) CHECK(talon__driver, name, PFN_##name##_v##version)
#define CHECK_GPU(name, version, args) CHECK(gpu_driver, name, PFN_##name##_v##version)
TALON__DRIVER_FUNCS(CHECK_TALON)
GPU_FUNCS(CHECK_GPU)

int main(void) { return 0; }
