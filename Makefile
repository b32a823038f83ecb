# talon - build, test and benchmark. `make` needs the CUDA toolkit (nvcc) but no GPU.
#   make            cubins, embedded header, build/lib/libtalon.a, tools
#   make test       CPU tests (no GPU): dispatcher on a fake driver, bundle integrity,
#                   header compile checks, CPU references
#   make test-gpu   GPU tests on an H100/H200 (also under compute-sanitizer: make sanitize)
#   make soak       random ops for 10 minutes on the GPU, outputs and memory checked
#   make bench      benchmarks on an H100/H200: bench/ops.py, talon beside its PyTorch peers
#                   (needs PyTorch with CUDA; writes bench/results/<date>-<gpu>-ops.json)
#   V=1 shows commands. NVCC=/path/to/nvcc or CUDA_HOME=/usr/local/cuda pick the toolkit;
#   clean, uninstall and verify-dist work without nvcc.

CUDA_HOME ?= /usr/local/cuda
NVCC ?= $(if $(wildcard $(CUDA_HOME)/bin/nvcc),$(CUDA_HOME)/bin/nvcc,nvcc)
NVCC_MIN := 12.4
NVCC_VERSION := $(shell $(NVCC) --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\),.*/\1/p')
NVCC_FULL_VERSION := $(shell $(NVCC) --version 2>/dev/null | sed -n 's/.*release .*, V\([0-9.]*\).*/\1/p')
# Goals that compile nothing work without nvcc (verify-dist needs only the toolkit's cuda.h).
NO_NVCC_GOALS := clean uninstall verify-dist
ifneq ($(MAKECMDGOALS),)
ifeq ($(filter-out $(NO_NVCC_GOALS),$(MAKECMDGOALS)),)
NVCC_OPTIONAL := 1
endif
endif
ifeq ($(NVCC_VERSION)$(NVCC_OPTIONAL),)
$(error nvcc not found (tried '$(NVCC)'): install the CUDA toolkit and set NVCC=/path/to/nvcc or CUDA_HOME=/path/to/cuda)
endif
ifneq ($(NVCC_VERSION),)
ifneq ($(shell printf '%s\n%s\n' $(NVCC_MIN) $(NVCC_VERSION) | sort -V | head -n1),$(NVCC_MIN))
$(error nvcc $(NVCC_VERSION) at '$(NVCC)' is older than $(NVCC_MIN): set NVCC= or CUDA_HOME= to a newer CUDA toolkit)
endif
CUDA_INC := $(patsubst %/bin/nvcc,%,$(shell command -v $(NVCC)))/include
else
CUDA_INC := $(CUDA_HOME)/include
endif

ARCH := sm_90a
CC ?= cc
CXX ?= c++
# CROSS_COMPILE=aarch64-linux-gnu- builds the host side for another CPU (make dist for GH200).
ifneq ($(CROSS_COMPILE),)
ifeq ($(origin CC),default)
CC := $(CROSS_COMPILE)gcc
endif
ifeq ($(origin CXX),default)
CXX := $(CROSS_COMPILE)g++
endif
endif
Q := $(if $(V),,@)
say = $(if $(V),,@printf '  %-8s %s\n' $(1) $(2);)

NVCCFLAGS := -gencode=arch=compute_90a,code=sm_90a -O3 -std=c++17 -Iinclude -Ikernels -Xptxas -warn-spills
CFLAGS ?= -O2 -g
WARN := -Wall -Wextra -Werror
INC := -Iinclude -Ibuild/include -isystem $(CUDA_INC)
LIBS := -ldl -lpthread

