/* Variant names (parse / format) and resolution: kernel-hub-format.md §3-§5 and kernels 0.17.
 * Over 600 lines on purpose: one test program per layer; mostly tables of names and expected results.
 */
#include "support.h"

#include <hubkern.h>

#include "variant/variant_internal.h" /* builds variants by hand for to_string's refusals */

#include <cJSON.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ------------------------------------------------------------------------------- */

/* An env from "key=value key=value ..." on a blank machine. */
static hk_env *sys_env(const char *desc) {
    hk_env *env = NULL;
    if (hk_env_new(&env) != HK_OK) return NULL;
    char *copy = strdup(desc);
    char *save = NULL;
    for (char *kv = strtok_r(copy, " ", &save); kv; kv = strtok_r(NULL, " ", &save)) {
        char *eq = strchr(kv, '=');
        if (!eq) continue;
        *eq = '\0';
        if (hk_env_set(env, kv, eq + 1) != HK_OK) {
            fprintf(stderr, "bad test system key %s=%s: %s\n", kv, eq + 1, hk_last_error());
            hk_test_failures++;
        }
    }
    free(copy);
    return env;
}

/* Resolve space-separated names; returns the resolution (caller frees). */
static hk_resolution *resolve(const char *system, const char *names, const char *override) {
    hk_env *env = sys_env(system);
    const char *list[64];
    size_t n = 0;
    char *copy = strdup(names);
    char *save = NULL;
    for (char *t = strtok_r(copy, " ", &save); t && n < 64; t = strtok_r(NULL, " ", &save)) list[n++] = t;
    hk_resolution *r = NULL;
    int rc = hk_resolve_variants(&r, env, list, n, override);
    if (rc != HK_OK) {
        fprintf(stderr, "resolve failed: %s\n", hk_last_error());
        hk_test_failures++;
    }
    free(copy);
    hk_env_free(env);
    return r;
}

static const char *reason_of(const hk_resolution *r, const char *name) {
    for (size_t i = 0; i < hk_resolution_count(r); i++)
        if (strcmp(hk_resolution_name(r, i), name) == 0) return hk_resolution_reason(r, i);
    return "(not in trace)";
}

static int accepted_of(const hk_resolution *r, const char *name) {
    for (size_t i = 0; i < hk_resolution_count(r); i++)
        if (strcmp(hk_resolution_name(r, i), name) == 0) return hk_resolution_accepted(r, i);
    return -1;
}

/* The trace order as "a b c" (names). */
static char *order_of(const hk_resolution *r) {
    static char buf[4096];
    buf[0] = '\0';
    for (size_t i = 0; i < hk_resolution_count(r); i++) {
        if (i) strcat(buf, " ");
        strcat(buf, hk_resolution_name(r, i));
    }
    return buf;
}

/* ---- a table of resolution cases --------------------------------------------------------- */

#define LINUX "os=linux cpu=x86_64 python_version=3.12.1 "
#define REF_CANDIDATES                                                                      \
    "torch210-cxx11-cu126-x86_64-linux torch210-cxx11-cu128-x86_64-linux "                  \
    "torch210-cxx11-cu130-x86_64-linux torch210-cxx11-rocm70-x86_64-linux "                 \
    "torch210-cxx11-cpu-x86_64-linux torch210-cpu-aarch64-darwin torch210-metal-aarch64-darwin " \
    "torch-cuda torch-cpu"

typedef struct res_case {
    const char *what;
    const char *system;
    const char *names;
    const char *override;
    const char *best;        /* NULL: nothing accepted */
    const char *probe;       /* a candidate whose reason we check (or NULL) */
    const char *reason;      /* its exact reason */
} res_case;

