/* Bundle integrity: every embedded cubin is an sm_90a ELF without PTX, and its kernels, their
   parameter sizes and block sizes agree with the kernel tables (include/talon/kernels/). The
   ELF and .nv.info parsing is our own, bounds-checked, so a corrupt image fails a check
   instead of crashing. */
#define TALON_IMPLEMENTATION
#include "talon.h"

#include <elf.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#ifndef EM_CUDA
#define EM_CUDA 190
#endif

/* .nv.info entries: {u8 format, u8 attribute, u16 value-or-size}, SVAL followed by `size`
   payload bytes. Every non-SVAL entry is exactly 4 bytes (BVAL included: value + pad byte),
   as seen in the CUDA 13.0 cubins. */
enum { EIFMT_NVAL = 1, EIFMT_BVAL = 2, EIFMT_HVAL = 3, EIFMT_SVAL = 4 };
enum {
    EIATTR_MAX_THREADS = 0x05,      /* SVAL u32 x, y, z from __launch_bounds__ */
    EIATTR_PARAM_CBANK = 0x0a,      /* SVAL u32 symbol, u16 offset, u16 size */
    EIATTR_KPARAM_INFO = 0x17,      /* SVAL u32 index, u16 ordinal, u16 offset, u32 size << 18 */
    EIATTR_CBANK_PARAM_SIZE = 0x19, /* HVAL size */
};
/* .nv.compat BVAL attribute 0x09: 1 for sm_90a, 0 for sm_90 (the two differ only there). */
enum { COMPAT_ARCH_SPECIFIC = 0x09 };

enum { EXPECTED_SM = 90 };

static char why[1024]; /* detail of the last failed check */

#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
static bool bad(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return false;
}

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t rd32(const uint8_t *p) { return (uint32_t)rd16(p) | (uint32_t)rd16(p + 2) << 16; }

/* ---------------------------------------------------------------- ELF */
typedef struct elf {
    const char *name; /* image name, for messages */
    const uint8_t *d;
    size_t n;
    Elf64_Ehdr eh;
    Elf64_Shdr shstr;
} elf;

static bool in_image(const elf *e, uint64_t off, uint64_t len) {
    return off <= e->n && len <= e->n - off;
}

/* Section headers are copied out: the bytes need not be aligned for Elf64_Shdr. */
static Elf64_Shdr shdr(const elf *e, unsigned i) {
    Elf64_Shdr s;
    memcpy(&s, e->d + e->eh.e_shoff + (uint64_t)i * sizeof s, sizeof s);
    return s;
}

static bool strtab_ok(const elf *e, const Elf64_Shdr *s) {
    return s->sh_type == SHT_STRTAB && s->sh_size > 0 && e->d[s->sh_offset + s->sh_size - 1] == 0;
}

/* Offset into a validated (NUL-terminated) string table; NULL when out of range. */
static const char *str_at(const elf *e, const Elf64_Shdr *tab, uint64_t off) {
    return off < tab->sh_size ? (const char *)e->d + tab->sh_offset + off : NULL;
}

