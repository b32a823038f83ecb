// Release-tarball consumer in C++17 (see app.c): the header works from C++ as shipped.
#include <cstdio>
#include <string>
#include "talon.h"

int main() {
    const talon_bundle_info *b = talon_bundle_info_get();
    if (std::string(b->version) != TALON_VERSION_STRING || b->num_kernels < 1) {
        std::fprintf(stderr, "app.cpp: library %s does not match header %s\n", b->version, TALON_VERSION_STRING);
        return 1;
    }
    talon_gelu_and_mul_args a{};
    if (talon_gelu_and_mul(nullptr, nullptr, &a) != TALON_ERROR_INVALID_ARGUMENT) {
        std::fprintf(stderr, "app.cpp: NULL ctx not rejected\n");
        return 1;
    }
    return 0;
}