static const res_case k_cases[] = {
    /* §5.2 reference cases */
    {"ref CUDA 12.8", LINUX "torch_version=2.10 torch_cxx11_abi=1 backend=cuda backend_version=12.8", REF_CANDIDATES, NULL,
     "torch210-cxx11-cu128-x86_64-linux", "torch210-cxx11-cu130-x86_64-linux",
     "CUDA version (13.0) is not compatible with system CUDA version (12.8)"},
    {"ref CUDA 12.9 takes the best older minor", LINUX "torch_version=2.10 torch_cxx11_abi=1 torch_cuda_version=12.9", REF_CANDIDATES, NULL,
     "torch210-cxx11-cu128-x86_64-linux", "torch210-cxx11-cu126-x86_64-linux", "compatible"},
    {"ref CUDA 12.5 falls back to torch-cuda", LINUX "torch_version=2.10 torch_cxx11_abi=1 torch_cuda_version=12.5", REF_CANDIDATES, NULL,
     "torch-cuda", "torch210-cxx11-cu126-x86_64-linux",
     "CUDA version (12.6) is not compatible with system CUDA version (12.5)"},
    {"ref CUDA 11.8 falls back to torch-cuda", LINUX "torch_version=2.10 torch_cxx11_abi=1 torch_cuda_version=11.8", REF_CANDIDATES, NULL,
     "torch-cuda", "torch210-cxx11-cu128-x86_64-linux",
     "CUDA version (12.8) is not compatible with system CUDA version (11.8)"},
    {"ref ROCm 7.0", LINUX "torch_version=2.10 torch_cxx11_abi=1 torch_hip_version=7.0", REF_CANDIDATES, NULL,
     "torch210-cxx11-rocm70-x86_64-linux", "torch-cuda",
     "backend (cuda) does not match system backend (rocm) and is not universal"},
    {"CUDA 13.0 takes cu130", LINUX "torch_version=2.10 torch_cxx11_abi=1 torch_cuda_version=13.0", REF_CANDIDATES, NULL,
     "torch210-cxx11-cu130-x86_64-linux", "torch210-cxx11-rocm70-x86_64-linux",
     "backend (rocm70) does not match selected backend (cu130)"},
    {"explicit cpu backend on a CUDA machine", LINUX "torch_version=2.10 torch_cxx11_abi=1 torch_cuda_version=12.8", REF_CANDIDATES, "cpu",
     "torch210-cxx11-cpu-x86_64-linux", "torch210-cxx11-cu128-x86_64-linux",
     "backend (cu128) does not match selected backend (cpu)"},
    {"explicit backend equal to the detected one", LINUX "torch_version=2.10 torch_cxx11_abi=1 torch_cuda_version=12.8", REF_CANDIDATES, "cuda",
     "torch210-cxx11-cu128-x86_64-linux", NULL, NULL},
    {"cpu torch picks the cpu build", LINUX "torch_version=2.10 torch_cxx11_abi=1 backend=cpu", REF_CANDIDATES, NULL,
     "torch210-cxx11-cpu-x86_64-linux", "torch-cpu", "compatible"},
    {"without the cpu arch build, torch-cpu", LINUX "torch_version=2.10 torch_cxx11_abi=1 backend=cpu",
     "torch210-cxx11-cu128-x86_64-linux torch-cuda torch-cpu", NULL, "torch-cpu", NULL, NULL},
    /* rejections, one per rule, with kernels' wording */
    {"cpu mismatch", LINUX "torch_version=2.10 backend=cpu", "torch210-cpu-aarch64-linux", NULL, NULL,
     "torch210-cpu-aarch64-linux", "CPU (aarch64) does not match system CPU (x86_64)"},
    {"os mismatch", LINUX "torch_version=2.10 backend=cpu", "torch210-cpu-x86_64-windows", NULL, NULL,
     "torch210-cpu-x86_64-windows", "OS (windows) does not match system OS (linux)"},
    {"torch version mismatch", LINUX "torch_version=2.13 torch_cuda_version=13.0",
     "torch212-cxx11-cu126-x86_64-linux torch213-cxx11-cu130-x86_64-linux", NULL, "torch213-cxx11-cu130-x86_64-linux",
     "torch212-cxx11-cu126-x86_64-linux", "Torch version (2.12) does not match environment Torch version (2.13)"},
    {"no torch rejects exact-torch builds", LINUX "cuda_runtime_version=13.0",
     "torch213-cxx11-cu130-x86_64-linux", NULL, NULL,
     "torch213-cxx11-cu130-x86_64-linux", "Torch version (2.13) does not match environment Torch version (None)"},
    {"cxx98 build on a cxx11 torch", LINUX "torch_version=2.5 torch_cxx11_abi=1 torch_cuda_version=12.4",
     "torch25-cxx98-cu124-x86_64-linux", NULL, NULL,
     "torch25-cxx98-cu124-x86_64-linux", "Torch CXX11 ABI (False) does not match environment Torch CXX11 ABI (True)"},
    {"cxx11 build on a cxx98 torch", LINUX "torch_version=2.5 torch_cxx11_abi=0 torch_cuda_version=12.4",
     "torch25-cxx11-cu124-x86_64-linux torch25-cxx98-cu124-x86_64-linux", NULL, "torch25-cxx98-cu124-x86_64-linux",
     "torch25-cxx11-cu124-x86_64-linux", "Torch CXX11 ABI (True) does not match environment Torch CXX11 ABI (False)"},
    {"untagged builds ignore the ABI", LINUX "torch_version=2.5 torch_cxx11_abi=0 torch_cuda_version=12.4",
     "torch25-cu124-x86_64-linux", NULL, "torch25-cu124-x86_64-linux", NULL, NULL},
    {"tagged build where the ABI is unknown (macOS)", "os=darwin cpu=aarch64 macos_version=26.1 python_version=3.12.1 torch_version=2.10 backend=cpu",
     "torch210-cxx11-cpu-aarch64-darwin torch210-cpu-aarch64-darwin", NULL, "torch210-cpu-aarch64-darwin",
     "torch210-cxx11-cpu-aarch64-darwin", "Torch CXX11 ABI (True) does not match environment Torch CXX11 ABI (None)"},
    {"torch >= 2.8 on Linux is cxx11 without being told", LINUX "torch_version=2.13 torch_cuda_version=13.0",
     "torch213-cxx11-cu130-x86_64-linux", NULL, "torch213-cxx11-cu130-x86_64-linux", NULL, NULL},
    {"stable ABI newer than torch", LINUX "torch_version=2.13 torch_cuda_version=13.0",
     "torch-stable-abi214-cu130-x86_64-linux torch-stable-abi29-cu130-x86_64-linux", NULL,
     "torch-stable-abi29-cu130-x86_64-linux", "torch-stable-abi214-cu130-x86_64-linux",
     "Torch stable ABI version (2.14) is too new for environment Torch version (2.13)"},
    {"stable ABI without torch", LINUX "cuda_runtime_version=13.0",
     "torch-stable-abi211-cu130-x86_64-linux", NULL, NULL, "torch-stable-abi211-cu130-x86_64-linux",
     "Torch stable ABI version (2.11) is too new for environment Torch version (None)"},
    {"stable ABI equal to torch", LINUX "torch_version=2.11 torch_cuda_version=12.6",
     "torch-stable-abi211-cu126-x86_64-linux", NULL, "torch-stable-abi211-cu126-x86_64-linux", NULL, NULL},
    {"tvm-ffi version mismatch", LINUX "tvm_ffi_version=0.1 cuda_runtime_version=13.0",
     "tvm-ffi02-cu130-x86_64-linux tvm-ffi01-cu130-x86_64-linux", NULL, "tvm-ffi01-cu130-x86_64-linux",
     "tvm-ffi02-cu130-x86_64-linux", "tvm-ffi version (0.2) does not match environment tvm-ffi version (0.1)"},
    {"tvm-ffi absent", LINUX "cuda_runtime_version=13.0", "tvm-ffi01-cu130-x86_64-linux", NULL, NULL,
     "tvm-ffi01-cu130-x86_64-linux", "tvm-ffi version (0.1) does not match environment tvm-ffi version (None)"},
    {"CUDA minor above the system's", LINUX "tvm_ffi_version=0.1 cuda_runtime_version=13.0",
     "tvm-ffi01-cu132-x86_64-linux tvm-ffi01-cu130-x86_64-linux", NULL, "tvm-ffi01-cu130-x86_64-linux",
     "tvm-ffi01-cu132-x86_64-linux", "CUDA version (13.2) is not compatible with system CUDA version (13.0)"},
    {"CUDA major differs", LINUX "tvm_ffi_version=0.1 cuda_runtime_version=13.2",
     "tvm-ffi01-cu129-x86_64-linux", NULL, NULL,
     "tvm-ffi01-cu129-x86_64-linux", "CUDA version (12.9) is not compatible with system CUDA version (13.2)"},
    {"CUDA build on a CPU system", LINUX "tvm_ffi_version=0.1",
     "tvm-ffi01-cu130-x86_64-linux tvm-ffi01-cpu-x86_64-linux", NULL, "tvm-ffi01-cpu-x86_64-linux",
     "tvm-ffi01-cu130-x86_64-linux", "backend (cu130) does not match selected backend (cpu)"},
    {"ROCm needs the exact version", LINUX "torch_version=2.13 torch_hip_version=7.2",
     "torch213-cxx11-rocm71-x86_64-linux torch213-cxx11-rocm72-x86_64-linux", NULL,
     "torch213-cxx11-rocm72-x86_64-linux", "torch213-cxx11-rocm71-x86_64-linux",
     "backend (rocm71) does not match selected backend (rocm72)"},
    {"XPU exact", LINUX "torch_version=2.13 torch_xpu_version=2026.0",
     "torch213-cxx11-xpu20253-x86_64-linux torch213-cxx11-xpu20260-x86_64-linux", NULL,
     "torch213-cxx11-xpu20260-x86_64-linux", "torch213-cxx11-xpu20253-x86_64-linux",
     "backend (xpu20253) does not match selected backend (xpu20260)"},
    {"CANN and its noarch name npu", LINUX "torch_version=2.13 backend=cann backend_version=8.1",
     "torch213-cxx11-cann81-x86_64-linux torch-npu torch-cann", NULL, "torch213-cxx11-cann81-x86_64-linux",
     "torch-cann", "backend (cann) does not match system backend (npu) and is not universal"},
    {"CANN noarch", LINUX "torch_version=2.13 backend=cann backend_version=8.1", "torch-npu torch-cann", NULL,
     "torch-npu", NULL, NULL},
    {"neuron", LINUX "torch_version=2.13 backend=neuron",
     "torch213-cxx11-neuron-x86_64-linux torch213-cxx11-cpu-x86_64-linux", NULL, "torch213-cxx11-neuron-x86_64-linux",
     "torch213-cxx11-cpu-x86_64-linux", "backend (cpu) does not match selected backend (neuron)"},
    {"tpu", LINUX "torch_version=2.13 backend=tpu", "torch213-cxx11-tpu-x86_64-linux torch-tpu", NULL,
     "torch213-cxx11-tpu-x86_64-linux", "torch-tpu", "compatible"},
    {"metal on macOS 26", "os=darwin cpu=aarch64 macos_version=26.0 python_version=3.12.1 torch_version=2.10", REF_CANDIDATES, NULL,
     "torch210-metal-aarch64-darwin", "torch210-cpu-aarch64-darwin", "backend (cpu) does not match selected backend (metal)"},
    {"metal on macOS 15", "os=darwin cpu=aarch64 macos_version=15.5 python_version=3.12.1 torch_version=2.10", REF_CANDIDATES, NULL,
     NULL, "torch210-metal-aarch64-darwin", "Metal kernels require macOS 26.0 or later, system macOS version is 15.5"},
    {"metal with an unknown macOS", "os=darwin cpu=aarch64 python_version=3.12.1 torch_version=2.10", "torch210-metal-aarch64-darwin", NULL,
     NULL, "torch210-metal-aarch64-darwin", "Metal kernels require macOS 26.0 or later, system macOS version is None"},
    {"macOS explicit cpu", "os=darwin cpu=aarch64 macos_version=26.0 python_version=3.12.1 torch_version=2.10", REF_CANDIDATES, "cpu",
     "torch210-cpu-aarch64-darwin", "torch-cpu", "compatible"},
    {"windows CUDA", "os=windows cpu=x86_64 python_version=3.12.1 torch_version=2.10 torch_cuda_version=12.8",
     "torch210-cu128-x86_64-windows torch210-cxx11-cu128-x86_64-linux", NULL, "torch210-cu128-x86_64-windows",
     "torch210-cxx11-cu128-x86_64-linux", "OS (linux) does not match system OS (windows)"},
    /* noarch */
    {"noarch mismatch", LINUX "torch_version=2.13 torch_hip_version=7.1", "torch-cuda torch-rocm", NULL, "torch-rocm",
     "torch-cuda", "backend (cuda) does not match system backend (rocm) and is not universal"},
    {"universal comes after torch-<backend>", LINUX "torch_version=2.13 torch_cuda_version=13.0",
     "torch-universal torch-cuda", NULL, "torch-cuda", "torch-universal", "compatible"},
    {"universal alone", LINUX "torch_version=2.13 torch_hip_version=7.1", "torch-universal torch-cuda", NULL,
     "torch-universal", NULL, NULL},
    {"noarch needs Python", "os=linux cpu=x86_64 torch_version=2.13 torch_cuda_version=13.0", "torch-cuda torch-universal",
     NULL, NULL, "torch-cuda",
     "noarch variant needs Python, and the environment has no Python interpreter (set HUBKERN_PYTHON or python_version)"},
    {"no torch: noarch on the cudart backend", LINUX "cuda_runtime_version=12.8", "torch-cuda torch-cpu", NULL,
     "torch-cuda", "torch-cpu", "backend (cpu) does not match system backend (cuda) and is not universal"},
    /* free-threaded */
    {"free-threaded 3.14 rejects arch builds", "os=linux cpu=x86_64 python_version=3.14.0 python_free_threaded=1 torch_version=2.13 torch_cuda_version=13.0",
     "torch213-cxx11-cu130-x86_64-linux torch-cuda", NULL, "torch-cuda",
     "torch213-cxx11-cu130-x86_64-linux", "arch kernel not supported on free-threaded Python <3.15"},
    {"free-threaded 3.15 accepts arch builds", "os=linux cpu=x86_64 python_version=3.15.0 python_free_threaded=1 torch_version=2.13 torch_cuda_version=13.0",
     "torch213-cxx11-cu130-x86_64-linux torch-cuda", NULL, "torch213-cxx11-cu130-x86_64-linux", NULL, NULL},
    {"GIL 3.14 accepts arch builds", "os=linux cpu=x86_64 python_version=3.14.0 python_free_threaded=0 torch_version=2.13 torch_cuda_version=13.0",
     "torch213-cxx11-cu130-x86_64-linux torch-cuda", NULL, "torch213-cxx11-cu130-x86_64-linux", NULL, NULL},
    /* ordering */
    {"newest stable ABI beats a higher CUDA minor", LINUX "torch_version=2.13 torch_cuda_version=12.9",
     "torch-stable-abi210-cu128-x86_64-linux torch-stable-abi211-cu126-x86_64-linux", NULL,
     "torch-stable-abi211-cu126-x86_64-linux", NULL, NULL},
    {"same stable ABI: highest CUDA minor", LINUX "torch_version=2.13 torch_cuda_version=12.9",
     "torch-stable-abi211-cu126-x86_64-linux torch-stable-abi211-cu128-x86_64-linux", NULL,
     "torch-stable-abi211-cu128-x86_64-linux", NULL, NULL},
    {"stable ABI beats exact torch", LINUX "torch_version=2.13 torch_cuda_version=13.0",
     "torch213-cu130-x86_64-linux torch-stable-abi29-cu130-x86_64-linux", NULL,
     "torch-stable-abi29-cu130-x86_64-linux", NULL, NULL},
    {"different CUDA major: only the tagged cu130 fits", LINUX "torch_version=2.13 torch_cuda_version=13.0 torch_cxx11_abi=1",
     "torch213-cxx11-cu130-x86_64-linux torch213-cu126-x86_64-linux", NULL, "torch213-cxx11-cu130-x86_64-linux",
     "torch213-cu126-x86_64-linux", "CUDA version (12.6) is not compatible with system CUDA version (13.0)"},
    {"untagged beats tagged", LINUX "torch_version=2.13 torch_cuda_version=12.9 torch_cxx11_abi=1",
     "torch213-cxx11-cu128-x86_64-linux torch213-cu126-x86_64-linux", NULL, "torch213-cu126-x86_64-linux", NULL, NULL},
    {"exact torch beats tvm-ffi", LINUX "torch_version=2.13 tvm_ffi_version=0.1 torch_cuda_version=13.0",
     "tvm-ffi01-cu130-x86_64-linux torch213-cxx11-cu130-x86_64-linux", NULL, "torch213-cxx11-cu130-x86_64-linux", NULL, NULL},
    {"tvm-ffi (minor 0) before torch-cuda: deterministic tie-break", LINUX "tvm_ffi_version=0.1 cuda_runtime_version=13.0",
     "torch-cuda tvm-ffi01-cu130-x86_64-linux", NULL, "tvm-ffi01-cu130-x86_64-linux", NULL, NULL},
    {"tie-break independent of input order", LINUX "tvm_ffi_version=0.1 cuda_runtime_version=13.0",
     "tvm-ffi01-cu130-x86_64-linux torch-cuda", NULL, "tvm-ffi01-cu130-x86_64-linux", NULL, NULL},
    {"tvm-ffi highest CUDA minor", LINUX "tvm_ffi_version=0.1 cuda_runtime_version=12.9",
     "tvm-ffi01-cu126-x86_64-linux tvm-ffi01-cu128-x86_64-linux", NULL, "tvm-ffi01-cu128-x86_64-linux", NULL, NULL},
    /* malformed names are listed, rejected, never fatal */
    {"unparseable names", LINUX "torch_version=2.13 torch_cuda_version=13.0",
     "not-a-variant torch213-cu130-x86_64 torch213-cxx11-cu130-x86_64-linux", NULL,
     "torch213-cxx11-cu130-x86_64-linux", "not-a-variant",
     "cannot parse variant name: Unknown framework in variant string: 'not-a-variant'"},
    {"empty list", LINUX "torch_version=2.13", "", NULL, NULL, NULL, NULL},
};

