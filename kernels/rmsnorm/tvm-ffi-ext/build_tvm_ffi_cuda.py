#!/usr/bin/env python3
"""Build the tvm-ffi CUDA variant without CMake (nvcc + gcc/g++ against the apache-tvm-ffi wheel)
and stage it as <hub>/build/tvm-ffi<MM>-cu<CUDA>-x86_64-linux/ (see stage_variant.py). For machines
that lack the project's build dependencies, e.g. the GPU box.
usage: build_tvm_ffi_cuda.py --hub DIR [--work DIR] [--unique U] [-D NAME=VALUE ...] [--archs 80,90]"""
import argparse
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
KERNEL = os.path.dirname(HERE)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hub", required=True)
    ap.add_argument("--work", default="/tmp/rmsnorm-tvm-ffi-cuda")
    ap.add_argument("--unique", default=None)
    ap.add_argument("-D", dest="defines", action="append", default=[])
    ap.add_argument("--archs", default="80,90")
    ap.add_argument("--nvcc", default=os.environ.get("NVCC", "nvcc"))
    args = ap.parse_args()
    import tvm_ffi
    import tvm_ffi.libinfo as li

    inc, lib = li.find_include_path(), li.find_libtvm_ffi()
    mm = re.match(r"(\d+)\.(\d+)", tvm_ffi.__version__)
    ver = subprocess.check_output([args.nvcc, "--version"], text=True)
    cv = re.search(r"release (\d+)\.(\d+)", ver)
    variant = f"tvm-ffi{mm.group(1)}{mm.group(2)}-cu{cv.group(1)}{cv.group(2)}-x86_64-linux"
    os.makedirs(args.work, exist_ok=True)
    archs = [a.strip() for a in args.archs.split(",") if a.strip()]
    gencode = []
    for a in archs:
        gencode += ["-gencode", f"arch=compute_{a},code=sm_{a}"]
    gencode += ["-gencode", f"arch=compute_{archs[-1]},code=compute_{archs[-1]}"]
    defs = [f"-D{d}" for d in args.defines]
    o = {n: os.path.join(args.work, n + ".o") for n in ("cu", "cpu", "bind")}
    cmds = [
        [args.nvcc, "-O3", "-std=c++17", "-Xcompiler", "-fPIC", *gencode, *defs, "-c",
         os.path.join(KERNEL, "rmsnorm_cuda", "rmsnorm.cu"), "-o", o["cu"]],
        ["gcc", "-O3", "-std=c11", "-fPIC", "-fopenmp", "-c",
         os.path.join(KERNEL, "rmsnorm_cpu", "rmsnorm_cpu.c"), "-o", o["cpu"]],
        ["g++", "-O3", "-std=c++17", "-fPIC", "-fvisibility=hidden", "-DRMSNORM_WITH_CUDA", "-isystem", inc,
         "-c", os.path.join(HERE, "tvm_ffi_binding.cpp"), "-o", o["bind"]],
    ]
    procs = [subprocess.Popen(c) for c in cmds]
    if any(p.wait() != 0 for p in procs):
        raise SystemExit("build_tvm_ffi_cuda: a compile step failed")
    cuda_lib = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(
        subprocess.check_output(["which", args.nvcc], text=True).strip()))), "lib64")
    so = os.path.join(args.work, "rmsnorm_tvm_ffi_cuda.so")
    subprocess.check_call(["g++", "-shared", "-o", so, o["bind"], o["cu"], o["cpu"],
                           f"-L{os.path.dirname(lib)}", "-ltvm_ffi", f"-L{cuda_lib}", "-lcudart_static",
                           "-ldl", "-lrt", "-lpthread", "-fopenmp", "-Wl,--no-undefined"])
    archs_meta = ",".join(f"{a[:-1]}.{a[-1]}" for a in archs[:-1])
    archs_meta += ("," if archs_meta else "") + f"{archs[-1][:-1]}.{archs[-1][-1]}+PTX"
    cmd = [sys.executable, os.path.join(KERNEL, "stage_variant.py"), "--source", KERNEL, "--hub", args.hub,
           "--framework", "tvm-ffi", "--backend", "cuda", "--variant", variant, "--library", so,
           "--archs", archs_meta]
    if args.unique:
        cmd += ["--unique", args.unique]
    print(subprocess.check_output(cmd, text=True).strip())


if __name__ == "__main__":
    main()