# One cubin per image: kernels/<family>/<image>.cu (kernels/dev/ holds the shared device library).
KERNELS := $(filter-out kernels/dev/%,$(wildcard kernels/*/*.cu))
CUBINS := $(addprefix cubins/,$(notdir $(KERNELS:.cu=.cubin)))
vpath %.cu $(sort $(dir $(KERNELS)))
HEADERS := include/talon.h $(wildcard include/talon/*/*)
EMBED := build/include/talon_cubins.h
LIB := build/lib/libtalon.a
# tests/common/: what the tests share; tests/<family>/ref_*.c: a family's fp64 references.
REF_SRCS := tests/common/ref.c $(wildcard tests/*/ref_*.c)
GPU_HELPERS := tests/common/gpu.c tests/common/opcheck.c $(REF_SRCS)
# The commit the bundle records: from talon's own git repository only (a copy vendored into
# another repository must not report that repository's HEAD), else from tools/commit, which
# `git archive` fills in (export-subst in .gitattributes), else unknown. COMMIT_EPOCH is the
# commit's time (release tarballs use it for their timestamps).
TALON_TOPLEVEL := $(shell git -C "$(CURDIR)" rev-parse --show-toplevel 2>/dev/null)
ifneq ($(and $(TALON_TOPLEVEL),$(realpath $(TALON_TOPLEVEL))),$(realpath $(CURDIR)))
COMMIT_INFO := $(shell sed -n 's/^\([0-9a-f]\{40\}\) \([0-9]\{1,\}\)$$/\1 \2/p' tools/commit 2>/dev/null)
else
COMMIT_INFO := $(shell git log -1 --format='%H %ct' 2>/dev/null)
endif
COMMIT_FULL := $(word 1,$(COMMIT_INFO))
COMMIT_EPOCH := $(word 2,$(COMMIT_INFO))
GIT_COMMIT := $(if $(COMMIT_FULL),$(shell echo $(COMMIT_FULL) | cut -c1-12),unknown)

all: $(LIB) build/bin/talon-info
.PHONY: all examples fuzz test test-gpu soak sanitize bench clean check-fp8-div dist verify-dist install uninstall

# A kernel depends on its sources, its table (include/talon/kernels/) and kernels/dev/ (the
# -MMD dependency files), never on talon.h: editing the manual rebuilds no cubin. ptxas
# warnings that wgmma instructions were serialised (C7508-C7510, C7517: a silent loss of most
# of the tensor cores' throughput) fail the build.
cubins/%.cubin: %.cu
	$(call say,NVCC,$@)mkdir -p cubins build/dep
	$(Q)$(NVCC) $(NVCCFLAGS) -MMD -MP -MF build/dep/$*.d -MT $@ -cubin $< -o $@ 2> build/dep/$*.log; \
	    rc=$$?; cat build/dep/$*.log >&2; \
	    if [ $$rc -eq 0 ] && grep -qE 'C75(08|09|10|17)' build/dep/$*.log; then \
	        echo "$@: ptxas serialised wgmma instructions (see above)" >&2; rc=1; fi; \
	    if [ $$rc -ne 0 ]; then rm -f $@; exit $$rc; fi

$(EMBED): $(CUBINS) tools/embed.sh
	$(call say,EMBED,$@)mkdir -p $(@D)
	$(Q)sh tools/embed.sh $(NVCC_FULL_VERSION) $(ARCH) $(GIT_COMMIT) $(CUBINS) > $@.tmp && mv $@.tmp $@

# The archive's bytes depend on the compiler and its flags: a change of either rebuilds it
# (make dist CC=clang after a gcc build must not ship the gcc objects).
CC_ID := $(CC) $(CFLAGS) | $(shell $(CC) --version 2>/dev/null | head -n1)
build/cc.stamp: FORCE
	$(Q)mkdir -p $(@D) && printf '%s\n' '$(subst ','\'',$(CC_ID))' | cmp -s - $@ || printf '%s\n' '$(subst ','\'',$(CC_ID))' > $@

build/obj/talon.o: $(HEADERS) $(EMBED) build/cc.stamp
	$(call say,CC,$@)mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(WARN) -std=c99 -pedantic $(INC) -ffile-prefix-map=$(CURDIR)=. -DTALON_IMPLEMENTATION -x c -c include/talon.h -o $@

$(LIB): build/obj/talon.o
	$(call say,AR,$@)mkdir -p $(@D)
	$(Q)rm -f $@ && ar rcD $@ $^

build/bin/talon-info: tools/talon-info.c $(GPU_HELPERS) $(LIB)
	$(call say,CC,$@)mkdir -p $(@D) build/dep
	$(Q)$(CC) $(CFLAGS) $(WARN) -std=c11 $(INC) -Itests/common -MMD -MP -MF build/dep/talon-info.d $(GPU_HELPERS) $< $(LIB) -lm $(LIBS) -o $@

# ---------------------------------------------------------------- examples
# examples/: programs built as a user would build them: C99 (pedantic), talon.h + cuda.h +
# libc, linked with the archive and libcuda (the toolkit's stub library at link time; the
# driver's libcuda.so.1 when run).
CUDA_STUBS := $(firstword $(wildcard $(CUDA_INC)/../lib64/stubs $(CUDA_INC)/../lib/stubs $(CUDA_INC)/../targets/*/lib/stubs))
EXAMPLE_LIB_SRCS := examples/llm.c examples/sample.c examples/safetensors.c examples/model_config.c \
                    examples/json.c