static void test_table(void) {
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) {
        const res_case *c = &k_cases[i];
        hk_resolution *r = resolve(c->system, c->names, c->override);
        CHECK(r != NULL);
        if (!r) continue;
        const char *best = hk_resolution_best(r);
        hk_test_checks++;
        if ((best == NULL) != (c->best == NULL) || (best && strcmp(best, c->best) != 0)) {
            hk_test_failures++;
            fprintf(stderr, "case '%s': best %s, expected %s\n  order: %s\n", c->what, best ? best : "(none)",
                    c->best ? c->best : "(none)", order_of(r));
        }
        if (c->best) CHECK(accepted_of(r, c->best) == 1);
        if (c->probe) {
            hk_test_checks++;
            if (strcmp(reason_of(r, c->probe), c->reason) != 0) {
                hk_test_failures++;
                fprintf(stderr, "case '%s': reason for %s:\n  got      %s\n  expected %s\n", c->what,
                        c->probe, reason_of(r, c->probe), c->reason);
            }
        }
        hk_resolution_free(r);
    }
}

static void test_untagged_cu126_over_tagged_cu130(void) {
    /* §5.2: "Because the tag precedes the minor in the key, an untagged cu126 beats a tagged
     * cu130." Both must be accepted for that, so use a CUDA 12.x/13.x-free setup: rocm. */
    hk_resolution *r = resolve(LINUX "torch_version=2.13 torch_hip_version=7.1",
                               "torch213-cxx11-rocm71-x86_64-linux torch213-rocm71-x86_64-linux", NULL);
    CHECK_STR(hk_resolution_best(r), "torch213-rocm71-x86_64-linux");
    hk_resolution_free(r);
    /* A tagged higher minor still loses against an untagged lower one. */
    r = resolve(LINUX "torch_version=2.13 torch_cuda_version=13.2",
                "torch213-cxx11-cu132-x86_64-linux torch213-cu130-x86_64-linux", NULL);
    CHECK_STR(hk_resolution_best(r), "torch213-cu130-x86_64-linux");
    CHECK_STR(hk_resolution_name(r, 1), "torch213-cxx11-cu132-x86_64-linux");
    CHECK(hk_resolution_accepted(r, 1));
    hk_resolution_free(r);
}

