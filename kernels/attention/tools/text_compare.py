#!/usr/bin/env python3
"""Proof without a GPU (and without cuobjdump) that a host-side restructuring changed no kernel:
compiles attention_cuda units of a base revision and of the working tree to cubins with nvcc,
one per architecture, and compares the bytes of each kernel's `.text.<mangled name>` ELF section
(its SASS) between the two.

Kernels are matched by instantiation, not by mangled name: the demangled name without namespaces
and parameter list, with template arguments that are tile structs flattened into their own
arguments (`prefill_kernel<true, 128, Sm80Tile<4, 2, 64, true>, false>` is the same instantiation
as `prefill_kernel<true, 128, 4, 2, 64, true, false>`). A rename of a kernel's parameter struct
therefore matches too; the identical .text (whose constant-bank loads carry the parameter offsets)
shows that the layout did not move. Exit status 1 when a kernel differs or has no counterpart.

  python3 kernels/attention/tools/text_compare.py [--base main] [--units prefill_sm80.cu,...]

Cubins are kept under --work, keyed by a hash of the flags and the sources, so a rerun only
recompiles the side that changed. At most --jobs nvcc processes at once (default 2).
"""
import argparse
import concurrent.futures
import hashlib
import pathlib
import re
import struct
import subprocess
import sys

NVCC = ["nvcc", "-cubin", "-O3", "-std=c++17", "--expt-relaxed-constexpr"]
ARCHS = {"sm_80": "arch=compute_80,code=sm_80", "sm_90a": "arch=compute_90a,code=sm_90a"}
SRC_DIRS = ("attention_cuda", "attention_cpu")


def source_hash(attn_dir, flags):
    h = hashlib.sha256(" ".join(flags).encode())
    for d in SRC_DIRS:
        for f in sorted((attn_dir / d).iterdir()):
            if f.is_file():
                h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def compile_unit(attn_dir, unit, arch, defines, out):
    flags = NVCC + ["-gencode=" + ARCHS[arch]] + [f"-D{d}" for d in defines]
    key = source_hash(attn_dir, flags)
    stamp = out.with_suffix(".key")
    if out.exists() and stamp.exists() and stamp.read_text() == key:
        return out
    cmd = flags + [f"-I{attn_dir / d}" for d in SRC_DIRS] + [str(attn_dir / "attention_cuda" / unit), "-o", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"nvcc failed on {attn_dir}/{unit} ({arch}):\n{r.stderr}")
    if source_hash(attn_dir, flags) == key:  # not stamped if the sources changed while nvcc ran
        stamp.write_text(key)
    return out


def text_sections(cubin):
    """{mangled kernel name: (.text bytes, registers)} of one cubin (a plain ELF64)."""
    e = cubin.read_bytes()
    shoff, = struct.unpack_from("<Q", e, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", e, 0x3A)
    secs = [struct.unpack_from("<IIQQQQII", e, shoff + i * shentsize) for i in range(shnum)]
    strtab = secs[shstrndx][4]
    texts = {}
    for name_off, _, _, _, off, size, _, info in secs:
        name = e[strtab + name_off:e.index(b"\0", strtab + name_off)].decode()
        if name.startswith(".text."):
            texts[name[len(".text."):]] = (e[off:off + size], info >> 24)  # sh_info's top byte: registers (256 reads 0)
    return texts


def demangle(names):
    r = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True)
    return dict(zip(names, r.stdout.splitlines()))


NESTED = re.compile(r"(?<=[<,] )\w+<([^<>]*)>|(?<=<)\w+<([^<>]*)>")


