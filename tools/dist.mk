# Release tarballs, included by the Makefile.
#   make dist [NIGHTLY=1] [ARCHS=sm_90a] [SOURCE_DATE_EPOCH=N] [DIST_DIR=dist]
#       dist/<stem>.tar.gz (one top-level directory <stem>/) and dist/SHA256SUMS, where
#       <stem> = talon-<version>-linux-<cpu>-cuda<major.minor>-<archs> (the convention and
#       its regex: tools/talon_dist.py; <cpu> is the machine CC builds for, `$(CC) -dumpmachine`).
#       Byte-identical for the same commit, toolkit, CC and CFLAGS (MANIFEST.json records them).
#   make dist CROSS_COMPILE=aarch64-linux-gnu-    the same for aarch64 hosts (GH200), with the
#       Debian cross toolchain (gcc-aarch64-linux-gnu); verify-dist then runs its programs under
#       qemu-user (QEMU=..., default qemu-aarch64 -L /usr/aarch64-linux-gnu)
#   make verify-dist                    tools/verify-dist on the one tarball in DIST_DIR
#   make install [PREFIX=/usr/local] [DESTDIR=]   the tarball's tree under DESTDIR/PREFIX:
#       include/, lib/ (archive, pkgconfig/, cmake/talon/), share/talon/ (MANIFEST.json,
#       VERSION, cubins/), share/doc/talon/ (README.md, CHANGELOG.md, LICENSE)
#   make uninstall [PREFIX=...] [DESTDIR=]        removes what the installed
#       share/talon/MANIFEST.json lists, and the directories that leaves empty
# None of them needs git: the commit comes from talon's repository or tools/commit (Makefile).

# The kernels build for sm_90a only; more archs will join this list (and the name: sm90a-sm100a).
SUPPORTED_ARCHS := sm_90a
ARCHS ?= sm_90a
ifneq ($(filter-out $(SUPPORTED_ARCHS),$(ARCHS))$(if $(strip $(ARCHS)),,none),)
$(error ARCHS='$(ARCHS)' is not supported: the kernels build only for $(SUPPORTED_ARCHS))
endif

DIST_DIR ?= dist
PREFIX ?= /usr/local
DIST_BASE := $(shell cat VERSION)
DIST_COMMIT := $(or $(COMMIT_FULL),unknown)
# Timestamps in the tarball: the commit's date, so rebuilding the same commit gives the same
# bytes (1970 when no commit is known).
SOURCE_DATE_EPOCH ?= $(or $(COMMIT_EPOCH),0)
ifeq ($(NIGHTLY),1)
DIST_VERSION := $(DIST_BASE).dev$(if $(COMMIT_EPOCH),$(shell TZ=UTC0 date -d @$(COMMIT_EPOCH) +%Y%m%d))+g$(shell echo $(COMMIT_FULL) | cut -c1-7)
else
DIST_VERSION := $(DIST_BASE)
endif
# The host CPU the archive's objects are for: the first field of CC's target triple.
DIST_CPU := $(shell $(CC) -dumpmachine 2>/dev/null | cut -d- -f1)
QEMU ?= $(if $(filter-out $(shell uname -m),$(DIST_CPU)),qemu-$(DIST_CPU) -L /usr/$(DIST_CPU)-linux-gnu)
dist_space := $() $()
DIST_STEM := talon-$(DIST_VERSION)-linux-$(DIST_CPU)-cuda$(NVCC_VERSION)-$(subst _,,$(subst $(dist_space),-,$(strip $(ARCHS))))
DIST_STAGE := build/dist/$(DIST_STEM)
DIST_TGZ := $(DIST_DIR)/$(DIST_STEM).tar.gz
# source:destination-in-the-tarball (the pkg-config/CMake files and MANIFEST.json are generated)
DIST_FILES := $(foreach h,$(HEADERS),$(h):$(h)) $(EMBED):include/talon_cubins.h \
    $(LIB):lib/libtalon.a $(foreach c,$(CUBINS),$(c):share/talon/$(c)) VERSION:share/talon/VERSION \
    LICENSE:share/doc/talon/LICENSE README.md:share/doc/talon/README.md CHANGELOG.md:share/doc/talon/CHANGELOG.md
DIST_PY := python3 $(CURDIR)/tools/talon_dist.py

.PHONY: dist-stage FORCE
FORCE:

# The embedded header records the commit: regenerate it when HEAD moves so that a tarball never
# carries another commit's bundle info. The stamp is rewritten only when the commit changes.
build/commit.stamp: FORCE
	$(Q)mkdir -p $(@D) && echo $(GIT_COMMIT) | cmp -s - $@ || echo $(GIT_COMMIT) > $@
$(EMBED): build/commit.stamp