static void test_full_order(void) {
    hk_resolution *r = resolve(
        LINUX "torch_version=2.13 torch_cuda_version=13.0 tvm_ffi_version=0.1",
        "torch-universal torch-cuda tvm-ffi01-cu130-x86_64-linux torch213-cxx11-cu130-x86_64-linux "
        "torch213-cu130-x86_64-linux torch-stable-abi29-cu130-x86_64-linux torch-stable-abi211-cu130-x86_64-linux "
        "torch-cpu torch212-cxx11-cu130-x86_64-linux garbage",
        NULL);
    CHECK_STR(order_of(r),
              "torch-stable-abi211-cu130-x86_64-linux torch-stable-abi29-cu130-x86_64-linux "
              "torch213-cu130-x86_64-linux torch213-cxx11-cu130-x86_64-linux tvm-ffi01-cu130-x86_64-linux "
              "torch-cuda torch-universal torch212-cxx11-cu130-x86_64-linux torch-cpu garbage");
    CHECK_STR(hk_resolution_reason(r, 0), "compatible, preferred");
    CHECK_STR(hk_resolution_reason(r, 1), "compatible");
    CHECK(hk_resolution_accepted(r, 6));
    CHECK(!hk_resolution_accepted(r, 7));
    CHECK(hk_resolution_family(r, 0) == HK_FAMILY_TORCH_STABLE_ABI);
    CHECK(hk_resolution_family(r, 2) == HK_FAMILY_TORCH);
    CHECK(hk_resolution_family(r, 4) == HK_FAMILY_TVM_FFI);
    CHECK(hk_resolution_family(r, 5) == HK_FAMILY_NOARCH);
    CHECK(hk_resolution_family(r, 9) == HK_FAMILY_INVALID);
    CHECK(hk_resolution_variant(r, 9) == NULL);
    CHECK(hk_resolution_variant(r, 0) && hk_variant_fw_minor(hk_resolution_variant(r, 0)) == 11);
    CHECK_STR(hk_resolution_best_of(r, HK_FAMILY_BIT(HK_FAMILY_TVM_FFI)), "tvm-ffi01-cu130-x86_64-linux");
    CHECK_STR(hk_resolution_best_of(r, HK_FAMILY_BIT(HK_FAMILY_NOARCH)), "torch-cuda");
    CHECK(hk_resolution_best_of(r, 0) == NULL);
    CHECK_STR(hk_resolution_backend(r), "cu130");
    CHECK(hk_resolution_name(r, 10) == NULL);
    CHECK(hk_resolution_reason(r, 10) == NULL);
    CHECK(!hk_resolution_accepted(r, 10));

    /* JSON carries the same trace. */
    char *json = hk_resolution_to_json(r);
    cJSON *root = json ? cJSON_Parse(json) : NULL;
    CHECK(root != NULL);
    if (root) {
        CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(root, "best")), "torch-stable-abi211-cu130-x86_64-linux");
        CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(root, "backend")), "cu130");
        cJSON *cands = cJSON_GetObjectItem(root, "candidates");
        CHECK(cJSON_GetArraySize(cands) == 10);
        cJSON *last = cJSON_GetArrayItem(cands, 9);
        CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(last, "family")), "invalid");
        CHECK(cJSON_IsFalse(cJSON_GetObjectItem(last, "accepted")));
        CHECK(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetArrayItem(cands, 0), "preferred")));
        CHECK(cJSON_IsFalse(cJSON_GetObjectItem(cJSON_GetArrayItem(cands, 1), "preferred")));
        cJSON *sys = cJSON_GetObjectItem(root, "system");
        CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(sys, "torch_version")), "2.13");
        cJSON_Delete(root);
    }
    hk_free(json);
    char *text = hk_resolution_to_text(r);
    CHECK(text && strstr(text, "torch-stable-abi211-cu130-x86_64-linux compatible, preferred \xe2\x9c\x85\n") == text);
    CHECK(text && strstr(text, "\ngarbage: cannot parse variant name: "));
    hk_free(text);
    hk_resolution_free(r);
}