/* Validates everything later lookups rely on, so they need no further checks. */
static bool elf_open(elf *e, const char *name, const uint8_t *d, size_t n) {
    unsigned i;
    memset(e, 0, sizeof *e);
    e->name = name; e->d = d; e->n = n;
    if (n < sizeof e->eh) return bad("image %s: %zu bytes, shorter than an ELF header", name, n);
    memcpy(&e->eh, d, sizeof e->eh);
    if (memcmp(d, ELFMAG, SELFMAG)) return bad("image %s: no ELF magic", name);
    if (d[EI_CLASS] != ELFCLASS64) return bad("image %s: EI_CLASS %d, expected ELFCLASS64", name, d[EI_CLASS]);
    if (d[EI_DATA] != ELFDATA2LSB) return bad("image %s: EI_DATA %d, expected little-endian", name, d[EI_DATA]);
    if (e->eh.e_machine != EM_CUDA)
        return bad("image %s: e_machine %u, expected EM_CUDA (%d)", name, e->eh.e_machine, EM_CUDA);
    if (e->eh.e_shentsize != sizeof(Elf64_Shdr) || e->eh.e_shnum == 0 ||
        !in_image(e, e->eh.e_shoff, (uint64_t)e->eh.e_shnum * sizeof(Elf64_Shdr)))
        return bad("image %s: section header table (offset %llu, %u x %u bytes) is outside the %zu-byte image",
                   name, (unsigned long long)e->eh.e_shoff, e->eh.e_shnum, e->eh.e_shentsize, n);
    if (e->eh.e_phnum && (e->eh.e_phentsize != sizeof(Elf64_Phdr) ||
                          !in_image(e, e->eh.e_phoff, (uint64_t)e->eh.e_phnum * sizeof(Elf64_Phdr))))
        return bad("image %s: program header table (offset %llu, %u x %u bytes) is outside the %zu-byte image",
                   name, (unsigned long long)e->eh.e_phoff, e->eh.e_phnum, e->eh.e_phentsize, n);
    for (i = 0; i < e->eh.e_phnum; i++) {
        Elf64_Phdr p;
        memcpy(&p, d + e->eh.e_phoff + (uint64_t)i * sizeof p, sizeof p);
        if (!in_image(e, p.p_offset, p.p_filesz))
            return bad("image %s: segment %u (offset %llu, %llu bytes) is outside the %zu-byte image", name,
                       i, (unsigned long long)p.p_offset, (unsigned long long)p.p_filesz, n);
    }
    for (i = 0; i < e->eh.e_shnum; i++) {
        Elf64_Shdr s = shdr(e, i);
        if (s.sh_type != SHT_NOBITS && !in_image(e, s.sh_offset, s.sh_size))
            return bad("image %s: section %u (offset %llu, %llu bytes) is outside the %zu-byte image", name,
                       i, (unsigned long long)s.sh_offset, (unsigned long long)s.sh_size, n);
    }
    if (e->eh.e_shstrndx >= e->eh.e_shnum) return bad("image %s: e_shstrndx %u out of range", name, e->eh.e_shstrndx);
    e->shstr = shdr(e, e->eh.e_shstrndx);
    if (!strtab_ok(e, &e->shstr)) return bad("image %s: section name table is not a terminated STRTAB", name);
    for (i = 0; i < e->eh.e_shnum; i++) {
        Elf64_Shdr s = shdr(e, i), tab;
        if (!str_at(e, &e->shstr, s.sh_name)) return bad("image %s: section %u name offset out of range", name, i);
        if (s.sh_type != SHT_SYMTAB) continue;
        if (s.sh_link < e->eh.e_shnum) tab = shdr(e, s.sh_link);
        if (s.sh_entsize != sizeof(Elf64_Sym) || s.sh_size % sizeof(Elf64_Sym) ||
            s.sh_link >= e->eh.e_shnum || !strtab_ok(e, &tab))
            return bad("image %s: symbol table (section %u) is malformed", name, i);
        for (uint64_t k = 0; k < s.sh_size / sizeof(Elf64_Sym); k++) {
            Elf64_Sym sym;
            memcpy(&sym, d + s.sh_offset + k * sizeof sym, sizeof sym);
            if (!str_at(e, &tab, sym.st_name))
                return bad("image %s: symbol %llu name offset out of range", name, (unsigned long long)k);
        }
    }
    return true;
}

static const char *sec_name(const elf *e, const Elf64_Shdr *s) { return str_at(e, &e->shstr, s->sh_name); }

/* Only sections with bytes in the image: NOBITS ones were not bounds-checked. */
static bool find_section(const elf *e, const char *name, Elf64_Shdr *out) {
    for (unsigned i = 0; i < e->eh.e_shnum; i++) {
        *out = shdr(e, i);
        if (out->sh_type != SHT_NOBITS && !strcmp(sec_name(e, out), name)) return true;
    }
    return false;
}

static bool find_symtab(const elf *e, Elf64_Shdr *symtab, Elf64_Shdr *strtab) {
    for (unsigned i = 0; i < e->eh.e_shnum; i++) {
        *symtab = shdr(e, i);
        if (symtab->sh_type == SHT_SYMTAB) {
            *strtab = shdr(e, symtab->sh_link);
            return true;
        }
    }
    return bad("image %s: no .symtab", e->name);
}

