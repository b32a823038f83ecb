#!/usr/bin/env python3
"""Release-tarball helpers shared by tools/dist.mk and tools/verify-dist (stdlib only).

  talon_dist.py manifest TREE --version V --commit SHA --epoch N --nvcc X.Y.Z --archs "A..."
                         --name STEM [--cc CC] [--cflags FLAGS] [--cuda-include DIR]
      writes TREE/share/talon/MANIFEST.json describing every other file in TREE
  talon_dist.py files MANIFEST.json
      prints the relative paths a tree holds according to its manifest (the manifest last):
      the one list that make install copies and make uninstall removes
  talon_dist.py dirs PATH...
      the directories that hold PATHs (relative), each once, deepest first: what make
      uninstall tries to remove once it has removed the files
"""
import argparse, hashlib, json, os, re, subprocess, sys

# Where a tree (tarball or install prefix) keeps its manifest and the cubins.
MANIFEST = "share/talon/MANIFEST.json"
CUBINS = "share/talon/cubins"

# Tarball name: talon-<version>-<os>-<cpu>-cuda<major.minor>-<archs>.tar.gz
#   version  MAJOR.MINOR.PATCH without leading zeros; nightly builds append
#            .devYYYYMMDD+g<7 hex of the commit>
#   archs    the ARCHS list without underscores, joined by '-' (sm90a, sm90a-sm100a)
# The stem (name without .tar.gz) is also the single top-level directory inside.
NUM = r"(?:0|[1-9][0-9]*)"
NAME_RE = re.compile(
    rf"^talon-(?P<version>(?P<base>{NUM}\.{NUM}\.{NUM})(?:\.dev[0-9]{{8}}\+g[0-9a-f]{{7}})?)"
    r"-linux-(?P<cpu>x86_64|aarch64)-cuda(?P<cuda>[1-9][0-9]*\.[0-9]+)"
    r"-(?P<archs>sm[1-9][0-9]+[af]?(?:-sm[1-9][0-9]+[af]?)*)\.tar\.gz$")


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def tree_files(tree):
    """Relative paths of the regular files under tree, sorted."""
    out = []
    for d, _, names in os.walk(tree):
        out += [os.path.relpath(os.path.join(d, n), tree) for n in names]
    return sorted(out)


def header_kernels(include_dir, cc="cc", cuda_include=None):
    """(symbol, image) for every kernel row of the families' tables (talon/kernels/*.def, in
    TALON__IMAGES order), read by the C preprocessor so the list is exactly what the
    dispatcher compiles to."""
    src = ('#include "talon/kernels/all.def"\n'
           "#define TALON_DIST_K(sym, img, ...) TALON_DIST_KERNEL sym img ;\n"
           "#define TALON_DIST_I(img) TALON__KERNELS_##img(TALON_DIST_K)\n"
           "TALON__IMAGES(TALON_DIST_I)\n")
    cmd = cc.split() + ["-E", "-P", "-x", "c", "-I", include_dir]
    if cuda_include:
        cmd += ["-isystem", cuda_include]
    r = subprocess.run(cmd + ["-"], input=src, capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"preprocessing {include_dir}/talon/kernels/all.def failed: {r.stderr.strip()}")
    return re.findall(r"TALON_DIST_KERNEL (\w+) (\w+) ;", r.stdout)


# ELF e_machine of the objects in lib/libtalon.a, per <cpu> of the name.
ELF_MACHINES = {"x86_64": 62, "aarch64": 183}


def archive_machines(path):
    """The ELF e_machine of every object in a static archive (ar format)."""
    data = open(path, "rb").read()
    if data[:8] != b"!<arch>\n":
        raise ValueError(f"{path}: not an ar archive")
    out, pos = set(), 8
    while pos + 60 <= len(data):
        size = int(data[pos + 48:pos + 58].decode().strip())
        body = data[pos + 60:pos + 60 + size]
        if body[:4] == b"\x7fELF" and len(body) >= 20:
            out.add(int.from_bytes(body[18:20], "little" if body[5] == 1 else "big"))
        pos += 60 + size + (size & 1)
    return out


def compiler_version(cc):
    """First line of `CC --version`, or '' if it cannot be run."""
    try:
        r = subprocess.run(cc.split() + ["--version"], capture_output=True, text=True)
        return r.stdout.splitlines()[0].strip() if r.returncode == 0 and r.stdout else ""
    except OSError:
        return ""


def write_manifest(tree, a):
    files = [f for f in tree_files(tree) if f != MANIFEST]
    info = {f: {"sha256": sha256(os.path.join(tree, f)),
                "size": os.path.getsize(os.path.join(tree, f))} for f in files}
    kernels = []
    for sym, img in header_kernels(os.path.join(tree, "include"), a.cc, a.cuda_include):
        image = f"{CUBINS}/{img}.cubin"
        if image not in info:
            sys.exit(f"talon_dist: kernel {sym} needs {image}, which is not in {tree}")
        kernels.append({"symbol": sym, "image": image, **info[image]})
    if not kernels:
        sys.exit("talon_dist: no kernels found in the tables of talon/kernels/all.def")
    # the compiler and flags that built lib/libtalon.a: the bytes depend on them
    m = {"version": a.version, "git_commit": a.commit, "source_date_epoch": a.epoch,
         "nvcc_version": a.nvcc, "archs": a.archs.split(), "name": a.name,
         "cc": a.cc, "cc_version": compiler_version(a.cc), "cflags": a.cflags,
         "kernels": kernels, "files": info}
    with open(os.path.join(tree, MANIFEST), "w") as f:
        f.write(json.dumps(m, indent=2, sort_keys=True) + "\n")


def manifest_paths(path):
    with open(path) as f:
        return sorted(json.load(f)["files"]) + [MANIFEST]


def holding_dirs(paths):
    dirs = set()
    for p in paths:
        d = os.path.dirname(os.path.normpath(p))
        while d and d not in (".", "/"):
            dirs.add(d)
            d = os.path.dirname(d)
    return sorted(dirs, key=lambda d: (-d.count("/"), d))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("manifest")
    m.add_argument("tree")
    for opt in ("version", "commit", "nvcc", "archs", "name"):
        m.add_argument("--" + opt, required=True)
    m.add_argument("--epoch", type=int, required=True)
    m.add_argument("--cc", default="cc")
    m.add_argument("--cflags", default="")
    m.add_argument("--cuda-include")
    sub.add_parser("files").add_argument("manifest")
    sub.add_parser("dirs").add_argument("paths", nargs="*")
    a = p.parse_args()
    if a.cmd == "manifest":
        write_manifest(a.tree, a)
    elif a.cmd == "dirs":
        print("\n".join(holding_dirs(a.paths)))
    else:
        print("\n".join(manifest_paths(a.manifest)))


if __name__ == "__main__":
    main()