static void test_api_edges(void) {
    hk_env *env = sys_env(LINUX "torch_version=2.13 torch_cuda_version=13.0");
    hk_resolution *r = NULL;
    const char *names[] = {"torch213-cxx11-cu130-x86_64-linux", "torch213-cxx11-cu130-x86_64-linux", NULL, ""};

    /* explicit backend: only cpu or the detected one */
    CHECK_RC(hk_resolve_variants(&r, env, names, 1, "rocm"), HK_ERR_INVALID_ARG);
    CHECK(r == NULL);
    CHECK(strstr(hk_last_error(), "Invalid backend 'rocm', system supported backends: cpu, cuda") != NULL);
    CHECK_RC(hk_resolve_variants(&r, env, names, 1, "metal"), HK_ERR_INVALID_ARG);
    CHECK_RC(hk_resolve_variants(NULL, env, names, 1, NULL), HK_ERR_INVALID_ARG);
    CHECK_RC(hk_resolve_variants(&r, NULL, names, 1, NULL), HK_ERR_INVALID_ARG);
    CHECK_RC(hk_resolve_variants(&r, env, NULL, 1, NULL), HK_ERR_INVALID_ARG);

    /* duplicates kept once; NULL and "" entries are unparseable, not fatal */
    CHECK_RC(hk_resolve_variants(&r, env, names, 4, NULL), HK_OK);
    CHECK(hk_resolution_count(r) == 2);
    CHECK_STR(hk_resolution_best(r), "torch213-cxx11-cu130-x86_64-linux");
    CHECK_STR(hk_resolution_reason(r, 1), "cannot parse variant name: empty variant name");
    hk_resolution_free(r);

    /* no candidates */
    CHECK_RC(hk_resolve_variants(&r, env, NULL, 0, NULL), HK_OK);
    CHECK(hk_resolution_count(r) == 0 && hk_resolution_best(r) == NULL);
    char *json = hk_resolution_to_json(r);
    CHECK(json && strstr(json, "\"best\":\tnull"));
    hk_free(json);
    hk_resolution_free(r);

    /* the explicit cpu backend when the system itself is cpu */
    hk_env *cpu = sys_env(LINUX "torch_version=2.13 backend=cpu");
    CHECK_RC(hk_resolve_variants(&r, cpu, names, 1, "cuda"), HK_ERR_INVALID_ARG);
    CHECK(strstr(hk_last_error(), "system supported backends: cpu") != NULL);
    CHECK_RC(hk_resolve_variants(&r, cpu, names, 1, "cpu"), HK_OK);
    CHECK(hk_resolution_best(r) == NULL);
    CHECK_STR(hk_resolution_backend(r), "cpu");
    hk_resolution_free(r);
    hk_env_free(cpu);

    /* a pinned CUDA backend without a version rejects CUDA builds, saying so */
    hk_env *nover = sys_env(LINUX "torch_version=2.13 backend=cuda");
    CHECK_RC(hk_resolve_variants(&r, nover, names, 1, NULL), HK_OK);
    CHECK_STR(hk_resolution_reason(r, 0), "CUDA version (13.0) is not compatible with system CUDA version (None)");
    CHECK(hk_resolution_backend(r) == NULL);
    hk_resolution_free(r);
    hk_env_free(nover);

    /* the trace accessors survive NULL */
    CHECK(hk_resolution_count(NULL) == 0);
    CHECK(hk_resolution_best(NULL) == NULL);
    CHECK(hk_resolution_to_json(NULL) == NULL);
    hk_resolution_free(NULL);
    hk_env_free(env);
}

