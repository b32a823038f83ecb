/* Release-tarball consumer: app.c compiled header-only (CMake's talon::headers target). */
#define TALON_IMPLEMENTATION
#include "app.c"
