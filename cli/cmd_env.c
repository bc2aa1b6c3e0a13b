/* hubkern env: show what hubkern detects about this machine. */
#include "cli/cli.h"
#include "cli/cmd_env_flags.h"

#include <hubkern.h>

#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: hubkern env [--json] [detection options] [system options]\n"
            "\n"
            "Detect the machine: OS, CPU, Python, PyTorch, tvm-ffi, CUDA, ROCm and GPUs, and the\n"
            "compute backend as the Python `kernels` package would see it. Nothing is imported; at most one\n"
            "short Python call is made.\n"
            "\n"
            "  --json               print one JSON object (for programs)\n"
            "%s",
            hk_cli_env_flags_help());
}

static void line(const char *key, const char *value) {
    printf("  %-22s %s\n", key, value ? value : "-");
}

static const char *tri(int v) { return v < 0 ? "-" : v ? "yes" : "no"; }

int hk_cmd_env(int argc, char **argv); /* called through the table in main.c */
int hk_cmd_env(int argc, char **argv) {
    bool json = false;
    hk_cli_env_flags fl;
    hk_cli_env_flags_init(&fl);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            hk_cli_env_flags_free(&fl);
            return 0;
        }
        if (strcmp(argv[i], "--json") == 0) {
            json = true;
            continue;
        }
        int used = hk_cli_env_flags_parse(&fl, argc, argv, i);
        if (used < 0) {
            hk_cli_env_flags_free(&fl);
            usage(stderr);
            return 2;
        }
        if (used == 0) {
            fprintf(stderr, "hubkern env: unknown argument '%s'\n", argv[i]);
            hk_cli_env_flags_free(&fl);
            usage(stderr);
            return 2;
        }
        i += used - 1;
    }
    hk_env *env = NULL;
    int rc = hk_cli_env_flags_build(&env, &fl);
    hk_cli_env_flags_free(&fl);
    if (rc) return hk_cli_report_error("detecting the machine");

    if (json) {
        char *text = hk_env_to_json(env);
        hk_env_free(env);
        if (!text) return hk_cli_report_error("formatting JSON");
        printf("%s\n", text);
        hk_free(text);
        return 0;
    }

    char buf[512];
    printf("system\n");
    line("os", hk_env_os(env));
    line("cpu", hk_env_cpu(env));
    if (hk_env_macos_version(env)) line("macos", hk_env_macos_version(env));
    printf("python\n");
    line("executable", hk_env_python_executable(env));
    line("version", hk_env_python_version(env));
    line("free-threaded", tri(hk_env_python_free_threaded(env)));
    for (size_t i = 0; i < hk_env_site_packages_count(env); i++)
        line(i == 0 ? "import path" : "", hk_env_site_packages(env, i));
    printf("torch\n");
    line("version", hk_env_torch_full_version(env) ? hk_env_torch_full_version(env) : hk_env_torch_version(env));
    if (hk_env_torch_version(env)) {
        line("location", hk_env_torch_dir(env));
        line("cxx11 abi", tri(hk_env_torch_cxx11_abi(env)));
        line("cuda", hk_env_torch_cuda_version(env));
        if (hk_env_torch_hip_version(env)) line("hip", hk_env_torch_hip_version(env));
        if (hk_env_torch_xpu_version(env)) line("xpu", hk_env_torch_xpu_version(env));
    }
    printf("tvm-ffi\n");
    line("version", hk_env_tvm_ffi_full_version(env) ? hk_env_tvm_ffi_full_version(env) : hk_env_tvm_ffi_version(env));
    line("library", hk_env_tvm_ffi_lib(env));
    printf("cuda\n");
    line("runtime (libcudart)", hk_env_cuda_runtime_version(env));
    line("driver (libcuda)", hk_env_cuda_driver_version(env));
    snprintf(buf, sizeof buf, "%d", hk_env_gpu_count(env));
    line("gpus", buf);
    for (int i = 0; i < hk_env_gpu_count(env); i++) {
        int ma = 0, mi = 0;
        hk_env_gpu_capability(env, i, &ma, &mi);
        char key[32];
        snprintf(key, sizeof key, "gpu %d", i);
        snprintf(buf, sizeof buf, "%s (compute capability %d.%d)", hk_env_gpu_name(env, i), ma, mi);
        line(key, buf);
    }
    printf("rocm\n");
    line("runtime (libamdhip64)", hk_env_hip_runtime_version(env));
    if (hk_env_gpu_arch(env)) {
        char base[256];
        hk_rocm_arch_base(base, sizeof base, hk_env_gpu_arch(env));
        snprintf(buf, sizeof buf, "%s (gcnArchName %s)", base, hk_env_gpu_arch(env));
        line("gpu 0 arch", buf);
    } else {
        line("gpu 0 arch", NULL);
    }
    printf("kernels backend\n");
    snprintf(buf, sizeof buf, "%s%s%s (variant tag %s; from %s)", hk_env_backend(env),
             hk_env_backend_version(env) ? " " : "",
             hk_env_backend_version(env) ? hk_env_backend_version(env) : "",
             hk_env_backend_variant(env) ? hk_env_backend_variant(env) : "unknown",
             hk_env_get(env, "backend_source"));
    line("backend", buf);
    hk_env_free(env);
    return 0;
}