/* ---- parser ---------------------------------------------------------------------------------- */

static void test_roundtrip_vectors(void) {
    static const char *const vectors[] = {
        /* §3 test vectors */
        "torch25-cxx98-rocm63-aarch64-linux", "torch-stable-abi211-cu126-x86_64-linux",
        "torch-stable-abi29-metal-aarch64-darwin", "tvm-ffi01-cu130-x86_64-linux",
        "tvm-ffi01-metal-aarch64-darwin", "torch210-cpu-aarch64-darwin",
        /* §1.3 / §3 examples and every backend */
        "torch213-cxx11-cu130-x86_64-linux", "torch210-cu128-x86_64-windows", "torch-cuda",
        "torch-universal", "torch213-cxx11-xpu20253-x86_64-linux", "torch213-cxx11-cann81-aarch64-linux",
        "torch213-cxx11-neuron-x86_64-linux", "torch213-cxx11-tpu-x86_64-linux",
        "torch213-cxx11-rocm72-x86_64-linux", "tvm-ffi012-cu118-aarch64-linux", "torch-npu",
        "torch213-cu132-aarch64-windows", "torch-some-new-thing"};
    for (size_t i = 0; i < sizeof vectors / sizeof vectors[0]; i++) {
        hk_variant *v = NULL;
        CHECK_RC(hk_variant_parse(&v, vectors[i]), HK_OK);
        char *s = hk_variant_to_string(v);
        CHECK_STR(s, vectors[i]);
        hk_free(s);
        hk_variant_free(v);
    }
}

/* hk_variant_parse into *v, freeing what *v held. */
static int reparse(hk_variant **v, const char *name) {
    hk_variant_free(*v);
    *v = NULL;
    return hk_variant_parse(v, name);
}

