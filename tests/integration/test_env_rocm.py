"""`hubkern env` and the ROCm (HIP) detection path through dlopen, with stand-in libamdhip64
libraries compiled here (no AMD GPU or ROCm on CI).

The stand-ins write the gcnArchName where hubkern expects each struct layout to hold it (byte 1160
of hipDeviceProp_tR0600, byte 396 of the HIP 5 / R0000 struct), so they check the plumbing (which
symbol is preferred, version decoding, validation, fallbacks), not the real layout: those offsets
come from the HIP headers (see docs/env-and-variants.md).
"""

import json
import os
import subprocess
import sys

HUBKERN = os.environ.get("HUBKERN_BIN", "hubkern")

FAKE_HIP = r"""
#include <string.h>
int hipRuntimeGetVersion(int *v) { *v = HK_VERSION; return 0; }
int hipGetDeviceCount(int *n) { *n = HK_COUNT; return HK_COUNT > 0 ? 0 : 100; }
#ifdef HK_R0600
int hipGetDevicePropertiesR0600(void *p, int dev) {
    if (dev != 0) return 101;
    strcpy((char *)p, "AMD Instinct MI300X");
    strcpy((char *)p + 1160, HK_R0600);
    return 0;
}
#endif
int hipGetDeviceProperties(void *p, int dev) {
    if (dev != 0) return 101;
    strcpy((char *)p, "AMD Instinct MI300X");
    strcpy((char *)p + 396, HK_R0000);
    return 0;
}
"""


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("HUBKERN_") and k != "TVM_FFI_LIB"}
    env["HUBKERN_PYTHON"] = "none"
    env["HUBKERN_NO_CUDA"] = "1"
    env.update(extra)
    return env


def run(args, env):
    p = subprocess.run([HUBKERN, *args], capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 0, f"hubkern {' '.join(args)} failed:\n{p.stdout}\n{p.stderr}"
    return p.stdout


def fake_hip(tmp_path, name, **defs):
    src = tmp_path / "fakehip.c"
    src.write_text(FAKE_HIP)
    libdir = tmp_path / name
    libdir.mkdir()
    flags = [f"-D{k}={v}" for k, v in defs.items()]
    subprocess.run(["cc", "-shared", "-fPIC", *flags, "-o", str(libdir / "libamdhip64.so"), str(src)],
                   check=True)
    return clean_env(LD_LIBRARY_PATH=f"{libdir}:{os.environ.get('LD_LIBRARY_PATH', '')}")


def test_hip6_prefers_r0600(tmp_path):
    # HIP 6+: hipGetDevicePropertiesR0600 fills the new struct; the plain symbol (old struct)
    # answers something else, which must not be used
    env = fake_hip(tmp_path, "hip6", HK_VERSION=60342134, HK_COUNT=2,
                   HK_R0600='"gfx942:sramecc+:xnack-"', HK_R0000='"gfx000"')
    got = json.loads(run(["env", "--json"], env))
    assert got["hip_runtime_version"] == "6.3"
    assert got["gpu_arch"] == "gfx942:sramecc+:xnack-"
    text = run(["env"], env)
    assert "gfx942 (gcnArchName gfx942:sramecc+:xnack-)" in text
    # --no-rocm / HUBKERN_NO_ROCM load nothing
    got = json.loads(run(["env", "--json", "--no-rocm"], env))
    assert got["gpu_arch"] is None and got["hip_runtime_version"] is None
    got = json.loads(run(["env", "--json"], {**env, "HUBKERN_NO_ROCM": "1"}))
    assert got["gpu_arch"] is None
    # an explicit value wins over detection
    got = json.loads(run(["env", "--json", "--gpu-arch", "gfx90a"], env))
    assert got["gpu_arch"] == "gfx90a"
    got = json.loads(run(["env", "--json"], {**env, "HUBKERN_GPU_ARCH": "gfx1100"}))
    assert got["gpu_arch"] == "gfx1100"


def test_hip5_plain_symbol(tmp_path):
    env = fake_hip(tmp_path, "hip5", HK_VERSION=50731921, HK_COUNT=1, HK_R0000='"gfx90a:sramecc+:xnack-"')
    got = json.loads(run(["env", "--json"], env))
    assert got["hip_runtime_version"] == "5.7"
    assert got["gpu_arch"] == "gfx90a:sramecc+:xnack-"


def test_no_device_or_garbage(tmp_path):
    # the runtime loads but sees no GPU: the version is known, the arch is not
    env = fake_hip(tmp_path, "nodev", HK_VERSION=60400000, HK_COUNT=0, HK_R0600='"gfx942"', HK_R0000='"gfx942"')
    got = json.loads(run(["env", "--json"], env))
    assert got["hip_runtime_version"] == "6.4" and got["gpu_arch"] is None
    # what sits at the expected offset is not a gcnArchName (a layout we do not know): unknown
    env = fake_hip(tmp_path, "garbage", HK_VERSION=60400000, HK_COUNT=1, HK_R0600='"MI300X"', HK_R0000='"gfx942"')
    got = json.loads(run(["env", "--json"], env))
    assert got["gpu_arch"] is None
    assert "gpu 0 arch             -" in run(["env"], env)


def test_no_hip_runtime(tmp_path):
    # a library of that name that is no HIP runtime is ignored; nothing fails
    libdir = tmp_path / "nothip"
    libdir.mkdir()
    src = tmp_path / "x.c"
    src.write_text("int not_hip(void) { return 0; }\n")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(libdir / "libamdhip64.so"), str(src)], check=True)
    env = clean_env(LD_LIBRARY_PATH=str(libdir))
    got = json.loads(run(["env", "--json"], env))
    assert got["gpu_arch"] is None and got["hip_runtime_version"] is None
