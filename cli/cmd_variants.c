/* hubkern variants DIR: resolve the build variants of a local kernel directory and show the
 * decision for each one. */
#include "cli/cli.h"
#include "util/vec.h"
#include "cli/cmd_env_flags.h"

#include <hubkern.h>

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const cli_opt k_opts[] = {
    {HK_OPT_FLAG, "json", 0, NULL, "print the decision trace as JSON", NULL, NULL},
    {HK_OPT_VALUE, "backend", 0, "NAME", "an explicit backend: cpu, or the detected backend's name", NULL,
     "cpu|cuda|rocm|xpu|cann|metal|neuron|tpu"},
    {HK_OPT_END, NULL, 0, NULL, NULL, NULL, NULL},
};
static const char *const k_titles[] = {"options", "detection options", "system options (override what was detected)"};

const cli_spec cli_spec_variants = {
    .name = "variants",
    .summary = "resolve a local kernel's build variants for this (or a described) machine",
    .synopsis = "hubkern variants DIR [--json] [--backend cpu|<detected>] [options]",
    .description =
        "Resolve the build variants in DIR/build/* (or DIR/* when DIR has no build/) for this\n"
        "machine, or for one described with the system options, exactly as the Python\n"
        "`kernels` package 0.17 would, and print every candidate, preferred first, with the\n"
        "reason it was accepted or rejected.\n"
        "Exit status (as grep's): 0 a variant fits, 1 none does, 2 no answer: a usage error, an\n"
        "unreadable DIR, an invalid machine description or backend.\n",
    .tables = {k_opts, cli_env_detect_opts, cli_env_system_opts},
    .table_titles = k_titles,
    .json = 1,
};

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Subdirectory names of dir (sorted); *out freed by the caller. */
static int list_dirs(char ***out, size_t *n, const char *dir) {
    *out = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) return -1;
    size_t cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        size_t plen = strlen(dir) + strlen(e->d_name) + 2;
        char *p = malloc(plen);
        if (!p) break;
        snprintf(p, plen, "%s/%s", dir, e->d_name);
        struct stat st;
        bool is_dir = stat(p, &st) == 0 && S_ISDIR(st.st_mode);
        free(p);
        if (!is_dir) continue;
        if (hk__vec_reserve((void **)out, &cap, *n + 1, sizeof **out) != HK_OK) break;
        (*out)[(*n)++] = strdup(e->d_name);
    }
    closedir(d);
    if (*n) qsort(*out, *n, sizeof **out, cmp_str);
    return 0;
}

int cli_cmd_variants(int argc, char **argv) {
    cli_args a;
    int prc = cli_parse(&a, &cli_spec_variants, argc, argv);
    if (prc || a.help) {
        if (!prc) cli_print_help(&cli_spec_variants);
        cli_args_free(&a);
        return prc;
    }
    bool json = cli_json();
    const char *dir = a.npos ? a.pos[0] : NULL, *backend = cli_str(&a, "backend");
    cli_env_flags fl;
    cli_env_flags_init(&fl);
    if (!dir) prc = cli_usage_error("missing DIR (a kernel directory, or its build/)");
    else if (a.npos > 1) prc = cli_usage_error("unexpected argument '%s'", a.pos[1]);
    else prc = cli_env_flags_get(&fl, &a);
    if (prc) {
        cli_env_flags_free(&fl);
        cli_args_free(&a);
        return prc;
    }
    size_t blen = strlen(dir) + 8;
    char *build = malloc(blen);
    if (!build) {
        cli_env_flags_free(&fl);
        cli_args_free(&a);
        return 2;
    }
    snprintf(build, blen, "%s/build", dir);
    struct stat st;
    const char *scan = stat(build, &st) == 0 && S_ISDIR(st.st_mode) ? build : dir;
    char **names = NULL;
    size_t n = 0;
    if (list_dirs(&names, &n, scan) != 0) {
        int bad = cli_fail(2, "HK_ERR_IO", "cannot read directory '%s'", scan);
        free(build);
        cli_env_flags_free(&fl);
        cli_args_free(&a);
        return bad;
    }

    hk_env *env = NULL;
    hk_resolution *r = NULL;
    int status = 0;
    int rc = cli_env_flags_build(&env, &fl);
    if (rc) {
        status = cli_report_error("describing the machine") ? 2 : 0;
        goto done;
    }
    rc = hk_resolve_variants(&r, env, (const char *const *)names, n, backend);
    if (rc) {
        status = cli_report_error("resolving variants") ? 2 : 0;
        goto done;
    }
    const char *best = hk_resolution_best(r);
    if (json) {
        char *text = hk_resolution_to_json(r);
        if (!text) {
            status = cli_report_error("formatting JSON") ? 2 : 0;
            goto done;
        }
        cJSON *j = cJSON_Parse(text);
        hk_free(text);
        cli_print_json(j);
    } else {
        const char *tv = hk_env_torch_version(env), *fv = hk_env_tvm_ffi_version(env);
        int abi = hk_env_torch_cxx11_abi(env);
        printf("system: %s-%s, torch %s%s, tvm-ffi %s, python %s%s, backend %s\n",
               hk_env_cpu(env) ? hk_env_cpu(env) : "?", hk_env_os(env) ? hk_env_os(env) : "?",
               tv ? tv : "none", abi < 0 ? "" : abi ? " (cxx11 ABI)" : " (pre-cxx11 ABI)",
               fv ? fv : "none",
               hk_env_python_version(env) ? hk_env_python_version(env) : "none",
               hk_env_python_free_threaded(env) == 1 ? " (free-threaded)" : "",
               hk_resolution_backend(r) ? hk_resolution_backend(r) : hk_env_backend(env));
        printf("variants in %s (%zu, preferred first):\n", scan, hk_resolution_count(r));
        char *text = hk_resolution_to_text(r);
        if (text) {
            for (char *line = text, *eol; *line; line = eol + 1) {
                eol = strchr(line, '\n');
                if (!eol) break;
                printf("  %.*s\n", (int)(eol - line), line);
            }
        }
        hk_free(text);
        if (best)
            printf("selected: %s\n", best);
        else
            printf("no compatible variant\n");
    }
    status = best ? 0 : 1;
done:
    hk_resolution_free(r);
    hk_env_free(env);
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    free(build);
    cli_env_flags_free(&fl);
    cli_args_free(&a);
    return status;
}