static void test_parse_fields(void) {
    hk_variant *v = NULL;
    CHECK_RC(reparse(&v, "torch25-cxx98-rocm63-aarch64-linux"), HK_OK);
    CHECK(hk_variant_get_family(v) == HK_FAMILY_TORCH && hk_variant_fw_major(v) == 2 && hk_variant_fw_minor(v) == 5 && hk_variant_cxx11(v) == 0);
    CHECK(hk_variant_backend(v) == HK_BACKEND_ROCM && hk_variant_backend_major(v) == 6 && hk_variant_backend_minor(v) == 3);
    CHECK_STR(hk_variant_cpu(v), "aarch64");
    CHECK_STR(hk_variant_os(v), "linux");

    CHECK_RC(reparse(&v, "torch213-cxx11-cu130-x86_64-linux"), HK_OK);
    CHECK(hk_variant_fw_minor(v) == 13 && hk_variant_cxx11(v) == 1 && hk_variant_backend(v) == HK_BACKEND_CUDA && hk_variant_backend_major(v) == 13 && hk_variant_backend_minor(v) == 0);

    CHECK_RC(reparse(&v, "torch-stable-abi211-cu126-x86_64-linux"), HK_OK);
    CHECK(hk_variant_get_family(v) == HK_FAMILY_TORCH_STABLE_ABI && hk_variant_fw_major(v) == 2 && hk_variant_fw_minor(v) == 11 && hk_variant_cxx11(v) == -1);
    CHECK(hk_variant_backend_major(v) == 12 && hk_variant_backend_minor(v) == 6);

    CHECK_RC(reparse(&v, "tvm-ffi01-cu130-x86_64-linux"), HK_OK); /* lazy: 0.1 */
    CHECK(hk_variant_get_family(v) == HK_FAMILY_TVM_FFI && hk_variant_fw_major(v) == 0 && hk_variant_fw_minor(v) == 1);
    CHECK_RC(reparse(&v, "tvm-ffi012-cpu-x86_64-linux"), HK_OK); /* 0.12 */
    CHECK(hk_variant_fw_major(v) == 0 && hk_variant_fw_minor(v) == 12 && hk_variant_backend(v) == HK_BACKEND_CPU);
    CHECK_RC(reparse(&v, "tvm-ffi110-cpu-x86_64-linux"), HK_OK); /* 1.10 */
    CHECK(hk_variant_fw_major(v) == 1 && hk_variant_fw_minor(v) == 10);

    CHECK_RC(reparse(&v, "torch213-xpu20253-x86_64-linux"), HK_OK); /* greedy: 2025.3 */
    CHECK(hk_variant_backend(v) == HK_BACKEND_XPU && hk_variant_backend_major(v) == 2025 && hk_variant_backend_minor(v) == 3 && hk_variant_cxx11(v) == -1);
    CHECK_RC(reparse(&v, "torch213-cu1210-x86_64-linux"), HK_OK); /* §3 ambiguity: 121.0 */
    CHECK(hk_variant_backend_major(v) == 121 && hk_variant_backend_minor(v) == 0);

    CHECK_RC(reparse(&v, "torch-cuda"), HK_OK);
    CHECK(hk_variant_get_family(v) == HK_FAMILY_NOARCH && hk_variant_backend(v) == HK_BACKEND_NONE);
    CHECK_STR(hk_variant_noarch(v), "cuda");
    CHECK_RC(reparse(&v, "torch-cuda-extra"), HK_OK); /* upstream keeps the rest joined */
    CHECK_STR(hk_variant_noarch(v), "cuda-extra");

    /* unknown cpu/os tokens parse (upstream rejects them later by the CPU/OS rule) */
    CHECK_RC(reparse(&v, "torch213-cpu-riscv64-freebsd"), HK_OK);
    CHECK_STR(hk_variant_cpu(v), "riscv64");

    /* non-canonical numbers come back canonical */
    CHECK_RC(reparse(&v, "torch213-cu0130-x86_64-linux"), HK_OK);
    char *s = hk_variant_to_string(v);
    CHECK_STR(s, "torch213-cu130-x86_64-linux");
    hk_free(s);

    hk_variant_free(v);

    CHECK_STR(hk_variant_family_name(HK_FAMILY_TVM_FFI), "tvm-ffi");
    CHECK_STR(hk_variant_family_name((hk_variant_family)42), "invalid");
    CHECK_STR(hk_backend_kind_name(HK_BACKEND_CANN), "cann");
    CHECK_STR(hk_backend_kind_name((hk_backend_kind)-3), "none");
}

