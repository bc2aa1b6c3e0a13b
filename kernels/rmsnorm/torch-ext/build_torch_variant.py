#!/usr/bin/env python3
"""Build the torch-ext variant of the RMSNorm kernel against the installed torch and stage it as
<hub>/build/torch<MAJ><MIN>-cxx11-cu<CUDA>-x86_64-linux/ (see stage_variant.py).

Compiles with nvcc (CUDA kernels, SASS 8.0 + 9.0, PTX 9.0), gcc (C kernels) and g++ (binding,
against torch's headers, cxx11 ABI), links one <id>.abi3.so against libtorch/libc10 (+cudart).
usage: build_torch_variant.py --hub DIR [--work DIR] [--unique U]"""
import argparse
import os
import subprocess
import sys
import sysconfig

HERE = os.path.dirname(os.path.abspath(__file__))
KERNEL = os.path.dirname(HERE)
sys.path.insert(0, KERNEL)
import stage_variant  # noqa: E402


def run_all(cmds):
    procs = [(c, subprocess.Popen(c)) for c in cmds]
    for c, p in procs:
        if p.wait() != 0:
            raise SystemExit(f"build_torch_variant: failed: {' '.join(c)}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hub", required=True)
    ap.add_argument("--work", default=os.path.join(KERNEL, "..", "..", "build-torch-variant"))
    ap.add_argument("--unique", default=None)
    ap.add_argument("--archs", default="80,90", help="SASS targets (PTX of the last one is added)")
    args = ap.parse_args()

    import torch
    from torch.utils import cpp_extension

    if torch.version.cuda is None:
        raise SystemExit("build_torch_variant: this torch has no CUDA")
    tv = torch.__version__.split("+")[0].split(".")
    cv = torch.version.cuda.split(".")
    abi = "cxx11" if torch._C._GLIBCXX_USE_CXX11_ABI else "cxx98"
    variant = f"torch{tv[0]}{tv[1]}-{abi}-cu{cv[0]}{cv[1]}-x86_64-linux"
    unique = args.unique or stage_variant.unique_id(KERNEL)
    kid = f"_rmsnorm_cuda_{unique}"
    work = os.path.abspath(args.work)
    os.makedirs(work, exist_ok=True)

    incs = [f"-I{p}" for p in cpp_extension.include_paths(device_type="cuda")]
    libdirs = [f"-L{p}" for p in cpp_extension.library_paths(device_type="cuda")]
    pyinc = sysconfig.get_paths()["include"]
    pyinit = os.path.isfile(os.path.join(pyinc, "Python.h"))
    nvcc = os.path.join(cpp_extension.CUDA_HOME or "/usr/local/cuda", "bin", "nvcc")
    archs = [a.strip() for a in args.archs.split(",") if a.strip()]
    gencode = []
    for a in archs:
        gencode += ["-gencode", f"arch=compute_{a},code=sm_{a}"]
    gencode += ["-gencode", f"arch=compute_{archs[-1]},code=compute_{archs[-1]}"]
    abi_flag = f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}"
    o_cu, o_c, o_cpp = (os.path.join(work, n) for n in ("rmsnorm_cu.o", "rmsnorm_cpu.o", "binding.o"))
    run_all([
        [nvcc, "-O3", "-std=c++17", "-Xcompiler", "-fPIC", *gencode, "-c",
         os.path.join(KERNEL, "rmsnorm_cuda", "rmsnorm.cu"), "-o", o_cu],
        ["gcc", "-O3", "-std=c11", "-fPIC", "-fopenmp", "-c",
         os.path.join(KERNEL, "rmsnorm_cpu", "rmsnorm_cpu.c"), "-o", o_c],
        ["g++", "-O2", "-std=c++17", "-fPIC", "-fno-gnu-unique", abi_flag, *incs,
         f"-I{os.path.join(cpp_extension.CUDA_HOME or '/usr/local/cuda', 'include')}",
         *([f"-I{pyinc}", "-DRMSNORM_PYINIT"] if pyinit else []),
         f"-DRMSNORM_OPS_NAMESPACE={kid}", "-c", os.path.join(HERE, "torch_binding.cpp"), "-o", o_cpp],
    ])
    so = os.path.join(work, kid + ".abi3.so")
    cuda_lib = os.path.join(cpp_extension.CUDA_HOME or "/usr/local/cuda", "lib64")
    subprocess.check_call(["g++", "-shared", "-o", so, o_cpp, o_cu, o_c, *libdirs, f"-L{cuda_lib}",
                           "-lc10", "-ltorch", "-ltorch_cpu", "-lc10_cuda", "-ltorch_cuda",
                           "-lcudart", "-fopenmp"])
    out = subprocess.check_output([sys.executable, os.path.join(KERNEL, "stage_variant.py"),
                                   "--source", KERNEL, "--hub", args.hub, "--framework", "torch",
                                   "--backend", "cuda", "--variant", variant, "--library", so,
                                   "--archs", ",".join(f"{a[:-1]}.{a[-1]}" for a in archs[:-1]) +
                                   ("," if len(archs) > 1 else "") + f"{archs[-1][:-1]}.{archs[-1][-1]}+PTX",
                                   "--unique", unique], text=True)
    print(out.strip())
    print(f"pyinit={'yes' if pyinit else 'no (Python.h not found)'}")


if __name__ == "__main__":
    main()