static Elf64_Sym sym_at(const elf *e, const Elf64_Shdr *symtab, uint64_t k) {
    Elf64_Sym s;
    memcpy(&s, e->d + symtab->sh_offset + k * sizeof s, sizeof s);
    return s;
}

/* ---------------------------------------------------------------- .nv.info attributes */
typedef struct ei {
    uint8_t fmt, attr;
    uint16_t val;      /* NVAL/BVAL/HVAL value; SVAL payload size */
    const uint8_t *p;  /* SVAL payload */
} ei;

/* Next attribute of section s at *pos: 1 got one, 0 at the end, -1 malformed (why says). */
static int ei_next(const elf *e, const Elf64_Shdr *s, uint64_t *pos, ei *a) {
    const uint8_t *b = e->d + s->sh_offset;
    if (*pos == s->sh_size) return 0;
    if (s->sh_size - *pos < 4) goto malformed;
    a->fmt = b[*pos]; a->attr = b[*pos + 1]; a->val = rd16(b + *pos + 2); a->p = b + *pos + 4;
    if (a->fmt < EIFMT_NVAL || a->fmt > EIFMT_SVAL) goto malformed;
    *pos += 4;
    if (a->fmt == EIFMT_SVAL) {
        if (s->sh_size - *pos < a->val) goto malformed;
        *pos += a->val;
    }
    return 1;
malformed:
    bad("image %s: %s: malformed attribute at byte %llu of %llu", e->name, sec_name(e, s),
        (unsigned long long)*pos, (unsigned long long)s->sh_size);
    return -1;
}

/* ---------------------------------------------------------------- checks */
static bool check_header(const elf *e) {
    const uint32_t flags = e->eh.e_flags;
    const int abi = e->d[EI_ABIVERSION];
    /* CUDA 13 (ELF ABI 8) moved the SM to bits 8..15 (sm_90: 0x6005a04, sm_80: 0x6005004,
       sm_120: 0x6007802); CUDA 12 (ABI 7) kept it in bits 0..7 (sm_90: 0x5a055a). */
    const unsigned sm = abi >= 8 ? (flags >> 8) & 0xff : flags & 0xff;
    Elf64_Shdr compat;
    uint64_t pos = 0;
    ei a;
    int r, arch_specific = -1;
    if (e->eh.e_type != ET_EXEC)
        return bad("image %s: e_type %u, expected ET_EXEC (a linked cubin)", e->name, e->eh.e_type);
    if (sm != EXPECTED_SM)
        return bad("image %s: e_flags 0x%x (ELF ABI %d) encodes sm_%u, expected sm_%d", e->name,
                   (unsigned)flags, abi, sm, EXPECTED_SM);
    if (abi < 8) return true; /* how CUDA 12 marks sm_90a is not decoded here */
    /* e_flags are identical for sm_90 and sm_90a; the "a" lives in .nv.compat. */
    if (!find_section(e, ".nv.compat", &compat))
        return bad("image %s: no .nv.compat section to tell sm_90a from sm_90", e->name);
    while ((r = ei_next(e, &compat, &pos, &a)) > 0)
        if (a.fmt == EIFMT_BVAL && a.attr == COMPAT_ARCH_SPECIFIC) arch_specific = a.val & 0xff;
    if (r < 0) return false;
    if (arch_specific != 1)
        return bad("image %s: .nv.compat arch-specific flag is %d, expected 1 (sm_90a, not sm_90)",
                   e->name, arch_specific);
    return true;
}

static const uint8_t *find_bytes(const uint8_t *d, size_t n, const char *s) {
    size_t m = strlen(s);
    for (size_t i = 0; m <= n && i <= n - m; i++)
        if (d[i] == (uint8_t)s[0] && !memcmp(d + i, s, m)) return d + i;
    return NULL;
}

static bool check_no_ptx(const elf *e) {
    const uint8_t *v = find_bytes(e->d, e->n, ".version"), *t = find_bytes(e->d, e->n, ".target");
    for (unsigned i = 0; i < e->eh.e_shnum; i++) {
        Elf64_Shdr s = shdr(e, i);
        if (strstr(sec_name(e, &s), "ptx"))
            return bad("image %s: section %u \"%s\" carries PTX", e->name, i, sec_name(e, &s));
    }
    if (v && t)
        return bad("image %s: PTX text markers \".version\" at byte %td and \".target\" at byte %td",
                   e->name, v - e->d, t - e->d);
    return true;
}