static void test_parse_malformed(void) {
    static const struct {
        const char *name, *msg;
    } bad[] = {
        {"", "empty variant name"},
        {"torch", "no backend name"},
        {"torch-", "no backend name"},
        {"torch213", "Invalid arch variant parts"},
        {"torch213-cu130", "Invalid arch variant parts"},
        {"torch213-cu130-x86_64", "Invalid arch variant parts"},
        {"torch213-cu130-x86_64-linux-extra", "Invalid arch variant parts"},
        {"torch213-cxx12-cu130-x86_64-linux", "Invalid arch variant parts"},
        {"torch2-cu130-x86_64-linux", "Invalid Torch variant string: 'torch2'"},
        {"torchx13-cu130-x86_64-linux", "Invalid Torch variant string"},
        {"torch2a3-cu130-x86_64-linux", "Invalid Torch variant string"},
        {"torch213-cuda-x86_64-linux", "Invalid CUDA variant string: 'cuda'"},
        {"torch213-cu1-x86_64-linux", "Invalid CUDA variant string"},
        {"torch213-cu-x86_64-linux", "Invalid CUDA variant string"},
        {"torch213-rocm-x86_64-linux", "Invalid ROCm variant string"},
        {"torch213-xpu2025a-x86_64-linux", "Invalid XPU variant string"},
        {"torch213-cann8-x86_64-linux", "Invalid CANN variant string"},
        {"torch213-vulkan-x86_64-linux", "Unknown backend variant string: 'vulkan'"},
        {"torch213-CPU-x86_64-linux", "Unknown backend variant string"},
        {"torch213-cu99999999999-x86_64-linux", "Invalid CUDA variant string"},
        {"torch99999999999-cu130-x86_64-linux", "Invalid Torch variant string"},
        {"torch213--x86_64-linux", "Unknown backend variant string: ''"},
        {"torch213-cu130--linux", "empty cpu"},
        {"torch213-cu130-x86_64-", "empty os"},
        {"torch-stable-abi2-cu130-x86_64-linux", "Invalid Torch stable ABI"},
        {"torch-stable-abi-cu130-x86_64-linux", "Invalid Torch stable ABI"},
        {"torch-stable-abix11-cu130-x86_64-linux", "Invalid Torch stable ABI"},
        {"torch-stable-abi211", "Invalid arch variant parts"},
        {"torch-stable-abi211-cxx11-cu130-x86_64-linux", "Invalid arch variant parts"},
        {"tvm-ffi1-cu130-x86_64-linux", "Invalid TvmFfi variant string"},
        {"tvm-ffi-cu130-x86_64-linux", "Invalid TvmFfi variant string"},
        {"tvm-ffix1-cu130-x86_64-linux", "Invalid TvmFfi variant string"},
        {"tvm", "Unknown framework"},
        {"tvm-", "Unknown framework"},
        {"tvmffi01-cu130-x86_64-linux", "Unknown framework"},
        {"jax04-cu130-x86_64-linux", "Unknown framework"},
        {"-", "Unknown framework"},
        {"---", "Unknown framework"},
        {"torch213-cu130-x86 64-linux", "space"},
        {"torch213-cu130-x86_64-l\xc3\xafnux", "non-ASCII"},
        {"../../etc/passwd", "path character"},
        {"torch-a\\b", "path character"},
        {"torch213-cu130-x86_64-linux\n", "control"},
        {"torch-abcdefghijklmnopqrstuvwxyz0123456789", "too long"},
        {"torch213-cu130-abcdefghijklmnopqrstuvwxyz0123456789-linux", "too long"},
        {"--------------------------------------------------", "too many"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        hk_variant junk;
        memset(&junk, 0x5a, sizeof junk);
        hk_variant *v = &junk; /* must come back NULL */
        int rc = hk_variant_parse(&v, bad[i].name);
        hk_test_checks++;
        if (rc != HK_ERR_PARSE || v != NULL || hk_variant_get_family(v) != HK_FAMILY_INVALID ||
            !strstr(hk_last_error(), bad[i].msg)) {
            hk_test_failures++;
            fprintf(stderr, "malformed '%s': rc %s, family %d, message '%s' (want '%s')\n", bad[i].name,
                    hk_error_name(rc), (int)hk_variant_get_family(v), hk_last_error(), bad[i].msg);
        }
    }
    char longname[400];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    hk_variant *v = NULL;
    CHECK_RC(hk_variant_parse(&v, longname), HK_ERR_PARSE);
    CHECK_RC(hk_variant_parse(&v, NULL), HK_ERR_INVALID_ARG);
    CHECK_RC(hk_variant_parse(NULL, "torch-cuda"), HK_ERR_INVALID_ARG);

    /* to_string refuses what it cannot express */
    CHECK(hk_variant_to_string(NULL) == NULL);
    hk_variant zero;
    memset(&zero, 0, sizeof zero);
    CHECK(hk_variant_to_string(&zero) == NULL); /* family invalid */
    CHECK_RC(hk_variant_parse(&v, "torch213-cu130-x86_64-linux"), HK_OK);
    if (!v) return;
    v->backend_minor = 10; /* cu13 10 would not parse back */
    CHECK(hk_variant_to_string(v) == NULL);
    v->backend_minor = 0;
    v->fw_major = 10; /* torch1013 would parse as 1.013 */
    CHECK(hk_variant_to_string(v) == NULL);
    v->fw_major = 2;
    strcpy(v->cpu, "x86-64"); /* a '-' would split */
    CHECK(hk_variant_to_string(v) == NULL);
    strcpy(v->cpu, "x86_64");
    v->backend = (hk_backend_kind)99;
    CHECK(hk_variant_to_string(v) == NULL);
    hk_variant_free(v);
}

/* Random names built from grammar pieces: parse never crashes; what parses round-trips to a name
 * that parses to the same struct. */
static void test_parse_fuzz(void) {
    static const char *const pieces[] = {"torch", "torch213", "torch-stable-abi211", "tvm", "ffi01",
                                         "tvm-ffi01", "cxx11", "cxx98", "cu130", "cu1", "rocm71",
                                         "xpu20253", "cann81", "cpu", "metal", "neuron", "tpu",
                                         "x86_64", "aarch64", "linux", "darwin", "windows", "",
                                         "universal", "stable", "abi29", "9", "-", "torch2", "\x01"};
    unsigned seed = 12345;
    int parsed = 0;
    for (int iter = 0; iter < 20000; iter++) {
        char name[256] = "";
        int n = 1 + (int)((seed = seed * 1103515245u + 12345u) >> 16) % 6;
        for (int k = 0; k < n; k++) {
            size_t pi = ((seed = seed * 1103515245u + 12345u) >> 16) % (sizeof pieces / sizeof pieces[0]);
            if (k) strcat(name, "-");
            strcat(name, pieces[pi]);
        }
        hk_variant *v = NULL;
        if (hk_variant_parse(&v, name) != HK_OK) {
            if (!*hk_last_error()) {
                hk_test_failures++;
                fprintf(stderr, "fuzz: '%s' failed without a message\n", name);
            }
            continue;
        }
        parsed++;
        char *s = hk_variant_to_string(v);
        hk_variant *w = NULL;
        if (!s || hk_variant_parse(&w, s) != HK_OK || memcmp(v, w, sizeof *v) != 0) {
            hk_test_failures++;
            fprintf(stderr, "fuzz: '%s' does not round-trip (got '%s')\n", name, s ? s : "(null)");
        }
        hk_free(s);
        hk_variant_free(v);
        hk_variant_free(w);
    }
    hk_test_checks++;
    CHECK(parsed > 100); /* the generator does reach valid names */
}

int main(void) {
    test_roundtrip_vectors();
    test_parse_fields();
    test_parse_malformed();
    test_parse_fuzz();
    test_table();
    test_untagged_cu126_over_tagged_cu130();
    test_full_order();
    test_api_edges();
    return hk_test_finish();
}
