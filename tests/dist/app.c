/* Release-tarball consumer (tools/verify-dist): built header-only, against lib/libtalon.a,
   through pkg-config and through CMake, from an extracted or installed tree. Needs no GPU:
   exit 0 when the compiled dispatcher matches the header and rejects a NULL context. */
#include <stdio.h>
#include <string.h>
#include "talon.h"

int main(void) {
    const talon_bundle_info *b = talon_bundle_info_get();
    talon_rmsnorm_args a;
    memset(&a, 0, sizeof a);
    if (talon_version() != TALON_VERSION_MAJOR * 10000 + TALON_VERSION_MINOR * 100 + TALON_VERSION_PATCH ||
        strcmp(b->version, TALON_VERSION_STRING) != 0) {
        fprintf(stderr, "app.c: library %s does not match header %s\n", b->version, TALON_VERSION_STRING);
        return 1;
    }
    if (b->num_kernels < 1 || b->num_images < 1) {
        fprintf(stderr, "app.c: empty bundle\n");
        return 1;
    }
    if (talon_rmsnorm(NULL, NULL, &a) != TALON_ERROR_INVALID_ARGUMENT) {
        fprintf(stderr, "app.c: NULL ctx not rejected\n");
        return 1;
    }
    return 0;
}
