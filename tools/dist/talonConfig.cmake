# talon: precompiled sm_90a CUDA kernels behind a C API.
#   find_package(talon 0.2 REQUIRED)
#   target_link_libraries(app PRIVATE talon::talon)
# talon::talon is the static archive (lib/libtalon.a) with include/ on the include path.
# Header-only use (TALON_IMPLEMENTATION in exactly one file): link talon::headers instead (the
# include directories and -ldl/-lpthread, no archive).
# talon.h needs <cuda.h>: the CUDA toolkit's include directory is added when
# find_package(CUDAToolkit) finds one; otherwise put it on the include path yourself. Both
# targets are imported, so their include directories are system directories for consumers
# (cuda.h is not clean under -pedantic -Werror).
# Relocatable: every path derives from this file's location.
include(CMakeFindDependencyMacro)
find_dependency(Threads)
find_package(CUDAToolkit QUIET)

get_filename_component(_talon_prefix "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
set(_talon_includes "${_talon_prefix}/include" ${CUDAToolkit_INCLUDE_DIRS})
if(NOT TARGET talon::talon)
  add_library(talon::talon STATIC IMPORTED)
  set_target_properties(talon::talon PROPERTIES
    IMPORTED_LOCATION "${_talon_prefix}/lib/libtalon.a"
    IMPORTED_LINK_INTERFACE_LANGUAGES "C"
    INTERFACE_INCLUDE_DIRECTORIES "${_talon_includes}"
    INTERFACE_LINK_LIBRARIES "${CMAKE_DL_LIBS};Threads::Threads")
endif()
if(NOT TARGET talon::headers)
  add_library(talon::headers INTERFACE IMPORTED)
  set_target_properties(talon::headers PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${_talon_includes}"
    INTERFACE_LINK_LIBRARIES "${CMAKE_DL_LIBS};Threads::Threads")
endif()
unset(_talon_prefix)
unset(_talon_includes)