/* symbol must be a defined, global function: what cuModuleGetFunction can resolve. */
static bool check_kernel_symbol(const elf *e, const char *symbol) {
    Elf64_Shdr symtab, strtab;
    if (!find_symtab(e, &symtab, &strtab)) return false;
    for (uint64_t k = 0; k < symtab.sh_size / sizeof(Elf64_Sym); k++) {
        Elf64_Sym s = sym_at(e, &symtab, k);
        if (strcmp(str_at(e, &strtab, s.st_name), symbol)) continue;
        if (ELF64_ST_TYPE(s.st_info) != STT_FUNC || ELF64_ST_BIND(s.st_info) != STB_GLOBAL ||
            s.st_shndx == SHN_UNDEF || s.st_shndx >= e->eh.e_shnum)
            return bad("image %s: symbol %s has type %d bind %d section %u, expected a defined global "
                       "STT_FUNC", e->name, symbol, ELF64_ST_TYPE(s.st_info),
                       ELF64_ST_BIND(s.st_info), s.st_shndx);
        return true;
    }
    return bad("image %s: kernel %s is in the kernel table but missing from .symtab", e->name, symbol);
}

static bool listed(const char *symbol, int image) {
    for (int k = 0; k < TALON__NUM_KERNELS; k++)
        if (talon__kernels[k].image == image && !strcmp(talon__kernels[k].symbol, symbol)) return true;
    return false;
}

static bool check_no_unlisted(const elf *e, int image) {
    Elf64_Shdr symtab, strtab;
    if (!find_symtab(e, &symtab, &strtab)) return false;
    for (uint64_t k = 0; k < symtab.sh_size / sizeof(Elf64_Sym); k++) {
        Elf64_Sym s = sym_at(e, &symtab, k);
        const char *name = str_at(e, &strtab, s.st_name);
        if (ELF64_ST_TYPE(s.st_info) == STT_FUNC && !strncmp(name, "talon_", 6) && !listed(name, image))
            return bad("image %s: function %s is in the cubin but not in the kernel table for this "
                       "image", e->name, name);
    }
    return true;
}

static bool find_info(const elf *e, const char *symbol, Elf64_Shdr *s) {
    char name[256];
    snprintf(name, sizeof name, ".nv.info.%s", symbol);
    return find_section(e, name, s) ? true : bad("image %s: %s has no %s section", e->name, symbol, name);
}

/* The one by-value struct parameter: its size in the cubin must equal sizeof(P) of its table row. */
static bool check_params(const elf *e, const char *symbol, int param_size) {
    Elf64_Shdr s;
    uint64_t pos = 0;
    ei a;
    int r, nkparam = 0, cbank = -1, cbank_size = -1, param_offset = 0;
    if (!find_info(e, symbol, &s)) return false;
    while ((r = ei_next(e, &s, &pos, &a)) > 0) {
        if (a.fmt == EIFMT_SVAL && a.attr == EIATTR_KPARAM_INFO && a.val == 12) {
            unsigned ordinal = rd16(a.p + 4), offset = rd16(a.p + 6), size = rd32(a.p + 8) >> 18 & 0x3fff;
            if (nkparam++)
                return bad("image %s: %s has more than one kernel parameter (ordinal %u), expected one "
                           "by-value struct", e->name, symbol, ordinal);
            /* offset 0, except that a struct holding a CUtensorMap (64-byte aligned, size a
               multiple of 64) is placed at the next 128-byte boundary of the constant bank:
               the driver copies the launch's bytes there itself */
            if (ordinal != 0 || (offset != 0 && (param_size % 64 || offset >= 128)) ||
                (int)size != param_size)
                return bad("image %s: %s parameter ordinal %u offset %u size %u, expected ordinal 0 "
                           "offset 0 (or < 128 for a tensor-map struct) size %d", e->name, symbol,
                           ordinal, offset, size, param_size);
            param_offset = (int)offset;
        } else if (a.fmt == EIFMT_SVAL && a.attr == EIATTR_PARAM_CBANK && a.val == 8) {
            cbank = rd16(a.p + 6);
        } else if (a.fmt == EIFMT_HVAL && a.attr == EIATTR_CBANK_PARAM_SIZE) {
            cbank_size = a.val;
        }
    }
    if (r < 0) return false;
    if (nkparam != 1) return bad("image %s: %s has %d KPARAM_INFO entries, expected 1", e->name, symbol, nkparam);
    if (cbank != param_offset + param_size)
        return bad("image %s: %s PARAM_CBANK size %d, expected %d", e->name, symbol, cbank,
                   param_offset + param_size);
    if (cbank_size != -1 && cbank_size != param_offset + param_size)
        return bad("image %s: %s CBANK_PARAM_SIZE %d, expected %d", e->name, symbol, cbank_size,
                   param_offset + param_size);
    return true;
}

