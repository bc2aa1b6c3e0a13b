#!/usr/bin/env python3
"""Proof without a GPU that a restructuring of the attention CUDA sources changed no kernel:
compiles every attention_cuda/*.cu of a base revision and of the working tree with nvcc (the
flags of kernels/attention/tests/hk_attention_ctypes.py, once plain and once with
-DHK_TEST_HOOKS), dumps each object's SASS with cuobjdump, and compares it kernel by kernel
(per architecture, sorted by name), instruction for instruction.

Kernels are matched by demangled name; kernels renamed by the restructuring (template
parameters that became tile structs, say) are matched through the regex rewrites of
sass_names.txt (beside this script), applied to the base's names. Host code is not compared.
A kernel whose instructions differ only in kernel-parameter offsets (c[0x0][...], a moved
params field) is reported as such, with the number of lines; any other difference, or a
kernel present on one side only, fails the run (exit status 1).

  python3 kernels/attention/tools/sass_compare.py [--base main] [--variants plain,hooks]

Objects are cached under --cache by a hash of each unit's flags and included sources, so that
a base revision compiles once and a step recompiles only the units it touched. Run from anywhere inside the repository.
"""
import argparse
import concurrent.futures
import hashlib
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

NVCC_FLAGS = ["-O3", "-std=c++17", "-gencode=arch=compute_90a,code=sm_90a",
              "-gencode=arch=compute_80,code=sm_80", "-Xcompiler", "-fPIC"]
VARIANTS = {"plain": [], "hooks": ["-DHK_TEST_HOOKS"]}
SRC_DIRS = ("kernels/attention/attention_cuda", "kernels/attention/attention_cpu")
HERE = pathlib.Path(__file__).resolve().parent


def cuobjdump():
    """cuobjdump from PATH, else from the nvidia-cuda-cuobjdump wheel (with nvidia-cuda-nvdisasm
    beside it, which cuobjdump runs)."""
    exe = shutil.which("cuobjdump")
    if exe:
        return exe
    try:
        import nvidia  # the wheels' namespace package
        for d in nvidia.__path__:
            for cand in pathlib.Path(d).glob("cu*/bin/cuobjdump"):
                os.environ["PATH"] = os.environ["PATH"] + os.pathsep + str(cand.parent)
                return str(cand)
    except ImportError:
        pass
    sys.exit("cuobjdump not found: install the CUDA toolkit's, or pip install nvidia-cuda-cuobjdump "
             "nvidia-cuda-nvdisasm")


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw).stdout


def tree_of(repo, rev, cache):
    """The attention sources of rev, extracted once into the cache."""
    commit = sh(["git", "-C", repo, "rev-parse", rev + "^{commit}"]).strip()
    dst = cache / ("src-" + commit[:16])
    if not (dst / SRC_DIRS[0]).is_dir():
        tmp = pathlib.Path(tempfile.mkdtemp(dir=cache))
        arch = subprocess.run(["git", "-C", repo, "archive", commit, *SRC_DIRS], check=True,
                              capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tmp)], input=arch, check=True)
        tmp.rename(dst)
    return dst, commit[:10]


INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


def unit_hash(root, cu, flags):
    """A hash of a translation unit: its flags and the sources it includes from the tree (the
    quoted includes found in attention_cuda/ and attention_cpu/, followed recursively), so
    that a step recompiles only the units it touched."""
    dirs = [root / d for d in SRC_DIRS]
    seen, todo = {}, [cu]
    while todo:
        f = todo.pop()
        if f in seen:
            continue
        seen[f] = f.read_bytes()
        for inc in INCLUDE.findall(seen[f].decode(errors="replace")):
            for d in [f.parent, *dirs]:
                if (d / inc).is_file():
                    todo.append((d / inc).resolve())
                    break
    h = hashlib.sha256(" ".join(NVCC_FLAGS + flags).encode() + b"\0" + cu.name.encode())
    for f in sorted(seen, key=lambda x: x.name):
        h.update(f.name.encode() + b"\0" + seen[f] + b"\0")
    return h.hexdigest()[:20]


def compile_one(root, cu, flags, obj):
    if obj.exists():
        return obj
    att = root / "kernels/attention"
    tmp = obj.with_suffix(".tmp.o")
    cmd = ["nice", "nvcc", *NVCC_FLAGS, *flags, "-I" + str(att / "attention_cpu"),
           "-I" + str(att / "attention_cuda"), "-c", str(cu), "-o", str(tmp)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"nvcc failed on {cu}:\n{r.stderr}")
    tmp.rename(obj)
    return obj


CUOBJDUMP = "cuobjdump"
COMMENT = re.compile(r"/\*.*?\*/")
PARAM = re.compile(r"c\[0x0\]\[0x[0-9a-f]+\]")


def sass_functions(obj):
    """{(arch, mangled name): [normalised instruction lines]} of one object."""
    out, arch, name = {}, None, None
    dump = obj.with_suffix(".sass")  # cached beside the object: cuobjdump is slow on large ones
    if not dump.exists():
        dump.with_suffix(".tmp").write_text(sh([CUOBJDUMP, "-sass", str(obj)]))
        dump.with_suffix(".tmp").rename(dump)
    for line in dump.read_text().splitlines():
        s = line.strip()
        if s.startswith("code for sm_"):
            arch, name = s.split()[-1], None
        elif s.startswith("Function :"):
            name = s.split(":", 1)[1].strip()
            out[(arch, name)] = []
        elif name is not None and not s.startswith(".headerflags"):
            s = " ".join(COMMENT.sub("", s).split())
            if s:
                out[(arch, name)].append(s)
    return out


