/* Options shared by `hubkern env` and `hubkern variants` (see cmd_env_flags.h). */
#include "cli/cmd_env_flags.h"
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define END {HK_OPT_END, NULL, 0, NULL, NULL, NULL, NULL}

const cli_opt cli_env_detect_opts[] = {
    {HK_OPT_VALUE, "python", 0, "PATH", "the interpreter to ask (default: $HUBKERN_PYTHON, else python3)", NULL, NULL},
    {HK_OPT_FLAG, "no-python", 0, NULL, "run no interpreter (no Python: noarch variants are rejected)", NULL, NULL},
    {HK_OPT_VALUE, "site-packages", 0, "DIRS", "':'-separated directories to look for torch / tvm_ffi in", NULL, NULL},
    {HK_OPT_VALUE, "libtorch", 0, "DIR", "a LibTorch distribution (used when no torch package is found)", NULL, NULL},
    {HK_OPT_VALUE, "tvm-ffi-lib", 0, "PATH", "libtvm_ffi location", NULL, NULL},
    {HK_OPT_FLAG, "no-cuda", 0, NULL, "do not load libcuda / libcudart", NULL, NULL},
    {HK_OPT_FLAG, "no-rocm", 0, NULL, "do not load libamdhip64", NULL, NULL},
    {HK_OPT_FLAG, "no-env-overrides", 0, NULL, "ignore HUBKERN_* variables", NULL, NULL},
    {HK_OPT_FLAG, "blank", 0, NULL, "detect nothing: describe the machine with the system options", NULL, NULL},
    END,
};

/* system options: option name = hk_env_set key, except where the table below maps it */
const cli_opt cli_env_system_opts[] = {
    {HK_OPT_VALUE, "os", 0, "OS", "linux, darwin or windows", NULL, "linux|darwin|windows"},
    {HK_OPT_VALUE, "cpu", 0, "CPU", "x86_64 or aarch64", NULL, "x86_64|aarch64"},
    {HK_OPT_VALUE, "macos", 0, "VER", "the macOS version, e.g. 26.0", NULL, NULL},
    {HK_OPT_VALUE, "python-version", 0, "VER", "e.g. 3.12", NULL, NULL},
    {HK_OPT_VALUE, "python-ft", 0, "0|1", "a free-threaded Python", NULL, "0|1"},
    {HK_OPT_VALUE, "torch", 0, "VER", "the torch version, e.g. 2.13", NULL, NULL},
    {HK_OPT_VALUE, "cxx11", 0, "0|1", "torch built with the cxx11 ABI", NULL, "0|1"},
    {HK_OPT_VALUE, "torch-cuda", 0, "VER", "torch's CUDA version, e.g. 13.0", NULL, NULL},
    {HK_OPT_VALUE, "torch-hip", 0, "VER", "torch's HIP version, e.g. 6.3", NULL, NULL},
    {HK_OPT_VALUE, "tvm-ffi", 0, "VER", "the tvm-ffi version, e.g. 0.1", NULL, NULL},
    {HK_OPT_VALUE, "cuda-runtime", 0, "VER", "libcudart's version, e.g. 13.0", NULL, NULL},
    {HK_OPT_VALUE, "gpus", 0, "LIST", "compute capabilities, e.g. 9.0,8.6, or none", NULL, NULL},
    {HK_OPT_VALUE, "gpu-arch", 0, "ARCH", "the ROCm device's gcnArchName, e.g. gfx942:sramecc+:xnack-", NULL, NULL},
    {HK_OPT_VALUE, "cuda", 0, "VER", "pin the system backend: cuda VER", NULL, NULL},
    {HK_OPT_VALUE, "rocm", 0, "VER", "pin the system backend: rocm VER", NULL, NULL},
    {HK_OPT_VALUE, "xpu", 0, "VER", "pin the system backend: xpu VER", NULL, NULL},
    {HK_OPT_VALUE, "cann", 0, "VER", "pin the system backend: cann VER", NULL, NULL},
    {HK_OPT_VALUE, "system-backend", 0, "NAME", "pin the system backend type (cpu, metal, neuron, tpu, ...)", NULL,
     "cpu|cuda|rocm|xpu|cann|metal|neuron|tpu"},
    {HK_OPT_LIST, "set", 0, "KEY=VALUE", "any key of hk_env_set (see docs/env-and-variants.md); repeatable", NULL,
     NULL},
    END,
};

