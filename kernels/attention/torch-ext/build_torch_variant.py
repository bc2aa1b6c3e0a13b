#!/usr/bin/env python3
"""Build the torch-ext variant of the attention kernels against the installed torch and stage it as
<hub>/build/torch<MAJ><MIN>-<abi>-cu<CUDA>-x86_64-linux/ (with kernels/rmsnorm/stage_variant.py,
which is kernel-agnostic: it reads this kernel's build.toml and copies torch-ext/attention/).

Compiles, in parallel: nvcc (the .cu files of attention_cuda/: SASS sm_80 and sm_90a, as the CMake
build does; no HK_TEST_HOOKS: the shipped variant reads no tuning knob from the environment),
gcc (the C implementation, for CPU tensors) and g++ (torch_binding.cpp against torch's headers,
torch's C++ ABI); links one <id>.abi3.so against libtorch/libc10 (+ cudart).
usage: build_torch_variant.py --hub DIR [--work DIR] [--unique U]"""
import argparse
import os
import subprocess
import sys
import sysconfig

HERE = os.path.dirname(os.path.abspath(__file__))
KERNEL = os.path.dirname(HERE)
STAGE = os.path.join(KERNEL, "..", "rmsnorm", "stage_variant.py")
sys.path.insert(0, os.path.dirname(STAGE))
import stage_variant  # noqa: E402


def build_parallel(cmds):
    running = [(cmd, subprocess.Popen(cmd)) for cmd in cmds]
    bad = [cmd for cmd, proc in running if proc.wait() != 0]
    if bad:
        raise SystemExit("build_torch_variant: failed: " + " ".join(bad[0]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hub", required=True, help="output repo root; the variant goes to <hub>/build/")
    ap.add_argument("--work", default=os.path.join(KERNEL, "..", "..", "build-torch-variant-attention"))
    ap.add_argument("--unique", default=None, help="override the id's unique part")
    args = ap.parse_args()

    import torch
    from torch.utils import cpp_extension

    if torch.version.cuda is None:
        raise SystemExit("build_torch_variant: this torch was built without CUDA")
    tmaj, tmin = torch.__version__.split("+")[0].split(".")[:2]
    cmaj, cmin = torch.version.cuda.split(".")[:2]
    cxx11 = int(torch._C._GLIBCXX_USE_CXX11_ABI)
    variant = f"torch{tmaj}{tmin}-{'cxx11' if cxx11 else 'cxx98'}-cu{cmaj}{cmin}-x86_64-linux"
    unique = args.unique or stage_variant.unique_id(KERNEL)
    kid = f"_attention_cuda_{unique}"
    work = os.path.abspath(args.work)
    os.makedirs(work, exist_ok=True)

    cuda_home = cpp_extension.CUDA_HOME or "/usr/local/cuda"
    torch_incs = [f"-I{p}" for p in cpp_extension.include_paths(device_type="cuda")]
    torch_libs = [f"-L{p}" for p in cpp_extension.library_paths(device_type="cuda")]
    kinc = [f"-I{os.path.join(KERNEL, 'attention_cpu')}", f"-I{os.path.join(KERNEL, 'attention_cuda')}"]
    pyinc = sysconfig.get_paths()["include"]
    pyinit = os.path.isfile(os.path.join(pyinc, "Python.h"))
    cuda_srcs = ["attention_cuda", "prefill_sm80", "decode_kernel", "decode_fp8", "decode_cache", "prefill_sm90"]
    obj = {n: os.path.join(work, n + ".o") for n in (*cuda_srcs, "cpu", "binding")}
    nvcc = [os.path.join(cuda_home, "bin", "nvcc"), "-O3", "-std=c++17", "--threads", "2", "-Xcompiler", "-fPIC",
            "-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_90a,code=sm_90a", *kinc]
    build_parallel([
        *[[*nvcc, "-c", os.path.join(KERNEL, "attention_cuda", n + ".cu"), "-o", obj[n]] for n in cuda_srcs],
        ["gcc", "-O3", "-std=c11", "-fPIC", *kinc, "-c",
         os.path.join(KERNEL, "attention_cpu", "attention_cpu.c"), "-o", obj["cpu"]],
        ["g++", "-O2", "-std=c++17", "-fPIC", "-fno-gnu-unique", f"-D_GLIBCXX_USE_CXX11_ABI={cxx11}",
         *torch_incs, f"-I{os.path.join(cuda_home, 'include')}", *kinc,
         *([f"-I{pyinc}", "-DATTN_PYINIT"] if pyinit else []), f"-DATTN_OPS_NAMESPACE={kid}",
         "-c", os.path.join(HERE, "torch_binding.cpp"), "-o", obj["binding"]],
    ])
    so = os.path.join(work, kid + ".abi3.so")
    subprocess.check_call(["g++", "-shared", "-o", so, obj["binding"], *[obj[n] for n in cuda_srcs], obj["cpu"], *torch_libs,
                           f"-L{os.path.join(cuda_home, 'lib64')}", "-lc10", "-ltorch", "-ltorch_cpu",
                           "-lc10_cuda", "-ltorch_cuda", "-lcudart", "-lm"])
    staged = subprocess.check_output([sys.executable, STAGE, "--source", KERNEL, "--hub", args.hub,
                                      "--framework", "torch", "--backend", "cuda", "--variant", variant,
                                      "--library", so, "--archs", "8.0,9.0", "--unique", unique], text=True)
    print(staged.strip())
    print(f"id={kid} variant={variant} pyinit={'yes' if pyinit else 'no (Python.h not found)'}")


if __name__ == "__main__":
    main()