def demangle(names):
    if not names:
        return {}
    res = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True,
                         check=True).stdout.splitlines()
    return dict(zip(names, res))


def load_rules(path):
    rules = []
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                old, new = line.split("\t=>\t") if "\t=>\t" in line else line.split(" => ")
                rules.append((re.compile(old.strip()), new.strip()))
    return rules


def kernels(root, variant, cache, jobs):
    """{(arch, demangled name): lines} over every .cu of a tree, compiled with variant's flags."""
    flags = VARIANTS[variant]
    cus = sorted((root / SRC_DIRS[0]).glob("*.cu"))
    objs = []
    with concurrent.futures.ThreadPoolExecutor(jobs) as ex:
        futs = [ex.submit(compile_one, root, cu, flags, cache / f"{cu.stem}-{variant}-{unit_hash(root, cu.resolve(), flags)}.o") for cu in cus]
        objs = [f.result() for f in futs]
    merged = {}
    for obj in objs:
        fns = sass_functions(obj)
        dm = demangle(sorted({n for _, n in fns}))
        for (arch, n), lines in fns.items():
            k = (arch, dm[n])
            if k in merged and merged[k] != lines:
                sys.exit(f"{k} defined differently in two objects of one tree")
            merged[k] = lines
    return merged


def compare(base, new, rules):
    def rename(name):
        for rx, rep in rules:
            name = rx.sub(rep, name)
        return name
    mapped = {}
    for (arch, n), lines in base.items():
        k = (arch, rename(n))
        if k in mapped:
            sys.exit(f"two base kernels map to {k}: fix sass_names.txt")
        mapped[k] = lines
    same, param_only, differ = [], [], []
    for k in sorted(set(mapped) & set(new)):
        a, b = mapped[k], new[k]
        if a == b:
            same.append(k)
            continue
        pa, pb = [PARAM.sub("c[0x0][P]", x) for x in a], [PARAM.sub("c[0x0][P]", x) for x in b]
        ndiff = sum(x != y for x, y in zip(a, b)) + abs(len(a) - len(b))
        (param_only if pa == pb else differ).append((k, len(a), len(b), ndiff))
    return same, param_only, differ, sorted(set(mapped) - set(new)), sorted(set(new) - set(mapped))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", default="main", help="git revision to compare against (default main)")
    ap.add_argument("--variants", default="plain,hooks", help="plain, hooks or both (comma-separated)")
    ap.add_argument("--cache", default=os.environ.get("HK_SASS_CACHE", "/tmp/hk_sass_cache"))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--names", default=str(HERE / "sass_names.txt"), help="old => new name rewrites")
    ap.add_argument("-v", "--verbose", action="store_true", help="list every kernel")
    a = ap.parse_args()
    global CUOBJDUMP
    CUOBJDUMP = cuobjdump()
    repo = sh(["git", "-C", str(HERE), "rev-parse", "--show-toplevel"]).strip()
    cache = pathlib.Path(a.cache)
    cache.mkdir(parents=True, exist_ok=True)
    base_root, base_id = tree_of(repo, a.base, cache)
    rules = load_rules(pathlib.Path(a.names))
    failed = False
    print(f"base {a.base} ({base_id}) vs working tree {repo}; name rewrites: {len(rules)}")
    print("| variant | arch | kernels | identical | param offsets only | differ | base only | new only |")
    print("|---|---|---|---|---|---|---|---|")
    details = []
    for variant in a.variants.split(","):
        base = kernels(base_root, variant, cache, a.jobs)
        new = kernels(pathlib.Path(repo), variant, cache, a.jobs)
        for arch in sorted({k[0] for k in base} | {k[0] for k in new}):
            b = {k: v for k, v in base.items() if k[0] == arch}
            n = {k: v for k, v in new.items() if k[0] == arch}
            same, par, dif, bo, no = compare(b, n, rules)
            failed |= bool(dif or bo or no)
            print(f"| {variant} | {arch} | {len(n)} | {len(same)} | {len(par)} | {len(dif)} | {len(bo)} | {len(no)} |")
            for (k, la, lb, nd) in par:
                details.append(f"  {variant} {arch} PARAM-OFFSETS {k[1]}: {nd} of {la} lines")
            for (k, la, lb, nd) in dif:
                details.append(f"  {variant} {arch} DIFFER {k[1]}: {la} -> {lb} lines, {nd} differ")
            details += [f"  {variant} {arch} BASE-ONLY {k[1]}" for k in bo]
            details += [f"  {variant} {arch} NEW-ONLY {k[1]}" for k in no]
            if a.verbose:
                details += [f"  {variant} {arch} same {k[1]} ({len(n[k])} lines)" for k in same]
    print("\n".join(details))
    print("FAIL: SASS changed" if failed else "OK: every kernel's SASS identical (exceptions listed above)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