# Stage the tree afresh every time (it is small), so nothing stale can slip in.
dist-stage: $(foreach p,$(DIST_FILES),$(firstword $(subst :, ,$(p)))) tools/talon_dist.py \
            tools/dist/talon.pc.in tools/dist/talonConfig.cmake tools/dist/talonConfigVersion.cmake.in
	$(call say,STAGE,$(DIST_STAGE))case "$(DIST_CPU)" in x86_64|aarch64) ;; *) echo "make $(MAKECMDGOALS): CC='$(CC)' builds for '$(DIST_CPU)' ($(CC) -dumpmachine); talon packages x86_64 and aarch64" >&2; exit 1;; esac
	$(Q)test "$(NIGHTLY)" != 1 -o -n "$(COMMIT_FULL)" || { echo "make dist NIGHTLY=1: the version needs the commit: build from talon's git checkout or a git archive of it" >&2; exit 1; }
	$(Q)test -n "$(COMMIT_FULL)" || echo "make $(MAKECMDGOALS): note: no commit known (neither a git checkout of talon nor a git archive of it): MANIFEST.json records commit 'unknown'" >&2
	$(Q)test "$(TALON_TOPLEVEL)" = "" || git diff --quiet HEAD -- 2>/dev/null || echo "make $(MAKECMDGOALS): warning: uncommitted changes; the tarball does not match commit $(DIST_COMMIT)" >&2
	$(Q)rm -rf build/dist && mkdir -p $(DIST_STAGE)
	$(Q)set -e; for p in $(DIST_FILES); do install -D -m 0644 $${p%%:*} $(DIST_STAGE)/$${p#*:}; done; \
	mkdir -p $(DIST_STAGE)/lib/pkgconfig $(DIST_STAGE)/lib/cmake/talon; \
	sed 's/@VERSION@/$(DIST_BASE)/g' tools/dist/talon.pc.in > $(DIST_STAGE)/lib/pkgconfig/talon.pc; \
	cp tools/dist/talonConfig.cmake $(DIST_STAGE)/lib/cmake/talon/; \
	sed 's/@VERSION@/$(DIST_BASE)/g' tools/dist/talonConfigVersion.cmake.in > $(DIST_STAGE)/lib/cmake/talon/talonConfigVersion.cmake; \
	find $(DIST_STAGE) -type d -exec chmod 0755 {} +; find $(DIST_STAGE) -type f -exec chmod 0644 {} +
	$(Q)$(DIST_PY) manifest $(DIST_STAGE) --version $(DIST_VERSION) --commit $(DIST_COMMIT) \
	    --epoch $(SOURCE_DATE_EPOCH) --nvcc $(NVCC_FULL_VERSION) --archs "$(ARCHS)" --name $(DIST_STEM) \
	    --cc "$(CC)" --cflags="$(CFLAGS)" --cuda-include $(CUDA_INC) && chmod 0644 $(DIST_STAGE)/share/talon/MANIFEST.json

# dist/ holds exactly one tarball and its SHA256SUMS. GNU tar: sorted names, fixed owner and
# mtime; modes were fixed when staging; gzip -n leaves out the name and time. Level 6: 7%
# larger than -9 (20.7 against 19.3 MB at 0.2.0) in an eighth of the time (6 against 48 s),
# and make test builds four tarballs.
dist: dist-stage
	$(call say,TAR,$(DIST_TGZ))mkdir -p $(DIST_DIR) && rm -f $(DIST_DIR)/talon-*.tar.gz $(DIST_DIR)/SHA256SUMS
	$(Q)tar --format=gnu --sort=name --mtime=@$(SOURCE_DATE_EPOCH) --owner=0 --group=0 --numeric-owner \
	    -C build/dist -cf $(DIST_TGZ:.gz=) $(DIST_STEM) && gzip -6n $(DIST_TGZ:.gz=)
	$(Q)cd $(DIST_DIR) && sha256sum $(DIST_STEM).tar.gz > SHA256SUMS
	@echo "make dist: $(DIST_TGZ)"

verify-dist:
	$(Q)set -- $(DIST_DIR)/talon-*.tar.gz; test $$# = 1 -a -f "$$1" || { echo "make verify-dist: want exactly one $(DIST_DIR)/talon-*.tar.gz (make dist), found: $$*" >&2; exit 1; }; \
	tools/verify-dist --cc "$(CC)" --cxx "$(CXX)" --cuda-include $(CUDA_INC) $(if $(QEMU),--run "$(QEMU)") "$$1"

# Same tree as the tarball; the file list comes from its MANIFEST.json (installed too, so that
# uninstall removes what was installed even after the source tree has moved on).
DIST_MANIFEST := share/talon/MANIFEST.json
install: dist-stage
	$(call say,INSTALL,$(DESTDIR)$(PREFIX))set -e; list=$$($(DIST_PY) files $(DIST_STAGE)/$(DIST_MANIFEST)); \
	for f in $$list; do install -D -m 0644 $(DIST_STAGE)/$$f "$(DESTDIR)$(PREFIX)/$$f"; done

# Removes the manifest's files, then each directory that holds them once it is empty (deepest
# first, never PREFIX itself): a directory that holds anything else stays.
uninstall:
	$(Q)set -e; cd "$(DESTDIR)$(PREFIX)" 2>/dev/null && test -f $(DIST_MANIFEST) || { echo "make uninstall: no $(DESTDIR)$(PREFIX)/$(DIST_MANIFEST): talon is not installed there" >&2; exit 1; }; \
	list=$$($(DIST_PY) files $(DIST_MANIFEST)); rm -f $$list; \
	for d in $$($(DIST_PY) dirs $$list); do test ! -d $$d || rmdir --ignore-fail-on-non-empty $$d; done