/* __launch_bounds__(block) is recorded as MAX_THREADS; required, as every kernel declares it. */
static bool check_block(const elf *e, const char *symbol, int block) {
    Elf64_Shdr s;
    uint64_t pos = 0;
    ei a;
    int r;
    if (!find_info(e, symbol, &s)) return false;
    while ((r = ei_next(e, &s, &pos, &a)) > 0) {
        if (a.fmt != EIFMT_SVAL || a.attr != EIATTR_MAX_THREADS || a.val != 12) continue;
        uint32_t x = rd32(a.p), y = rd32(a.p + 4), z = rd32(a.p + 8);
        if ((int64_t)x * y * z != block)
            return bad("image %s: %s MAX_THREADS (%u, %u, %u), expected %d threads per block", e->name,
                       symbol, x, y, z, block);
        return true;
    }
    if (r < 0) return false;
    return bad("image %s: %s has no MAX_THREADS (missing __launch_bounds__(%d)?)", e->name, symbol, block);
}

/* ---------------------------------------------------------------- tests */
/* Runs one check over every image (and every kernel of it), reporting each failure. */
enum check_kind { HEADER, NO_PTX, SYMBOLS, UNLISTED, PARAMS, BLOCK };

static int run_check(enum check_kind kind) {
    int failures = 0;
    for (int i = 0; i < TALON__NUM_IMAGES; i++) {
        const struct talon__image *img = &talon__images[i];
        elf e;
        if (!elf_open(&e, img->name, img->data, img->size)) {
            print_error("%s\n", why);
            failures++;
            continue;
        }
        bool ok = true;
        if (kind == HEADER) ok = check_header(&e);
        if (kind == NO_PTX) ok = check_no_ptx(&e);
        if (kind == UNLISTED) ok = check_no_unlisted(&e, i);
        if (!ok) print_error("%s\n", why), failures++;
        for (int k = 0; k < TALON__NUM_KERNELS; k++) {
            const talon__kernel *kd = &talon__kernels[k];
            if (kd->image != i) continue;
            if (kind == SYMBOLS) ok = check_kernel_symbol(&e, kd->symbol);
            else if (kind == PARAMS) ok = check_params(&e, kd->symbol, kd->param_size);
            else if (kind == BLOCK) ok = check_block(&e, kd->symbol, kd->block);
            else continue;
            if (!ok) print_error("%s\n", why), failures++;
        }
    }
    return failures;
}