EXAMPLES := build/bin/talon_generate
examples: $(EXAMPLES)
build/bin/talon_generate: examples/talon_generate.c $(EXAMPLE_LIB_SRCS) $(LIB)
	$(call say,CC,$@)mkdir -p $(@D) build/dep
	$(Q)$(CC) $(CFLAGS) $(WARN) -std=c99 -pedantic $(INC) -MMD -MP -MF build/dep/talon_generate.d $(filter %.c,$^) $(LIB) $(if $(CUDA_STUBS),-L$(CUDA_STUBS)) -lcuda -lm $(LIBS) -o $@

# ---------------------------------------------------------------- CPU tests
# tests/<dir>/test_<name>.c builds build/tests/test_<name> (vpath finds the source; names are
# unique across directories). <dir> is core (dispatcher-wide) or a family; tests/common/ holds
# the shared files (fake_driver.h, table_rows.h, gpu.*, opcheck.*, ref.*), tests/dev/ has its
# own rule below. Every test_<name>.c but the GPU ones (test_gpu_*) is a cmocka program run by
# make test, built with tests/common and its own directory on the include path and linked with
# tests/common/ref.c and its directory's ref_*.c. The source goes last on the command line:
# with several sources, -MMD writes the dependencies of the last one.
TEST_SRCS := $(filter-out tests/dev/%,$(wildcard tests/*/test_*.c))
GPU_TEST_SRCS := $(foreach t,$(TEST_SRCS),$(if $(filter test_gpu_%,$(notdir $(t))),$(t)))
CPU_TESTS := $(patsubst %.c,build/tests/%,$(notdir $(filter-out $(GPU_TEST_SRCS),$(TEST_SRCS))))
ifneq ($(words $(sort $(notdir $(TEST_SRCS)))),$(words $(TEST_SRCS)))
$(error two tests/*/test_<name>.c share a name (they would build the same build/tests/test_<name>): $(sort $(TEST_SRCS)))
endif
vpath test_%.c $(sort $(dir $(TEST_SRCS)))
$(foreach t,$(TEST_SRCS),$(eval build/tests/$(basename $(notdir $(t))): $(wildcard $(dir $(t))ref_*.c)))
build/tests/test_%: test_%.c tests/common/ref.c $(EMBED)
	$(call say,CC,$@)mkdir -p $(@D) build/dep
	$(Q)$(CC) $(CFLAGS) $(WARN) -std=c11 $(INC) -Itests/common -I$(<D) -MMD -MP -MF build/dep/test_$*.d $(filter-out $<,$(filter %.c,$^)) $< -lcmocka -lm $(LIBS) -o $@

# tests/examples/: the example program's host loaders (examples/*.c), which need neither the
# cubins nor talon.h: their own rule (a static pattern, so it wins over the one above) builds
# them C99, pedantic, with the example sources each test lists here (json.h: -MMD sees only
# the headers of the test itself).
EXAMPLE_TESTS := build/tests/test_json build/tests/test_safetensors build/tests/test_model_config \
                 build/tests/test_sample
build/tests/test_json: examples/json.c examples/json.h
build/tests/test_safetensors: examples/safetensors.c examples/json.c examples/json.h
build/tests/test_model_config: examples/model_config.c examples/json.c examples/json.h
build/tests/test_sample: examples/sample.c examples/sample.h
$(EXAMPLE_TESTS): build/tests/%: %.c
	$(call say,CC,$@)mkdir -p $(@D) build/dep
	$(Q)$(CC) $(CFLAGS) $(WARN) -std=c99 -pedantic -MMD -MP -MF build/dep/$*.d $(filter-out $<,$(filter %.c,$^)) $< -lcmocka -lm -o $@

# The header compiles as C99 and C++17, pedantic, header-only and against the archive.
COMPILE_CHECKS := c99-header-only c99-archive cxx17-header-only cxx17-archive driver-abi
build/compile/driver-abi: tests/core/driver_abi_check.c $(EMBED) tests/common/gpu.h
	$(call say,CC,$@)mkdir -p $(@D)
	$(Q)$(CC) -std=c11 $(WARN) $(INC) -Itests/common $< $(LIBS) -o $@
build/compile/c99-header-only: tests/core/compile_check.c $(EMBED)
	$(call say,CC,$@)mkdir -p $(@D)
	$(Q)$(CC) -std=c99 $(WARN) -pedantic $(INC) -DTALON_IMPLEMENTATION $< $(LIBS) -o $@
build/compile/c99-archive: tests/core/compile_check.c $(LIB)
	$(call say,CC,$@)mkdir -p $(@D)
	$(Q)$(CC) -std=c99 $(WARN) -pedantic $(INC) $< $(LIB) $(LIBS) -o $@
build/compile/cxx17-header-only: tests/core/compile_check.c $(EMBED)
	$(call say,CXX,$@)mkdir -p $(@D)
	$(Q)$(CXX) -x c++ -std=c++17 $(WARN) -pedantic $(INC) -DTALON_IMPLEMENTATION $< $(LIBS) -o $@
build/compile/cxx17-archive: tests/core/compile_check.c $(LIB)
	$(call say,CXX,$@)mkdir -p $(@D)
	$(Q)$(CXX) -x c++ -std=c++17 $(WARN) -pedantic $(INC) $< -x none $(LIB) $(LIBS) -o $@

test: $(CPU_TESTS) $(addprefix build/compile/,$(COMPILE_CHECKS)) build/bin/talon-info build/lib/libtalon_bench.so $(EXAMPLES)
	$(Q)for t in $(CPU_TESTS); do $$t || exit 1; done
	$(Q)for c in $(COMPILE_CHECKS); do build/compile/$$c || exit 1; done
	$(Q)sh tests/check_version.sh
	$(Q)sh tests/test_release_notes.sh
	$(Q)python3 tools/lint-workflows
	$(Q)python3 tests/bench/check_mirrors.py build/lib/libtalon_bench.so
	$(Q)sh tests/core/test_talon_info.sh build/bin/talon-info $(CUDA_INC)
	$(Q)sh tests/core/test_readme.sh "$(CC)" $(CUDA_INC)
	$(Q)sh tests/test_dist.sh
	@echo "make test: all CPU tests passed"

# ---------------------------------------------------------------- fuzzing
# tests/core/fuzz_ops.c: every op's args through the fake driver under libFuzzer, ASan and
# UBSan (clang). `make fuzz` writes a valid call of each op into build/fuzz/corpus (the seeds,
# from the code), then searches from that corpus for FUZZ_SECONDS.
FUZZ_CC ?= clang
FUZZ_SECONDS ?= 60
build/fuzz/fuzz_ops: tests/core/fuzz_ops.c tests/common/fake_driver.h $(EMBED) $(HEADERS)
	$(call say,CC,$@)mkdir -p $(@D)/corpus
	$(Q)$(FUZZ_CC) -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -std=c11 $(INC) -Itests/common $< -lcmocka -lm $(LIBS) -o $@
fuzz: build/fuzz/fuzz_ops
	$(Q)FUZZ_SEEDS=build/fuzz/corpus build/fuzz/fuzz_ops > /dev/null 2>&1 || { echo "fuzz_ops: a seed is rejected" >&2; FUZZ_SEEDS=build/fuzz/corpus build/fuzz/fuzz_ops; exit 1; }
	$(Q)build/fuzz/fuzz_ops -max_total_time=$(FUZZ_SECONDS) -max_len=1024 -artifact_prefix=build/fuzz/ build/fuzz/corpus

# ---------------------------------------------------------------- GPU tests and benchmarks
# GPU binaries carry libcmocka.so.0 beside them (rpath $ORIGIN): the H100 has no cmocka.
CMOCKA_SO := $(shell $(CC) -print-file-name=libcmocka.so.0)
build/tests/libcmocka.so.0: $(CMOCKA_SO)
	$(Q)mkdir -p $(@D) && cp -L $< $@
# Every tests/<dir>/test_gpu_<name>.c but tests/dev/ is a GPU test program, linked with the GPU
# helpers and every reference; a static pattern rule, so it wins over the CPU test rule.
GPU_TESTS := $(patsubst %.c,build/tests/%,$(notdir $(GPU_TEST_SRCS)))
$(GPU_TESTS): build/tests/%: %.c $(GPU_HELPERS) $(LIB) build/tests/libcmocka.so.0
	$(call say,CC,$@)mkdir -p $(@D) build/dep
	$(Q)$(CC) $(CFLAGS) $(WARN) -std=c11 $(INC) -Itests/common -I$(<D) -MMD -MP -MF build/dep/$*.d $(GPU_HELPERS) $< $(LIB) -Lbuild/tests -l:libcmocka.so.0 -Wl,-rpath,'$$ORIGIN' -lm $(LIBS) -o $@
# The device library's unit tests (tests/dev/): test kernels in their own cubin, built beside the
# program that loads them; never embedded in the library.
DEV_TEST := build/tests/test_gpu_dev
build/tests/dev_kernels.cubin: tests/dev/dev_kernels.cu
	$(call say,NVCC,$@)mkdir -p $(@D) build/dep
	$(Q)$(NVCC) $(NVCCFLAGS) -MMD -MP -MF build/dep/dev_kernels.d -MT $@ -cubin $< -o $@
$(DEV_TEST): tests/dev/test_gpu_dev.c build/tests/dev_kernels.cubin build/tests/libcmocka.so.0 $(EMBED)
	$(call say,CC,$@)mkdir -p $(@D) build/dep
	$(Q)$(CC) $(CFLAGS) $(WARN) -std=c11 $(INC) -MMD -MP -MF build/dep/test_gpu_dev.d $< -Lbuild/tests -l:libcmocka.so.0 -Wl,-rpath,'$$ORIGIN' -lm $(LIBS) -o $@

# The Python benchmarks (bench/ops.py) call talon through ctypes on a shared build of the
# dispatcher; bench/shim.c adds the description of the argument structs (fields, offsets, sizes)
# their ctypes mirrors are built from and checked against (its compile-time checks stop the build).
build/lib/libtalon_bench.so: bench/shim.c tests/common/family_cases.h $(wildcard tests/*/cases_*.h) $(HEADERS) $(EMBED)
	$(call say,CC,$@)mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(WARN) -std=c99 -fPIC -shared $(INC) $< $(LIBS) -o $@

gpu-build: $(GPU_TESTS) $(DEV_TEST) build/bin/talon-info build/lib/libtalon_bench.so
# test_gpu_soak runs TALON_SOAK_SECONDS (60 here; `make soak`: the full 600 s, seed printed)
test-gpu: $(GPU_TESTS) $(DEV_TEST)
	$(Q)for t in $(GPU_TESTS) $(DEV_TEST); do TALON_SOAK_SECONDS=$${TALON_SOAK_SECONDS:-60} $$t || exit 1; done
soak: build/tests/test_gpu_soak
	$(Q)TALON_SOAK_SECONDS=$${TALON_SOAK_SECONDS:-600} build/tests/test_gpu_soak
sanitize: $(GPU_TESTS) $(DEV_TEST)
	$(Q)for t in $(GPU_TESTS) $(DEV_TEST); do TALON_TEST_QUICK=1 compute-sanitizer --tool memcheck --error-exitcode 1 --leak-check full $$t || exit 1; done
	$(Q)for tool in racecheck synccheck; do TALON_TEST_QUICK=1 compute-sanitizer --tool $$tool --error-exitcode 1 $(DEV_TEST) || exit 1; done
bench: build/lib/libtalon_bench.so
	$(Q)python3 bench/ops.py --lib build/lib/libtalon_bench.so --out bench/results

# The exhaustive CPU check behind kv_append's fp8 division (kv_cache.cu, div_scale) and the
# quant ops' (dev/fp8.cuh, E4m3Divider); not part of `make test`: 1.1e10 quotients, ~40 s with
# hardware FMA (-march=native).
check-fp8-div: tools/fp8-div-check.c tests/common/ref.c tests/kv_cache/ref_kv_cache.c
	$(call say,CC,build/bin/fp8-div-check)mkdir -p build/bin
	$(Q)$(CC) -O3 -march=native -ffp-contract=off -std=c11 $(WARN) $(INC) -Itests/common -Itests/kv_cache $^ -lm $(LIBS) -o build/bin/fp8-div-check
	$(Q)build/bin/fp8-div-check

clean:
	rm -rf build cubins dist

include tools/dist.mk

-include $(wildcard build/dep/*.d)