def instantiation(demangled):
    """The kernel's template and its flattened template arguments (see the module docstring)."""
    s = demangled.replace("(anonymous namespace)::", "")
    s = re.sub(r"^void ", "", s)
    s = s[:s.index(">(") + 1] if ">(" in s else s.split("(")[0]
    name, args = s.split("<", 1)
    args = args[:-1]
    while True:
        flat = NESTED.sub(lambda m: m.group(1) if m.group(1) is not None else m.group(2), args)
        if flat == args:
            break
        args = flat
    name = re.sub(r"^.*::", "", name)
    return f"{name}<{args}>"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default="main", help="base revision (git)")
    ap.add_argument("--units", default="prefill_sm80.cu,prefill_sm90.cu")
    ap.add_argument("--archs", default="sm_80,sm_90a")
    ap.add_argument("--define", action="append", default=[], help="extra -D for both sides")
    ap.add_argument("--work", default="/tmp/hk_text_compare")
    ap.add_argument("--jobs", type=int, default=2)
    a = ap.parse_args()

    root = pathlib.Path(subprocess.check_output(["git", "rev-parse", "--show-toplevel"], text=True).strip())
    base_rev = subprocess.check_output(["git", "-C", str(root), "rev-parse", "--short=10", a.base], text=True).strip()
    work = pathlib.Path(a.work)
    base_tree = work / f"src-{base_rev}"
    if not base_tree.exists():
        base_tree.mkdir(parents=True)
        archive = subprocess.run(["git", "-C", str(root), "archive", base_rev, "kernels/attention"],
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(base_tree)], input=archive, check=True)
    sides = {"base": base_tree / "kernels/attention", "new": root / "kernels/attention"}
    units, archs = a.units.split(","), a.archs.split(",")
    tag = "-".join(["plain"] + a.define)

    jobs = {}
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
        for side, attn_dir in sides.items():
            (work / tag / side).mkdir(parents=True, exist_ok=True)
            for unit in units:
                for arch in archs:
                    out = work / tag / side / f"{pathlib.Path(unit).stem}.{arch}.cubin"
                    jobs[side, unit, arch] = pool.submit(compile_unit, attn_dir, unit, arch, a.define, out)
        cubins = {k: f.result() for k, f in jobs.items()}

    nvcc_version = subprocess.check_output(["nvcc", "--version"], text=True).strip().splitlines()[-1]
    print(f"# base {a.base} ({base_rev}) vs working tree {root}; {nvcc_version}")
    print(f"# {' '.join(NVCC)} -gencode=<arch> {' '.join('-D' + d for d in a.define)}".rstrip())
    total = same = 0
    failed = False
    for unit in units:
        for arch in archs:
            texts = {s: text_sections(cubins[s, unit, arch]) for s in sides}
            names = demangle(sorted(set(texts["base"]) | set(texts["new"])))
            by_inst = {s: {instantiation(names[m]): m for m in texts[s]} for s in sides}
            print(f"\n## {unit} {arch}: {len(by_inst['base'])} kernels in base, {len(by_inst['new'])} in new")
            for inst in sorted(set(by_inst["base"]) | set(by_inst["new"])):
                mb, mn = by_inst["base"].get(inst), by_inst["new"].get(inst)
                if mb is None or mn is None:
                    failed = True
                    print(f"  {'NEW ONLY ' if mb is None else 'BASE ONLY'} {inst}")
                    continue
                (tb, rb), (tn, rn) = texts["base"][mb], texts["new"][mn]
                total += 1
                if tb == tn:
                    same += 1
                    verdict = "identical"
                else:
                    failed = True
                    words = sum(tb[i:i + 16] != tn[i:i + 16] for i in range(0, min(len(tb), len(tn)), 16))
                    verdict = f"DIFFERS ({words} of {len(tb) // 16} instruction words)"
                renamed = "" if mb == mn else f"  [{names[mb]}  ->  {names[mn]}]"
                print(f"  {verdict}  {len(tb) // 16:5} -> {len(tn) // 16:5} instrs  regs {rb}->{rn}  {inst}{renamed}")
    print(f"\nTOTAL {total} kernels compared, {same} identical, {total - same} differ"
          f"{'; some without a counterpart' if failed and total == same else ''}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