#define ASSERT_CHECK(kind)                                                                     \
    do {                                                                                       \
        int n_ = run_check(kind);                                                              \
        if (n_) fail_msg("%d " #kind " check(s) failed, see above", n_);                       \
    } while (0)

static void test_tables(void **state) {
    const talon_bundle_info *info = talon_bundle_info_get();
    (void)state;
    assert_true(TALON__NUM_IMAGES > 0);
    assert_true(TALON__NUM_KERNELS > 0);
    assert_string_equal(TALON__BUNDLE_ARCH, "sm_90a");
    assert_int_equal(info->num_images, TALON__NUM_IMAGES);
    assert_int_equal(info->num_kernels, TALON__NUM_KERNELS);
    for (int i = 0; i < TALON__NUM_IMAGES; i++) {
        bool used = false;
        assert_non_null(talon__images[i].data);
        for (int k = 0; k < TALON__NUM_KERNELS; k++) used |= talon__kernels[k].image == i;
        if (!used) fail_msg("image %s has no kernel in the kernel table", talon__images[i].name);
    }
    for (int k = 0; k < TALON__NUM_KERNELS; k++) {
        const talon__kernel *kd = &talon__kernels[k];
        if (kd->image < 0 || kd->image >= TALON__NUM_IMAGES)
            fail_msg("kernel %s: image index %d out of range", kd->symbol, kd->image);
        assert_string_equal(info->kernel_names[k], kd->symbol);
        for (int j = 0; j < k; j++)
            if (!strcmp(talon__kernels[j].symbol, kd->symbol)) fail_msg("kernel %s listed twice", kd->symbol);
    }
}

static void test_elf_header_sm90a(void **state) { (void)state; ASSERT_CHECK(HEADER); }
static void test_no_ptx(void **state) { (void)state; ASSERT_CHECK(NO_PTX); }
static void test_listed_kernels_present(void **state) { (void)state; ASSERT_CHECK(SYMBOLS); }
static void test_no_unlisted_kernels(void **state) { (void)state; ASSERT_CHECK(UNLISTED); }
static void test_param_sizes(void **state) { (void)state; ASSERT_CHECK(PARAMS); }
static void test_block_sizes(void **state) { (void)state; ASSERT_CHECK(BLOCK); }

/* A writable copy of image 0 and the first kernel of it, for corrupting. */
static uint8_t *copy_image(size_t *n, const talon__kernel **kd) {
    uint8_t *c = (uint8_t *)malloc(talon__images[0].size);
    assert_non_null(c);
    memcpy(c, talon__images[0].data, talon__images[0].size);
    *n = talon__images[0].size;
    for (int k = 0; k < TALON__NUM_KERNELS; k++)
        if (talon__kernels[k].image == 0) { *kd = &talon__kernels[k]; break; }
    return c;
}

#define EXPECT_FAIL(call, needle)                                                              \
    do {                                                                                       \
        why[0] = 0;                                                                            \
        if (call) fail_msg("%s accepted a corrupted image", #call);                            \
        if (!strstr(why, needle)) fail_msg("%s: message \"%s\" lacks \"%s\"", #call, why, needle); \
    } while (0)

static void test_rejects_corrupt(void **state) {
    size_t n, cut[] = {0, 3, 63, 64, 0, 0};
    const talon__kernel *kd = NULL;
    uint8_t *c = copy_image(&n, &kd), saved[64];
    elf e;
    Elf64_Shdr s;
    (void)state;
    cut[4] = n / 2; cut[5] = n - 1;
    for (size_t i = 0; i < sizeof cut / sizeof *cut; i++)
        EXPECT_FAIL(elf_open(&e, "cut", c, cut[i]), "cut");

    c[0] = 0;
    EXPECT_FAIL(elf_open(&e, "magic", c, n), "no ELF magic");
    c[0] = ELFMAG0; c[EI_CLASS] = ELFCLASS32;
    EXPECT_FAIL(elf_open(&e, "class", c, n), "ELFCLASS64");
    c[EI_CLASS] = ELFCLASS64; c[18] = EM_X86_64;
    EXPECT_FAIL(elf_open(&e, "machine", c, n), "EM_CUDA");
    c[18] = EM_CUDA;

    assert_true(elf_open(&e, "copy", c, n));
    memcpy(saved, c + e.eh.e_shoff + sizeof(Elf64_Shdr), sizeof(Elf64_Shdr));
    s = shdr(&e, 1);
    s.sh_offset = n;
    memcpy(c + e.eh.e_shoff + sizeof s, &s, sizeof s);
    EXPECT_FAIL(elf_open(&e, "offset", c, n), "outside");
    memcpy(c + e.eh.e_shoff + sizeof s, saved, sizeof s);
    assert_true(elf_open(&e, "copy", c, n));

    /* sm_80 in the CUDA 13 encoding */
    e.eh.e_flags = (e.eh.e_flags & ~0xff00u) | 80u << 8;
    EXPECT_FAIL(check_header(&e), "sm_80");
    assert_true(elf_open(&e, "copy", c, n));

    /* PTX text and a PTX section name */
    memcpy(saved, c + 64, 32);
    memcpy(c + 64, ".version 9.0\n.target sm_90a\n", 29);
    EXPECT_FAIL(check_no_ptx(&e), "PTX text");
    memcpy(c + 64, saved, 32);
    memcpy(c + e.shstr.sh_offset + e.shstr.sh_name + 1, "ptx", 3); /* ".shstrtab" -> ".ptxtrtab" */
    EXPECT_FAIL(check_no_ptx(&e), "ptxtrtab");
    memcpy(c + e.shstr.sh_offset + e.shstr.sh_name + 1, "shs", 3);
    assert_true(check_no_ptx(&e));

    /* metadata that disagrees with the cubin */
    EXPECT_FAIL(check_kernel_symbol(&e, "talon_not_a_kernel"), "talon_not_a_kernel");
    EXPECT_FAIL(check_params(&e, kd->symbol, kd->param_size + 8), "expected");
    EXPECT_FAIL(check_block(&e, kd->symbol, kd->block * 2), "expected");

    /* an unlisted talon_ function: rename a kernel's symbol in place */
    {
        Elf64_Shdr symtab, strtab;
        assert_true(find_symtab(&e, &symtab, &strtab));
        for (uint64_t k = 0; k < symtab.sh_size / sizeof(Elf64_Sym); k++) {
            Elf64_Sym sym = sym_at(&e, &symtab, k);
            if (strcmp(str_at(&e, &strtab, sym.st_name), kd->symbol)) continue;
            c[strtab.sh_offset + sym.st_name + 6] ^= 0x20; /* talon_x -> talon_X */
            EXPECT_FAIL(check_no_unlisted(&e, 0), "not in the kernel table");
            EXPECT_FAIL(check_kernel_symbol(&e, kd->symbol), "missing");
            c[strtab.sh_offset + sym.st_name + 6] ^= 0x20;
        }
        assert_true(check_no_unlisted(&e, 0));
    }

    /* an SVAL length running past its .nv.info section */
    assert_true(find_info(&e, kd->symbol, &s));
    memcpy(saved, c + s.sh_offset, 4);
    c[s.sh_offset] = EIFMT_SVAL; c[s.sh_offset + 2] = 0xff; c[s.sh_offset + 3] = 0xff;
    EXPECT_FAIL(check_params(&e, kd->symbol, kd->param_size), "malformed");
    memcpy(c + s.sh_offset, saved, 4);
    assert_true(check_params(&e, kd->symbol, kd->param_size));
    free(c);
}

/* Random byte damage in the headers and tables must be rejected or parsed, never crash. */
static void test_fuzz_no_crash(void **state) {
    size_t n;
    const talon__kernel *kd = NULL;
    uint8_t *c = copy_image(&n, &kd);
    uint32_t rng = 12345;
    elf e;
    (void)state;
    assert_true(elf_open(&e, "copy", c, n));
    const uint64_t shoff = e.eh.e_shoff, shsz = (uint64_t)e.eh.e_shnum * sizeof(Elf64_Shdr);
    for (int it = 0; it < 3000; it++) {
        size_t pos[4];
        uint8_t old[4];
        for (int j = 0; j < 4; j++) {
            rng = rng * 1664525u + 1013904223u;
            /* the ELF header, the section header table, or anywhere */
            pos[j] = j == 0 ? (rng >> 8) % 64 : j == 1 ? shoff + (rng >> 8) % shsz : (rng >> 8) % n;
            old[j] = c[pos[j]];
            c[pos[j]] = (uint8_t)(rng >> 24);
        }
        if (elf_open(&e, "fuzz", c, n)) {
            check_header(&e);
            check_no_ptx(&e);
            check_kernel_symbol(&e, kd->symbol);
            check_no_unlisted(&e, 0);
            check_params(&e, kd->symbol, kd->param_size);
            check_block(&e, kd->symbol, kd->block);
        }
        for (int j = 3; j >= 0; j--) c[pos[j]] = old[j];
    }
    free(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tables),
        cmocka_unit_test(test_elf_header_sm90a),
        cmocka_unit_test(test_no_ptx),
        cmocka_unit_test(test_listed_kernels_present),
        cmocka_unit_test(test_no_unlisted_kernels),
        cmocka_unit_test(test_param_sizes),
        cmocka_unit_test(test_block_sizes),
        cmocka_unit_test(test_rejects_corrupt),
        cmocka_unit_test(test_fuzz_no_crash),
    };
    return cmocka_run_group_tests_name("bundle", tests, NULL, NULL);
}
