/* hubkern load: get a kernel the way a C program would (hk_get_kernel / hk_get_local_kernel /
 * hk_load_locked), load it, list what it exports; --call runs a built-in smoke check on our
 * reference kernels (RMSNorm: random data, float64 reference). */
#include "cli/cli.h"

#include <hubkern.h>

#include <cjson/cJSON.h>
#include <math.h> /* NAN, fabs (no libm calls) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const cli_opt k_opts[] = {
    {HK_OPT_VALUE, "version", 0, "N", "the kernel's major version N (branch vN)", NULL, NULL},
    {HK_OPT_VALUE, "revision", 0, "REV", "a branch, tag or commit instead of --version", NULL, NULL},
    {HK_OPT_VALUE, "variant", 0, "V", "this exact build variant", NULL, NULL},
    {HK_OPT_VALUE, "signature", 0, "MODE", "the metadata.json.sigstore check (docs/sigstore.md): require, warn or off; "
     "default: require for orgs a signing policy covers, warn for others (HUBKERN_SIGNATURE)", NULL, "require|warn|off"},
    {HK_OPT_VALUE, "backend", 0, "B", "choose the variant for this backend", NULL, "cpu|cuda|rocm|xpu|cann|metal|neuron|tpu"},
    {HK_OPT_VALUE, "local", 0, "DIR", "load a local kernel directory instead (hk_get_local_kernel)", NULL, NULL},
    {HK_OPT_VALUE, "lock", 0, "FILE", "load the commit a kernels.lock pins, from the cache only", NULL, NULL},
    {HK_OPT_FLAG, "call", 0, NULL, "run the built-in smoke check (rmsnorm's tvm-ffi builds)", NULL, NULL},
    {HK_OPT_FLAG, "trust-remote-code", 0, NULL, "skip the publisher trust check", NULL, NULL},
    {HK_OPT_VALUE, "tvm-ffi-lib", 0, "PATH", "libtvm_ffi to load tvm-ffi kernels with", NULL, NULL},
    {HK_OPT_FLAG, "no-arch-check", 0, NULL, "skip the ELF architecture check", NULL, NULL},
    {HK_OPT_FLAG, "json", 0, NULL, "print the result (or the error) as JSON on stdout", NULL, NULL},
    {HK_OPT_END, NULL, 0, NULL, NULL, NULL, NULL},
};
static const char *const k_titles[] = {"options", "hub options"};

const cli_spec cli_spec_load = {
    .name = "load",
    .summary = "get, load and list a kernel as a C program would; --call smoke-tests it",
    .synopsis = "hubkern load ORG/NAME (--version N | --revision REV) [--call] [--json] [options]\n"
                "hubkern load --local DIR [--call] [--json] [--backend B] ...\n"
                "hubkern load ORG/NAME --lock kernels.lock [--call] [--json] ...",
    .description =
        "Resolves, pulls (or finds in the cache), verifies and loads the variant this process can run\n"
        "(tvm-ffi; torch builds need libtorch in the process), then prints repo, commit, variant,\n"
        "metadata and the exported functions (--json adds bytes_verified: bytes hashed against the\n"
        "metadata.json digest before the load, and bytes_trusted: cached bytes its verification receipt\n"
        "vouched for; the text form prints both on its `verified` line, in kB/MB).\n"
        "LOCAL_KERNELS=org/name=/path is honoured.\n"
        "--call runs a smoke check when the kernel is one of ours (rmsnorm: rms_norm and\n"
        "fused_add_rms_norm on random CPU data, checked against a float64 reference).\n"
        "--lock loads the commit pinned in a kernels.lock from the cache only (no network).\n"
        "Online, kernel-status.toml redirects are followed: the repo shown is the destination, and a\n"
        "note on stderr says so. A lock written by `hubkern lock` names the destination: load that name.\n",
    .tables = {k_opts, cli_hub_opts},
    .table_titles = k_titles,
    .conflicts = "version,revision;local,lock;version,local;revision,local;version,lock;revision,lock",
    .json = 1,
};