static const struct {
    const char *opt, *key;
} k_keys[] = {
    {"os", "os"}, {"cpu", "cpu"}, {"macos", "macos_version"}, {"python-version", "python_version"},
    {"python-ft", "python_free_threaded"}, {"torch", "torch_version"}, {"cxx11", "torch_cxx11_abi"},
    {"torch-cuda", "torch_cuda_version"}, {"torch-hip", "torch_hip_version"}, {"tvm-ffi", "tvm_ffi_version"},
    {"cuda-runtime", "cuda_runtime_version"}, {"gpus", "gpus"}, {"gpu-arch", "gpu_arch"},
    {"system-backend", "backend"},
};

void cli_env_flags_init(cli_env_flags *fl) {
    memset(fl, 0, sizeof *fl);
    hk_env_options_init(&fl->opts, HK_ENV_OPTIONS_VERSION);
}

void cli_env_flags_free(cli_env_flags *fl) {
    for (int i = 0; i < fl->nsets; i++) free(fl->sets[i]);
    free(fl->sets);
    memset(fl, 0, sizeof *fl);
}

static int add_set(cli_env_flags *fl, const char *key, size_t keylen, const char *value) {
    char **grown = realloc(fl->sets, (size_t)(fl->nsets + 1) * sizeof *grown);
    if (!grown) return cli_usage_error("out of memory");
    fl->sets = grown;
    size_t n = keylen + strlen(value) + 2;
    char *kv = malloc(n);
    if (!kv) return cli_usage_error("out of memory");
    snprintf(kv, n, "%.*s=%s", (int)keylen, key, value);
    fl->sets[fl->nsets++] = kv;
    return 0;
}

static bool in_table(const cli_opt *t, const cli_opt *o) {
    for (; t->kind != HK_OPT_END; t++)
        if (t == o) return true;
    return false;
}

int cli_env_flags_get(cli_env_flags *fl, const cli_args *a) {
    for (size_t i = 0; i < a->nocc; i++) {
        const cli_opt *o = a->occ[i].opt;
        const char *v = a->occ[i].value, *n = o->name;
        if (in_table(cli_env_detect_opts, o)) {
            if (strcmp(n, "blank") == 0) fl->blank = true;
            else if (strcmp(n, "no-python") == 0) fl->opts.no_python = 1;
            else if (strcmp(n, "no-cuda") == 0) fl->opts.no_cuda = 1;
            else if (strcmp(n, "no-rocm") == 0) fl->opts.no_rocm = 1;
            else if (strcmp(n, "no-env-overrides") == 0) fl->opts.no_env_overrides = 1;
            else if (strcmp(n, "python") == 0) fl->opts.python = v;
            else if (strcmp(n, "site-packages") == 0) fl->opts.site_packages = v;
            else if (strcmp(n, "libtorch") == 0) fl->opts.libtorch_dir = v;
            else if (strcmp(n, "tvm-ffi-lib") == 0) fl->opts.tvm_ffi_lib = v;
            continue;
        }
        if (!in_table(cli_env_system_opts, o)) continue;
        int rc = 0;
        if (strcmp(n, "set") == 0) {
            const char *eq = strchr(v, '=');
            if (!eq || eq == v || eq - v >= 64) return cli_usage_error("--set needs KEY=VALUE, got '%s'", v);
            rc = add_set(fl, v, (size_t)(eq - v), eq + 1);
        } else if (!strcmp(n, "cuda") || !strcmp(n, "rocm") || !strcmp(n, "xpu") || !strcmp(n, "cann")) {
            rc = add_set(fl, "backend", 7, n);
            if (!rc) rc = add_set(fl, "backend_version", 15, v);
        } else {
            for (size_t k = 0; k < sizeof k_keys / sizeof k_keys[0]; k++)
                if (strcmp(n, k_keys[k].opt) == 0) rc = add_set(fl, k_keys[k].key, strlen(k_keys[k].key), v);
        }
        if (rc) return rc;
    }
    return 0;
}

int cli_env_flags_build(hk_env **out, const cli_env_flags *fl) {
    int rc = fl->blank ? hk_env_new(out) : hk_env_detect(out, &fl->opts);
    if (rc) return rc;
    for (int i = 0; i < fl->nsets; i++) {
        char *eq = strchr(fl->sets[i], '=');
        *eq = '\0';
        rc = hk_env_set(*out, fl->sets[i], eq + 1);
        *eq = '=';
        if (rc) {
            hk_env_free(*out);
            *out = NULL;
            return rc;
        }
    }
    return 0;
}
