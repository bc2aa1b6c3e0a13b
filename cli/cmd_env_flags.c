/* Options shared by `hubkern env` and `hubkern variants` (see cmd_env_flags.h). */
#include "cli/cmd_env_flags.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void hk_cli_env_flags_init(hk_cli_env_flags *fl) {
    memset(fl, 0, sizeof *fl);
    hk_env_options_init(&fl->opts, HK_ENV_OPTIONS_VERSION);
}

void hk_cli_env_flags_free(hk_cli_env_flags *fl) {
    for (int i = 0; i < fl->nsets; i++) free(fl->sets[i]);
    free(fl->sets);
    memset(fl, 0, sizeof *fl);
}

static int add_set(hk_cli_env_flags *fl, const char *key, const char *value) {
    char **grown = realloc(fl->sets, (size_t)(fl->nsets + 1) * sizeof *grown);
    if (!grown) return -1;
    fl->sets = grown;
    size_t n = strlen(key) + strlen(value) + 2;
    char *kv = malloc(n);
    if (!kv) return -1;
    snprintf(kv, n, "%s=%s", key, value);
    fl->sets[fl->nsets++] = kv;
    return 0;
}

/* flag → environment key (value flags) */
static const struct {
    const char *flag, *key;
} k_value_flags[] = {
    {"--os", "os"},
    {"--cpu", "cpu"},
    {"--macos", "macos_version"},
    {"--python-version", "python_version"},
    {"--python-ft", "python_free_threaded"},
    {"--torch", "torch_version"},
    {"--cxx11", "torch_cxx11_abi"},
    {"--torch-cuda", "torch_cuda_version"},
    {"--torch-hip", "torch_hip_version"},
    {"--tvm-ffi", "tvm_ffi_version"},
    {"--cuda-runtime", "cuda_runtime_version"},
    {"--gpus", "gpus"},
    {"--gpu-arch", "gpu_arch"},
    {"--system-backend", "backend"},
};

/* flags that pin the backend to a versioned one: --cuda 13.0 = backend cuda, version 13.0 */
static const char *const k_backend_flags[] = {"--cuda", "--rocm", "--xpu", "--cann"};

int hk_cli_env_flags_parse(hk_cli_env_flags *fl, int argc, char **argv, int i) {
    const char *a = argv[i];
    const char *next = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--blank") == 0) return fl->blank = true, 1;
    if (strcmp(a, "--no-python") == 0) return fl->opts.no_python = 1, 1;
    if (strcmp(a, "--no-cuda") == 0) return fl->opts.no_cuda = 1, 1;
    if (strcmp(a, "--no-rocm") == 0) return fl->opts.no_rocm = 1, 1;
    if (strcmp(a, "--no-env-overrides") == 0) return fl->opts.no_env_overrides = 1, 1;

    const char **detect_slot = strcmp(a, "--python") == 0          ? &fl->opts.python
                               : strcmp(a, "--site-packages") == 0 ? &fl->opts.site_packages
                               : strcmp(a, "--libtorch") == 0      ? &fl->opts.libtorch_dir
                               : strcmp(a, "--tvm-ffi-lib") == 0   ? &fl->opts.tvm_ffi_lib
                                                                   : NULL;
    bool is_set = strcmp(a, "--set") == 0;
    int value_flag = -1;
    for (size_t k = 0; k < sizeof k_value_flags / sizeof k_value_flags[0]; k++)
        if (strcmp(a, k_value_flags[k].flag) == 0) value_flag = (int)k;
    int backend_flag = -1;
    for (size_t k = 0; k < sizeof k_backend_flags / sizeof k_backend_flags[0]; k++)
        if (strcmp(a, k_backend_flags[k]) == 0) backend_flag = (int)k;
    if (!detect_slot && !is_set && value_flag < 0 && backend_flag < 0) return 0;

    if (!next) {
        fprintf(stderr, "hubkern: %s needs a value\n", a);
        return -1;
    }
    if (detect_slot) {
        *detect_slot = next;
        return 2;
    }
    int rc = 0;
    if (is_set) {
        const char *eq = strchr(next, '=');
        if (!eq || eq == next) {
            fprintf(stderr, "hubkern: --set needs key=value, got '%s'\n", next);
            return -1;
        }
        char key[64];
        size_t n = (size_t)(eq - next);
        if (n >= sizeof key) n = sizeof key - 1;
        memcpy(key, next, n);
        key[n] = '\0';
        rc = add_set(fl, key, eq + 1);
    } else if (value_flag >= 0) {
        rc = add_set(fl, k_value_flags[value_flag].key, next);
    } else {
        rc = add_set(fl, "backend", k_backend_flags[backend_flag] + 2);
        if (!rc) rc = add_set(fl, "backend_version", next);
    }
    if (rc) {
        fprintf(stderr, "hubkern: out of memory\n");
        return -1;
    }
    return 2;
}

int hk_cli_env_flags_build(hk_env **out, const hk_cli_env_flags *fl) {
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

const char *hk_cli_env_flags_help(void) {
    return "\n"
           "detection options:\n"
           "  --python PATH        the interpreter to ask (default: $HUBKERN_PYTHON, else python3)\n"
           "  --no-python          run no interpreter (no Python: noarch variants are rejected)\n"
           "  --site-packages DIRS ':'-separated directories to look for torch / tvm_ffi in\n"
           "  --libtorch DIR       a LibTorch distribution (used when no torch package is found)\n"
           "  --tvm-ffi-lib PATH   libtvm_ffi location\n"
           "  --no-cuda            do not load libcuda / libcudart\n"
           "  --no-rocm            do not load libamdhip64\n"
           "  --no-env-overrides   ignore HUBKERN_* variables\n"
           "  --blank              detect nothing: describe the machine with the options below\n"
           "\n"
           "system options (override what was detected):\n"
           "  --os linux|darwin|windows   --cpu x86_64|aarch64   --macos 26.0\n"
           "  --python-version 3.12       --python-ft 0|1 (free-threaded)\n"
           "  --torch 2.13                --cxx11 0|1            --torch-cuda 13.0  --torch-hip 6.3\n"
           "  --tvm-ffi 0.1               --cuda-runtime 13.0    --gpus 9.0,8.6|none\n"
           "  --gpu-arch gfx942[:sramecc+:xnack-]  the ROCm device's gcnArchName\n"
           "  --cuda 13.0 | --rocm 7.1 | --xpu 2025.3 | --cann 8.1   pin the system backend\n"
           "  --system-backend cpu|metal|neuron|tpu|...             pin the system backend type\n"
           "  --set KEY=VALUE      any key of hk_env_set (see docs/env-and-variants.md)\n";
}