static const char *kind_name(hk_kernel_kind k) {
    return k == HK_KERNEL_TVM_FFI ? "tvm-ffi" : k == HK_KERNEL_TORCH ? "torch" : "noarch";
}

/* "512 B", "12.3 kB", "4.5 MB", "1.2 GB" (decimal units, as the other commands print MB) */
static const char *human_size(char *buf, size_t cap, uint64_t n) {
    static const char *const units[] = {"kB", "MB", "GB", "TB"};
    if (n < 1000) {
        snprintf(buf, cap, "%llu B", (unsigned long long)n);
        return buf;
    }
    double v = (double)n / 1000.0;
    size_t u = 0;
    while (v >= 999.95 && u + 1 < sizeof units / sizeof units[0]) {
        v /= 1000.0;
        u++;
    }
    snprintf(buf, cap, "%.1f %s", v, units[u]);
    return buf;
}

static uint64_t g_rng;
static float frand(void) { /* xorshift64*, uniform in [-1, 1) */
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return (float)((double)((g_rng * 2685821657736338717ULL) >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* square root by Newton's method (the CLI does not link libm) */
static double nsqrt(double v) {
    if (!(v > 0)) return 0;
    double r = v > 1 ? v : 1;
    for (int i = 0; i < 200; i++) {
        double n = 0.5 * (r + v / r);
        if (n == r) break;
        r = n;
    }
    return r;
}

/* out = x / sqrt(mean(x^2) + eps) * w, row by row, in double */
static void reference(double *out, const float *x, const float *w, int rows, int hidden, double eps) {
    for (int r = 0; r < rows; r++) {
        double ss = 0;
        for (int i = 0; i < hidden; i++) ss += (double)x[r * hidden + i] * x[r * hidden + i];
        double inv = 1.0 / nsqrt(ss / hidden + eps);
        for (int i = 0; i < hidden; i++) out[r * hidden + i] = x[r * hidden + i] * inv * w[i];
    }
}

static double max_err(const float *got, const double *want, size_t n, int *bad) {
    double m = 0;
    *bad = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - want[i]);
        if (!(e <= 1e-5 + 1e-5 * fabs(want[i]))) (*bad)++; /* NaN counts as bad */
        if (e > m || e != e) m = e;
    }
    return m;
}

/* "" (a local kernel's repo id and commit) is null in JSON: missing, not empty (docs/json.md) */
static void add_or_null(cJSON *j, const char *key, const char *v) {
    if (v && *v) cJSON_AddStringToObject(j, key, v);
    else cJSON_AddNullToObject(j, key);
}

static int smoke_rmsnorm(const hk_kernel *k, cJSON *json) {
    enum { ROWS = 8, HIDDEN = 1000 };
    const double eps = 1e-6;
    g_rng = (uint64_t)time(NULL) * 0x9E3779B97F4A7C15ULL | 1;
    float *x = malloc(sizeof(float) * ROWS * HIDDEN), *out = malloc(sizeof(float) * ROWS * HIDDEN);
    float *res = malloc(sizeof(float) * ROWS * HIDDEN), w[HIDDEN];
    double *ref = malloc(sizeof(double) * ROWS * HIDDEN);
    int rc = 0;
    if (!x || !out || !res || !ref) {
        rc = cli_fail(1, "HK_ERR_NOMEM", "out of memory");
        goto done;
    }
    for (int i = 0; i < ROWS * HIDDEN; i++) {
        x[i] = frand() * 3.0f;
        out[i] = NAN;
        res[i] = frand();
    }
    for (int i = 0; i < HIDDEN; i++) w[i] = 1.0f + 0.5f * frand();
    int64_t shape[2] = {ROWS, HIDDEN}, wshape[1] = {HIDDEN};
    hk_dltensor tx = {x, {HK_DEVICE_CPU, 0}, 2, {HK_DTYPE_FLOAT, 32, 1}, shape, NULL, 0};
    hk_dltensor tout = {out, {HK_DEVICE_CPU, 0}, 2, {HK_DTYPE_FLOAT, 32, 1}, shape, NULL, 0};
    hk_dltensor tres = {res, {HK_DEVICE_CPU, 0}, 2, {HK_DTYPE_FLOAT, 32, 1}, shape, NULL, 0};
    hk_dltensor tw = {w, {HK_DEVICE_CPU, 0}, 1, {HK_DTYPE_FLOAT, 32, 1}, wshape, NULL, 0};
    hk_value args[4] = {hk_value_tensor(&tout), hk_value_tensor(&tx), hk_value_tensor(&tw), hk_value_float(eps)};
    if (hk_kernel_call(NULL, k, "rms_norm", args, 4) != HK_OK) {
        rc = cli_report_error("rms_norm");
        goto done;
    }
    reference(ref, x, w, ROWS, HIDDEN, eps);
    int bad;
    double e = max_err(out, ref, ROWS * HIDDEN, &bad);
    FILE *msg = json ? stderr : stdout;
    fprintf(msg, "call      rms_norm(out, x, weight, %g) on %dx%d float32 CPU data: max |error| %.3g vs float64 "
           "reference: %s\n", eps, ROWS, HIDDEN, e, bad ? "MISMATCH" : "ok");
    if (json) {
        cJSON *c = cJSON_AddObjectToObject(json, "rms_norm");
        cJSON_AddNumberToObject(c, "max_abs_error", e);
        cJSON_AddBoolToObject(c, "ok", !bad);
    }
    if (bad) rc = 1;
    const hk_function *f;
    if (rc == 0 && hk_kernel_function(&f, k, "fused_add_rms_norm") == HK_OK) {
        /* residual += x; x = rms_norm(residual) * w */
        for (int i = 0; i < ROWS * HIDDEN; i++) res[i] += x[i];
        reference(ref, res, w, ROWS, HIDDEN, eps);
        for (int i = 0; i < ROWS * HIDDEN; i++) res[i] -= x[i];
        hk_value a2[4] = {hk_value_tensor(&tx), hk_value_tensor(&tres), hk_value_tensor(&tw), hk_value_float(eps)};
        if (hk_function_call(NULL, f, a2, 4) != HK_OK) {
            rc = cli_report_error("fused_add_rms_norm");
            goto done;
        }
        e = max_err(x, ref, ROWS * HIDDEN, &bad);
        fprintf(msg, "call      fused_add_rms_norm(x, residual, weight, %g): max |error| %.3g: %s\n", eps, e,
               bad ? "MISMATCH" : "ok");
        if (json) {
            cJSON *c = cJSON_AddObjectToObject(json, "fused_add_rms_norm");
            cJSON_AddNumberToObject(c, "max_abs_error", e);
            cJSON_AddBoolToObject(c, "ok", !bad);
        }
        if (bad) rc = 1;
    }
done:
    free(x);
    free(out);
    free(res);
    free(ref);
    return rc;
}

/* One piece: a command's main reads its options into one hk_get_kernel_options, loads and reports;
 * split, each part would take the arguments and the options being filled. */
/* The kernels k depends on, loaded before it (kernel-depends), each with its own, as
 * "dependencies" of j: a local node (LOCAL_KERNELS) has an empty commit and its own path. */
static void cli_add_dependencies(cJSON *j, const hk_kernel *k) {
    cJSON *ds = cJSON_AddArrayToObject(j, "dependencies");
    for (size_t i = 0; ds && i < hk_kernel_dependency_count(k); i++) {
        const hk_kernel *d = hk_kernel_dependency_at(k, i);
        cJSON *dj = cJSON_CreateObject();
        add_or_null(dj, "repo_id", hk_kernel_repo_id(d));
        add_or_null(dj, "commit", hk_kernel_commit(d));
        cJSON_AddStringToObject(dj, "variant", hk_kernel_variant(d));
        cJSON_AddStringToObject(dj, "path", hk_kernel_path(d));
        cli_add_dependencies(dj, d);
        cJSON_AddItemToArray(ds, dj);
    }
}

int cli_cmd_load(int argc, char **argv) {
    cli_args a;
    int prc = cli_parse(&a, &cli_spec_load, argc, argv);
    if (prc || a.help) {
        if (!prc) cli_print_help(&cli_spec_load);
        cli_args_free(&a);
        return prc;
    }
    hk_get_kernel_options o;
    hk_get_kernel_options_init(&o, HK_GET_KERNEL_OPTIONS_VERSION);
    cli_hub_args h;
    cli_hub_args_get(&h, &a);
    o.hub_options.endpoint = h.endpoint;
    o.hub_options.cache_dir = h.cache;
    o.hub_options.token = h.token;
    if (h.offline) o.hub_options.offline = 1;
    o.trust_remote_code = cli_count(&a, "trust-remote-code") > 0;
    o.skip_arch_check = cli_count(&a, "no-arch-check") > 0;
    o.revision = cli_str(&a, "revision");
    o.backend = cli_str(&a, "backend");
    o.variant = cli_str(&a, "variant");
    o.tvm_ffi_library = cli_str(&a, "tvm-ffi-lib");
    const char *local = cli_str(&a, "local"), *lock = cli_str(&a, "lock");
    int call = cli_count(&a, "call") > 0, json = cli_json();
    o.repo_id = a.npos ? a.pos[0] : NULL;
    if (a.npos > 1) prc = cli_usage_error("unexpected argument '%s'", a.pos[1]);
    else if (!(prc = cli_int(&a, "version", 1000000, &o.kernel_version))) prc = cli_check_backend(o.backend);
    const char *sig = cli_str(&a, "signature");
    if (!prc && sig && hk_signature_mode_parse(&o.signature, sig))
        prc = cli_usage_error("--signature: %s", hk_last_error());
    if (!prc && !local && !o.repo_id) prc = cli_usage_error("missing ORG/NAME (or --local DIR)");
    if (!prc && !local && !lock && (o.kernel_version == HK_VERSION_UNSET) == (o.revision == NULL))
        prc = cli_usage_error("--version N or --revision REV is required");
    cli_args_free(&a); /* the strings above live in argv */
    if (prc) return prc;
    hk_kernel *k = NULL;
    int rc;
    if (local) {
        rc = hk_get_local_kernel(&k, local, &o);
    } else if (lock) {
        rc = hk_load_locked(&k, lock, o.repo_id, &o);
    } else {
        rc = hk_get_kernel(&k, &o);
        if (rc == HK_OK) cli_note_redirect(o.repo_id, hk_kernel_repo_id(k), "loaded from there");
    }
    if (rc) return cli_report_error(NULL);

    const hk_kernel_metadata *md = hk_kernel_get_metadata(k);
    cJSON *j = json ? cJSON_CreateObject() : NULL;
    if (j) {
        add_or_null(j, "repo_id", hk_kernel_repo_id(k)); /* a local kernel has neither */
        add_or_null(j, "commit", hk_kernel_commit(k));
        cJSON_AddStringToObject(j, "variant", hk_kernel_variant(k));
        cJSON_AddStringToObject(j, "kind", kind_name(hk_kernel_get_kind(k)));
        cJSON_AddStringToObject(j, "path", hk_kernel_path(k));
        if (hk_kernel_library_path(k)) cJSON_AddStringToObject(j, "library_path", hk_kernel_library_path(k));
        cJSON *m = cJSON_AddObjectToObject(j, "metadata");
        cJSON_AddStringToObject(m, "name", md->name);
        cJSON_AddStringToObject(m, "id", md->id);
        cJSON_AddNumberToObject(m, "version", md->version);
        cJSON_AddStringToObject(m, "license", md->license);
        cJSON_AddStringToObject(m, "backend", md->backend);
        cJSON *ar = cJSON_AddArrayToObject(m, "archs");
        for (size_t i = 0; i < md->num_archs; i++) cJSON_AddItemToArray(ar, cJSON_CreateString(md->archs[i]));
        cJSON *fs = cJSON_AddArrayToObject(j, "functions");
        for (size_t i = 0; i < hk_kernel_num_functions(k); i++)
            cJSON_AddItemToArray(fs, cJSON_CreateString(hk_kernel_function_name(k, i)));
        if (hk_kernel_torch_namespace(k)) cJSON_AddStringToObject(j, "torch_namespace", hk_kernel_torch_namespace(k));
        /* the digest check before the load (0 and 0 for --local and LOCAL_KERNELS: nothing checked) */
        cJSON_AddNumberToObject(j, "bytes_verified", (double)hk_kernel_bytes_verified(k));
        cJSON_AddNumberToObject(j, "bytes_trusted", (double)hk_kernel_bytes_trusted(k));
        cli_add_dependencies(j, k);
    } else {
        printf("repo      %s\n", *hk_kernel_repo_id(k) ? hk_kernel_repo_id(k) : "(local)");
        if (*hk_kernel_commit(k)) printf("commit    %s\n", hk_kernel_commit(k));
        printf("variant   %s (%s)\n", hk_kernel_variant(k), kind_name(hk_kernel_get_kind(k)));
        printf("path      %s\n", hk_kernel_path(k));
        if (hk_kernel_library_path(k)) printf("library   %s\n", hk_kernel_library_path(k));
        printf("metadata  name=%s id=%s version=%d license=%s backend=%s", md->name, md->id, md->version,
               md->license, md->backend);
        if (md->num_archs) {
            printf(" archs=");
            for (size_t i = 0; i < md->num_archs; i++) printf("%s%s", i ? "," : "", md->archs[i]);
        }
        printf("\n");
        uint64_t hashed = hk_kernel_bytes_verified(k), trusted = hk_kernel_bytes_trusted(k);
        if (hashed == 0 && trusted == 0) {
            printf("verified  nothing: no digest check ran before this load (local directories are not "
                   "checked)\n");
        } else {
            char sa[32], sb[32];
            printf("verified  %s hashed against the metadata.json digest, %s trusted by its verification "
                   "receipt\n", human_size(sa, sizeof sa, hashed), human_size(sb, sizeof sb, trusted));
        }
        for (size_t i = 0; i < hk_kernel_dependency_count(k); i++) {
            const hk_kernel *d = hk_kernel_dependency_at(k, i);
            printf("depends   %s %.12s %s\n", hk_kernel_repo_id(d), hk_kernel_commit(d), hk_kernel_variant(d));
        }
        if (hk_kernel_get_kind(k) == HK_KERNEL_TVM_FFI) {
            printf("functions");
            for (size_t i = 0; i < hk_kernel_num_functions(k); i++)
                printf("%s%s", i ? ", " : " ", hk_kernel_function_name(k, i));
            printf("\n");
        } else if (hk_kernel_get_kind(k) == HK_KERNEL_TORCH) {
            printf("ops       registered with the c10 dispatcher under %s::\n", hk_kernel_torch_namespace(k));
        } else {
            printf("native    none: a Python-only (noarch) variant\n");
        }
    }
    int out = 0;
    if (call) {
        if (strcmp(md->name, "rmsnorm") == 0 && hk_kernel_get_kind(k) == HK_KERNEL_TVM_FFI) {
            out = smoke_rmsnorm(k, j ? cJSON_AddObjectToObject(j, "call") : NULL);
        } else {
            out = cli_fail(1, "HK_ERR_UNSUPPORTED", "--call has no built-in smoke check for '%s' (%s variant); "
                              "it knows the tvm-ffi builds of rmsnorm", md->name, kind_name(hk_kernel_get_kind(k)));
        }
    }
    if (j) cli_print_json(j);
    hk_kernel_unref(k);
    return out;
}
