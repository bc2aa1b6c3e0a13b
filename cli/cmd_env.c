/* hubkern env: show what hubkern detects about this machine. */
#include "cli/cli.h"
#include "cli/cmd_env_flags.h"

#include <hubkern.h>

#include <stdlib.h>
#include <string.h>

static const cli_opt k_opts[] = {
    {HK_OPT_FLAG, "json", 0, NULL, "print one JSON object (for programs)", NULL, NULL},
    {HK_OPT_VALUE, "endpoint", 0, "URL", "report this endpoint instead of HF_ENDPOINT's", NULL, NULL},
    {HK_OPT_VALUE, "cache-dir", 0, "DIR", "report this cache instead of the environment's", "cache", NULL},
    {HK_OPT_FLAG, "offline", 0, NULL, "report offline mode as --offline would set it", NULL, NULL},
    {HK_OPT_END, NULL, 0, NULL, NULL, NULL, NULL},
};
static const char *const k_titles[] = {"options", "detection options", "system options (override what was detected)"};

const cli_spec cli_spec_env = {
    .name = "env",
    .summary = "show the machine (OS, CPU, Python, torch, tvm-ffi, CUDA, backend) and the Hub settings",
    .synopsis = "hubkern env [--json] [detection options] [system options]",
    .description =
        "Detect the machine: OS, CPU, Python, PyTorch, tvm-ffi, CUDA, ROCm and GPUs, and the\n"
        "compute backend as the Python `kernels` package would see it. Nothing is imported; at most one\n"
        "short Python call is made. Also the Hub settings as `hf env` shows them: endpoint, cache\n"
        "directories, where the token comes from and whether there is one (never the token), offline mode,\n"
        "and the CLI and library versions. No network call is made.\n",
    .tables = {k_opts, cli_env_detect_opts, cli_env_system_opts},
    .table_titles = k_titles,
    .json = 1,
};

static void line(const char *key, const char *value) {
    printf("  %-22s %s\n", key, value ? value : "-");
}

/* The token's state: where it comes from, never its value. */
static const char *token_state(const hk_hub *hub) {
    return hk_hub_token_source(hub) ? "set" : getenv("HF_HUB_DISABLE_IMPLICIT_TOKEN") ? "disabled" : "not set";
}

static cJSON *hub_json(const hk_hub *hub) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "endpoint", hk_hub_endpoint(hub));
    cJSON_AddStringToObject(j, "kernels_cache", hk_hub_cache_root(hub));
    char *models = NULL;
    if (hk_cache_root(&models, NULL, HK_REPO_MODEL) == HK_OK) cJSON_AddStringToObject(j, "hub_cache", models);
    hk_free(models);
    hk_clear_error();
    cJSON_AddStringToObject(j, "token", token_state(hub));
    if (hk_hub_token_source(hub)) cJSON_AddStringToObject(j, "token_source", hk_hub_token_source(hub));
    else cJSON_AddNullToObject(j, "token_source");
    cJSON_AddBoolToObject(j, "offline", hk_hub_is_offline(hub));
    return j;
}

static void print_hub(const hk_hub *hub) {
    printf("hub\n");
    line("endpoint", hk_hub_endpoint(hub));
    line("kernels cache", hk_hub_cache_root(hub));
    char *models = NULL;
    if (hk_cache_root(&models, NULL, HK_REPO_MODEL) == HK_OK) line("hub cache", models);
    hk_free(models);
    hk_clear_error();
    char buf[600];
    snprintf(buf, sizeof buf, "%s%s%s%s", token_state(hub), hk_hub_token_source(hub) ? " (from " : "",
             hk_hub_token_source(hub) ? hk_hub_token_source(hub) : "", hk_hub_token_source(hub) ? ")" : "");
    line("token", buf);
    line("offline", hk_hub_is_offline(hub) ? "yes" : "no");
    printf("versions\n");
    line("hubkern", HK_CLI_VERSION);
    line("libhubkern", hk_version());
}

static const char *tri(int v) { return v < 0 ? "-" : v ? "yes" : "no"; }

/* One piece: a command's main that prints one report, field after field, as text or JSON from the
 * same list; split, each part would take the report being built. */
int cli_cmd_env(int argc, char **argv) {
    cli_args a;
    int rc = cli_parse(&a, &cli_spec_env, argc, argv);
    if (rc || a.help) {
        if (!rc) cli_print_help(&cli_spec_env);
        cli_args_free(&a);
        return rc;
    }
    cli_env_flags fl;
    cli_env_flags_init(&fl);
    if (a.npos) rc = cli_usage_error("unexpected argument '%s'", a.pos[0]);
    else rc = cli_env_flags_get(&fl, &a);
    if (rc) {
        cli_env_flags_free(&fl);
        cli_args_free(&a);
        return rc;
    }
    bool json = cli_json();
    cli_hub_args h;
    cli_hub_args_get(&h, &a);
    hk_env *env = NULL;
    rc = cli_env_flags_build(&env, &fl);
    cli_env_flags_free(&fl);
    hk_hub *hub = NULL;
    if (rc) {
        rc = cli_report_error("detecting the machine");
        goto out;
    }
    hk_hub_options ho = HK_HUB_OPTIONS_INIT;
    ho.endpoint = h.endpoint;
    ho.cache_dir = h.cache;
    if (h.offline) ho.offline = 1;
    if (hk_hub_new(&hub, &ho)) { /* e.g. an endpoint without http(s)://: say so, keep the rest */
        rc = cli_report_error("hub settings");
        goto out;
    }
    if (json) {
        char *text = hk_env_to_json(env);
        cJSON *j = text ? cJSON_Parse(text) : NULL;
        hk_free(text);
        if (!j) {
            rc = cli_fail(1, "HK_ERR_INTERNAL", "formatting JSON failed");
            goto out;
        }
        cJSON_AddItemToObject(j, "hub", hub_json(hub));
        cJSON_AddStringToObject(j, "hubkern_version", HK_CLI_VERSION);
        cJSON_AddStringToObject(j, "library_version", hk_version());
        cli_print_json(j);
        goto out;
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
    print_hub(hub);
out:
    hk_hub_free(hub);
    hk_env_free(env);
    cli_args_free(&a);
    return rc;
}
