"""ctypes mirrors of talon's argument structs, built from libtalon_bench.so's description.

bench/shim.c lists every argument struct and its fields once (BENCH_STRUCTS: name and kind
of each field, in talon.h's order) and exports, through talon_bench_struct(), each field's
name, offsetof, sizeof and kind. build() turns that into a ctypes.Structure and checks it:
every field's ctypes offset and size against C's, and the total size against sizeof, raising
MirrorError naming the struct and field on any difference. No Python field lists exist.

Used by bench/ops.py (Talon.struct) and tests/bench/check_mirrors.py (make test, CPU only):
plain ctypes, no torch, no GPU (loading libtalon_bench.so needs no driver).
"""
import ctypes

# ctypes type of each kind of bench/shim.c
KINDS = {
    "PTR": ctypes.c_uint64,     # CUdeviceptr
    "HANDLE": ctypes.c_void_p,  # host pointer / driver handle (CUcontext)
    "I64": ctypes.c_int64,
    "I32": ctypes.c_int32,
    "U32": ctypes.c_uint32,
    "ENUM": ctypes.c_int,       # int-sized enum (talon_dtype, ...)
    "F32": ctypes.c_float,
}


class MirrorError(RuntimeError):
    pass


class Field(ctypes.Structure):  # talon_bench_field
    _fields_ = [("name", ctypes.c_char_p), ("offset", ctypes.c_size_t),
                ("size", ctypes.c_size_t), ("kind", ctypes.c_char_p)]


def _bind(lib):
    f = lib.talon_bench_struct
    f.restype = ctypes.POINTER(Field)
    f.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_size_t)]
    lib.talon_bench_struct_name.restype = ctypes.c_char_p
    lib.talon_bench_struct_name.argtypes = [ctypes.c_int]


def has_description(lib):
    """True for a libtalon_bench.so with talon_bench_struct (older builds have only sizes)."""
    return hasattr(lib, "talon_bench_struct") and hasattr(lib, "talon_bench_struct_name")


def names(lib):
    """The structs bench/shim.c lists, in its order."""
    _bind(lib)
    out, i = [], 0
    while True:
        n = lib.talon_bench_struct_name(i)
        if n is None:
            return out
        out.append(n.decode())
        i += 1


def describe(lib, name):
    """([(field, kind, offset, size)], sizeof) of struct `name` as C sees it."""
    _bind(lib)
    count, size = ctypes.c_int(), ctypes.c_size_t()
    p = lib.talon_bench_struct(name.encode(), ctypes.byref(count), ctypes.byref(size))
    if not p or count.value <= 0:
        raise MirrorError(f"{name}: not described by the library (not in bench/shim.c's "
                          "BENCH_STRUCTS)")
    fields = [(p[i].name.decode(), p[i].kind.decode(), p[i].offset, p[i].size)
              for i in range(count.value)]
    return fields, size.value


def from_description(name, fields, size):
    """A ctypes.Structure `name` from a description (as describe() returns), checked field by
    field against it: offset, size, then the total size. Raises MirrorError."""
    for f, kind, _, _ in fields:
        if kind not in KINDS:
            raise MirrorError(f"{name}.{f}: unknown kind {kind!r} (bench/mirror.py KINDS)")
    cls = type(name, (ctypes.Structure,), {"_fields_": [(f, KINDS[k]) for f, k, _, _ in fields]})
    for f, kind, off, sz in fields:
        got = getattr(cls, f)
        if got.offset != off:
            raise MirrorError(f"{name}.{f} ({kind}): ctypes offset {got.offset}, C offsetof "
                              f"{off}")
        if got.size != sz:
            raise MirrorError(f"{name}.{f} ({kind}): ctypes size {got.size}, C sizeof {sz}")
    if ctypes.sizeof(cls) != size:
        last = fields[-1][0] if fields else "(none)"
        raise MirrorError(f"{name}: ctypes size {ctypes.sizeof(cls)}, C sizeof {size} (the "
                          f"fields, up to {last}, do not cover the struct)")
    return cls


def build(lib, name, described_by=None):
    """The checked ctypes mirror of talon struct `name` for library `lib`.

    described_by: a library to take the description from when `lib` is an older build of
    libtalon_bench.so without talon_bench_struct (ops.py --base); then only the total size is
    checked, against that build's talon_bench_sizeof."""
    if has_description(lib):
        return from_description(name, *describe(lib, name))
    if described_by is None or not hasattr(lib, "talon_bench_sizeof"):
        raise MirrorError(f"{name}: the library describes no structs (no talon_bench_struct: "
                          "an old or foreign build?)")
    fields, size = describe(described_by, name)
    lib.talon_bench_sizeof.restype = ctypes.c_size_t
    lib.talon_bench_sizeof.argtypes = [ctypes.c_char_p]
    # 0: a struct that build did not list (talon_ctx_options): it never checked those
    return from_description(name, fields, lib.talon_bench_sizeof(name.encode()) or size)
