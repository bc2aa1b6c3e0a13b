/* hk_get_kernel and friends: the joins between detection (env.h), resolution (variant.h), the
 * client and cache (hub.h) and the loader (kernel.c). */
#include "kernel/kernel_internal.h"

#include "cache/cache.h"
#include "client/client.h"
#include "hubkern/env.h"
#include "hubkern/hub.h"
#include "hubkern/variant.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

HK_API void hk_get_kernel_options_init(hk_get_kernel_options *opts) {
    if (!opts) return;
    memset(opts, 0, sizeof *opts);
    opts->struct_size = sizeof *opts;
    opts->version = HK_VERSION_UNSET;
}

/* ---- the machine ---------------------------------------------------------------------------- */

static pthread_mutex_t g_env_lock = PTHREAD_MUTEX_INITIALIZER;
static hk_env *g_env; /* detected once per process, then read-only */

/* The env to resolve with: the caller's, else the process-wide detected one. When it knows no
 * tvm-ffi version (no Python package) but a libtvm_ffi can be loaded, the runtime's version is
 * used (through a private copy in *owned). */
static int get_env(const hk_env **out, hk_env **owned, const hk_get_kernel_options *o) {
    *owned = NULL;
    const hk_env *env = o ? o->env : NULL;
    if (!env) {
        pthread_mutex_lock(&g_env_lock);
        int rc = HK_OK;
        if (!g_env) {
            rc = hk_env_detect(&g_env, NULL);
            if (rc == HK_OK && !hk_env_tvm_ffi_version(g_env) &&
                hk_tvm_ffi_ensure(o ? o->tvm_ffi_library : NULL, hk_env_tvm_ffi_lib(g_env)) == HK_OK) {
                int ma, mi;
                char v[32];
                if (hk_tvm_ffi_version(&ma, &mi, NULL) == HK_OK) {
                    snprintf(v, sizeof v, "%d.%d", ma, mi);
                    hk_env_set(g_env, "tvm_ffi_version", v);
                }
            }
            hk_clear_error();
        }
        pthread_mutex_unlock(&g_env_lock);
        if (rc) return rc;
        env = g_env;
    } else if (!hk_env_tvm_ffi_version(env) &&
               hk_tvm_ffi_ensure(o ? o->tvm_ffi_library : NULL, hk_env_tvm_ffi_lib(env)) == HK_OK) {
        int ma, mi;
        char v[32];
        if (hk_tvm_ffi_version(&ma, &mi, NULL) == HK_OK && hk_env_clone(owned, env) == HK_OK) {
            snprintf(v, sizeof v, "%d.%d", ma, mi);
            hk_env_set(*owned, "tvm_ffi_version", v);
            env = *owned;
        }
        hk_clear_error();
    }
    *out = env;
    return HK_OK;
}

static void fill_request(hk_load_request *req, const hk_get_kernel_options *o, const hk_env *env) {
    memset(req, 0, sizeof *req);
    req->cuda_major = req->cuda_minor = -1;
    if (o) {
        req->tvm_ffi_library = o->tvm_ffi_library;
        req->skip_arch_check = o->skip_arch_check;
        req->repo_id = o->repo_id;
    }
    if (env) {
        req->tvm_ffi_hint = hk_env_tvm_ffi_lib(env);
        req->gpu_arch = hk_env_gpu_arch(env);
        int ma, mi;
        if (hk_env_gpu_count(env) > 0 && hk_env_gpu_capability(env, 0, &ma, &mi) == HK_OK) {
            req->cuda_major = ma;
            req->cuda_minor = mi;
        } else {
            req->cuda_major = -2; /* no GPU visible */
        }
    }
}

/* ---- variant choice ------------------------------------------------------------------------- */

/* Families this process can load: tvm-ffi always; torch builds only next to libtorch. Noarch
 * variants are given back (path only) when nothing native fits. */
static int choose_variant(char **out, const hk_env *env, const char *backend, char *const *names,
                          size_t n, const char *where, const char *forced) {
    *out = NULL;
    if (forced) { /* the caller named the variant: it must exist */
        for (size_t i = 0; i < n; i++)
            if (strcmp(names[i], forced) == 0) {
                *out = hk_strdup(forced);
                return *out ? HK_OK : hk_fail(HK_ERR_NOMEM, "out of memory");
            }
        hk_strbuf sb;
        hk_sb_init(&sb);
        for (size_t i = 0; i < n; i++) hk_sb_printf(&sb, "%s%s", i ? ", " : "", names[i]);
        int rc = hk_fail(HK_ERR_NO_VARIANT, "%s has no build variant '%s' (it has: %s)", where, forced,
                         sb.data && sb.len ? sb.data : "none");
        hk_sb_free(&sb);
        return rc;
    }
    hk_resolution *r = NULL;
    int rc = hk_resolve_variants(&r, env, (const char *const *)names, n, backend);
    if (rc) return rc;
    unsigned mask = HK_FAMILY_BIT(HK_FAMILY_TVM_FFI);
    bool torch = hk_libtorch_in_process();
    if (torch) mask |= HK_FAMILY_BIT(HK_FAMILY_TORCH) | HK_FAMILY_BIT(HK_FAMILY_TORCH_STABLE_ABI);
    const char *best = hk_resolution_best_of(r, mask);
    if (!best) best = hk_resolution_best_of(r, HK_FAMILY_BIT(HK_FAMILY_NOARCH));
    if (best) {
        *out = hk_strdup(best);
        hk_resolution_free(r);
        return *out ? HK_OK : hk_fail(HK_ERR_NOMEM, "out of memory");
    }
    char *trace = hk_resolution_to_text(r);
    const char *any = hk_resolution_best(r);
    rc = hk_fail(HK_ERR_NO_VARIANT,
                 "no build variant of %s fits this machine and process%s%s%s:\n%s", where,
                 any ? " (" : "", any ? any : "",
                 any ? " would fit, but torch variants load only into a process that has "
                       "libtorch; a tvm-ffi variant is needed)" : "",
                 trace ? trace : "(no candidates)");
    hk_free(trace);
    hk_resolution_free(r);
    return rc;
}

/* Choose among the variant directories of `variants_dir` and load the choice. */
static int load_from_variants_dir(hk_kernel **out, const char *variants_dir, const hk_env *env,
                                  const hk_get_kernel_options *o, const char *commit,
                                  const char *where) {
    char **names = NULL;
    size_t n = 0;
    int rc = hk_list_subdirs(&names, &n, variants_dir);
    if (rc) return rc;
    char *best = NULL;
    rc = choose_variant(&best, env, o ? o->backend : NULL, names, n, where, o ? o->variant : NULL);
    hk_kstrv_free(names, n);
    if (rc) return rc;
    char *dir = hk_path_join(variants_dir, best);
    hk_load_request req;
    fill_request(&req, o, env);
    req.variant_dir = dir;
    req.variant_name = best;
    req.commit = commit;
    rc = dir ? hk_kernel_load_variant(out, &req) : hk_fail(HK_ERR_NOMEM, "out of memory");
    free(dir);
    free(best);
    return rc;
}

int hk_loader_pick_variant(char **out, hk_hub *hub, const char *repo_id, const char *commit,
                           const char *backend) {
    *out = NULL;
    const hk_env *env;
    hk_env *owned;
    int rc = get_env(&env, &owned, NULL);
    if (rc) return rc;
    char **names = NULL;
    size_t n = 0;
    rc = hk_hub_list_variants(&names, &n, hub, repo_id, commit);
    if (rc == HK_OK) rc = choose_variant(out, env, backend, names, n, repo_id, NULL);
    if (names) hk_hub_strv_free(names);
    hk_env_free(owned);
    return rc;
}

/* ---- local kernels ------------------------------------------------------------------------- */

static int get_local(hk_kernel **out, const char *path, const hk_get_kernel_options *o) {
    if (!hk_is_dir(path)) return hk_fail(HK_ERR_NOT_FOUND, "%s is not a directory", path);
    const hk_env *env;
    hk_env *owned;
    int rc = get_env(&env, &owned, o);
    if (rc) return rc;
    char *md = hk_path_join(path, "metadata.json");
    char *build = hk_path_join(path, "build");
    if (!md || !build) {
        rc = hk_fail(HK_ERR_NOMEM, "out of memory");
    } else if (hk_path_exists(md)) { /* a variant directory itself */
        hk_load_request req;
        fill_request(&req, o, env);
        req.variant_dir = path;
        rc = hk_kernel_load_variant(out, &req);
    } else if (hk_is_dir(build)) { /* a repo checkout with build/ */
        rc = load_from_variants_dir(out, build, env, o, NULL, path);
    } else { /* a directory of variants */
        rc = load_from_variants_dir(out, path, env, o, NULL, path);
    }
    free(md);
    free(build);
    hk_env_free(owned);
    return rc;
}

HK_API int hk_get_local_kernel(hk_kernel **out, const char *path, const hk_get_kernel_options *opts) {
    if (!out || !path) return hk_fail(HK_ERR_INVALID_ARG, "hk_get_local_kernel: NULL argument");
    *out = NULL;
    return get_local(out, path, opts);
}

int hk_local_kernels_lookup(char **out_path, const char *repo_id) {
    *out_path = NULL;
    const char *spec = hk_getenv("LOCAL_KERNELS");
    if (!spec) return HK_OK;
    char *copy = hk_strdup(spec), *save = NULL;
    if (!copy) return hk_fail(HK_ERR_NOMEM, "out of memory");
    int rc = HK_OK;
    for (char *item = strtok_r(copy, ":", &save); item; item = strtok_r(NULL, ":", &save)) {
        char *eq = strchr(item, '=');
        if (!eq) {
            rc = hk_fail(HK_ERR_INVALID_ARG,
                         "LOCAL_KERNELS entry '%s' has no '=': use org/name=/path[:org/other=/path]", item);
            break;
        }
        *eq = '\0';
        if (strcmp(item, repo_id) == 0 && !*out_path) {
            *out_path = hk_strdup(eq + 1);
            if (!*out_path) rc = hk_fail(HK_ERR_NOMEM, "out of memory");
        }
    }
    free(copy);
    if (rc) {
        free(*out_path);
        *out_path = NULL;
    }
    return rc;
}

/* ---- from the Hub --------------------------------------------------------------------------- */

static int check_opts(const hk_get_kernel_options *o) {
    if (!o || !o->repo_id) return hk_fail(HK_ERR_INVALID_ARG, "options with a repo_id are required");
    if (!hk_repo_id_valid(o->repo_id))
        return hk_fail(HK_ERR_INVALID_ARG, "'%s' is not a valid repo id (org/name)", o->repo_id);
    bool has_version = o->version != HK_VERSION_UNSET;
    if (has_version && o->version < 0)
        return hk_fail(HK_ERR_INVALID_ARG, "version must be a non-negative integer (got %d)", o->version);
    if (has_version == (o->revision != NULL))
        return hk_fail(HK_ERR_INVALID_ARG, "give exactly one of version and revision for %s", o->repo_id);
    return HK_OK;
}

static int new_hub(hk_hub **out, const hk_get_kernel_options *o) {
    hk_hub_options ho = HK_HUB_OPTIONS_INIT;
    ho.endpoint = o->endpoint;
    ho.token = o->token;
    ho.cache_dir = o->cache_dir;
    ho.offline = o->offline ? 1 : -1;
    ho.progress = o->progress;
    ho.progress_userdata = o->progress_userdata;
    return hk_hub_new(out, &ho);
}

/* hk_hub_fetch_variant, also telling how many bytes the digest check hashed and how many the
 * variant's verification receipt vouched for (recorded in the handle for hk_kernel_bytes_*). */
static int fetch_variant(char **out_dir, char **out_commit, char **out_variant, uint64_t out_bytes[2], hk_hub *hub,
                         const hk_pull_spec *s) {
    *out_dir = *out_commit = *out_variant = NULL;
    out_bytes[0] = out_bytes[1] = 0;
    hk_pull_result *r = NULL;
    int rc = hk_hub_pull(&r, hub, s);
    if (rc) return rc;
    if (hk_pull_result_variant_count(r) == 0) {
        hk_pull_result_free(r);
        return hk_fail(HK_ERR_INTERNAL, "a pull of %s returned no variant", s->repo_id);
    }
    *out_dir = hk_strdup(hk_pull_result_variant_path(r, 0));
    *out_commit = hk_strdup(hk_pull_result_commit(r));
    *out_variant = hk_strdup(hk_pull_result_variant(r, 0));
    out_bytes[0] = hk_pull_result_bytes_verified(r);
    out_bytes[1] = hk_pull_result_bytes_trusted(r);
    hk_pull_result_free(r);
    if (!*out_dir || !*out_commit || !*out_variant) return hk_fail(HK_ERR_NOMEM, "out of memory");
    return HK_OK;
}

static int already_loaded(hk_kernel **out, hk_hub *hub, const char *repo_id, const char *commit,
                          const char *variant) {
    char *repo_dir = hk_cache_repo_dir(hk_hub_cache_root(hub), HK_REPO_KERNEL, repo_id);
    char *dir = repo_dir ? hk_asprintf("%s/snapshots/%s/build/%s", repo_dir, commit, variant) : NULL;
    *out = dir ? hk_kernel_registry_find(dir) : NULL;
    free(repo_dir);
    free(dir);
    return *out != NULL;
}

/* Where o leads on the Hub and which variant to load there: resolve the version/revision, follow
 * kernel-status.toml redirects (hk_hub_resolve_spec), list build/ at the repo and commit the chain
 * ends at and choose among those names for this machine and process. *out_repo / *out_rev (the
 * final repo and the revision resolved there) are freed with hk_free, *out_best with free. */
static int resolve_target(char **out_repo, char **out_rev, char commit[65], char **out_best, hk_hub *hub,
                          const hk_env *env, const hk_get_kernel_options *o, int trust_remote_code) {
    *out_repo = *out_rev = *out_best = NULL;
    hk_pull_spec s = HK_PULL_SPEC_INIT;
    s.repo_id = o->repo_id;
    s.kernel_version = o->version == HK_VERSION_UNSET ? -1 : o->version;
    s.revision = o->revision;
    s.trust_remote_code = trust_remote_code;
    char *resolved = NULL;
    int rc = hk_hub_resolve_spec(out_repo, out_rev, &resolved, hub, &s);
    if (rc == HK_OK) snprintf(commit, 65, "%s", resolved);
    hk_free(resolved);
    if (rc) return rc;
    char **names = NULL;
    size_t n = 0;
    rc = hk_hub_list_variants(&names, &n, hub, *out_repo, commit);
    if (rc == HK_OK) {
        bool moved = strcmp(*out_repo, o->repo_id) != 0;
        char *where = hk_asprintf("%s@%s%s%s%s", *out_repo, commit, moved ? " (redirected from " : "",
                                  moved ? o->repo_id : "", moved ? ")" : "");
        rc = where ? choose_variant(out_best, env, o->backend, names, n, where, o->variant)
                   : hk_fail(HK_ERR_NOMEM, "out of memory");
        free(where);
    }
    if (names) hk_hub_strv_free(names);
    if (rc) {
        hk_free(*out_repo);
        hk_free(*out_rev);
        *out_repo = *out_rev = NULL;
    }
    return rc;
}

/* The metadata-only part of the GPU fitness check, before anything of the variant but its
 * metadata.json is fetched: kernels 0.17.2 downloads build/<variant>/metadata.json of the resolved
 * variant and runs its ArchValidator on it before installing the rest (get_kernel) or answering
 * (has_kernel). The metadata comes from the snapshot when cached, else online as that one file.
 * HK_OK when skipped (skip_arch_check), when nothing can be checked (no GPU known to the env:
 * nothing is fetched then; offline and not cached; an unreadable metadata.json: the pull and load
 * that follow report those), or when the archs admit the device; HK_ERR_ARCH naming the variant
 * otherwise. */
static int precheck_arch(hk_hub *hub, const char *repo, const char *commit, const char *variant,
                         const hk_get_kernel_options *o, const hk_env *env) {
    if (o->skip_arch_check) return HK_OK;
    hk_load_request req;
    fill_request(&req, o, env);
    /* no CUDA capability and no ROCm arch known: no archs list can refuse it, nothing to fetch */
    if (req.cuda_major < 0 && !req.gpu_arch) return HK_OK;
    char *rel = hk_asprintf("build/%s/metadata.json", variant);
    if (!rel) return hk_fail(HK_ERR_NOMEM, "out of memory");
    char *path = NULL;
    int rc = hk_hub_fetch_file(&path, hub, repo, commit, rel);
    free(rel);
    if (rc == HK_ERR_OFFLINE) {
        hk_clear_error();
        return HK_OK;
    }
    if (rc) return hk_fail_context("fetching the metadata.json of %s variant %s", repo, variant);
    char *data = NULL;
    size_t len = 0;
    hk_metadata_owned md;
    rc = hk_read_file(&data, &len, path, 1u << 20);
    if (rc == HK_OK) rc = hk_metadata_parse(&md, data, len, path);
    free(data);
    hk_free(path);
    if (rc == HK_ERR_NOMEM) return rc;
    if (rc) {
        hk_log(HK_LOG_DEBUG, "%s variant %s: metadata.json unreadable before the pull (%s); the load "
               "checks it", repo, variant, hk_last_error());
        hk_clear_error();
        return HK_OK;
    }
    rc = hk_kernel_check_metadata_fitness(&md.pub, &req);
    hk_metadata_free(&md);
    if (rc) hk_fail_context("%s variant %s at %s", repo, variant, commit);
    return rc;
}

HK_API int hk_get_kernel(hk_kernel **out, const hk_get_kernel_options *o) {
    if (!out) return hk_fail(HK_ERR_INVALID_ARG, "hk_get_kernel: out is NULL");
    *out = NULL;
    int rc = check_opts(o);
    if (rc) return rc;
    if (!o->no_local_kernels) {
        char *local = NULL;
        rc = hk_local_kernels_lookup(&local, o->repo_id);
        if (rc) return rc;
        if (local) {
            hk_log(HK_LOG_INFO, "%s: loading from LOCAL_KERNELS path %s", o->repo_id, local);
            rc = get_local(out, local, o);
            if (rc) hk_fail_context("LOCAL_KERNELS %s=%s", o->repo_id, local);
            free(local);
            return rc;
        }
    }
    const hk_env *env;
    hk_env *owned;
    rc = get_env(&env, &owned, o);
    if (rc) return rc;
    hk_hub *hub = NULL;
    char commit[65];
    char *repo = NULL, *rev = NULL, *best = NULL, *dir = NULL, *got_commit = NULL, *got_variant = NULL;
    uint64_t checked[2] = {0, 0};
    rc = new_hub(&hub, o);
    if (rc == HK_OK) rc = resolve_target(&repo, &rev, commit, &best, hub, env, o, o->trust_remote_code);
    if (rc == HK_OK && already_loaded(out, hub, repo, commit, best)) goto done;
    if (rc == HK_OK) rc = precheck_arch(hub, repo, commit, best, o, env); /* before the download */
    if (rc == HK_OK) {
        bool moved = strcmp(repo, o->repo_id) != 0;
        hk_pull_spec s = HK_PULL_SPEC_INIT;
        s.repo_id = repo;
        s.kernel_version = moved || o->version == HK_VERSION_UNSET ? -1 : o->version;
        s.revision = moved ? rev : o->revision;
        s.variant = best; /* chosen at the end of the redirect chain */
        /* resolve_target checked every publisher on the way (online); offline warns again */
        s.trust_remote_code = o->trust_remote_code || !hk_hub_is_offline(hub);
        s.backend = o->backend;
        rc = fetch_variant(&dir, &got_commit, &got_variant, checked, hub, &s);
    }
    if (rc == HK_OK) {
        hk_load_request req;
        fill_request(&req, o, env);
        req.variant_dir = dir;
        req.variant_name = got_variant;
        req.commit = got_commit;
        req.repo_id = repo; /* the handle reports the repo it was loaded from, after redirects */
        req.bytes_verified = checked[0];
        req.bytes_trusted = checked[1];
        rc = hk_kernel_load_variant(out, &req);
    }
done:
    if (rc) hk_fail_context("getting %s", o->repo_id);
    hk_free(repo);
    hk_free(rev);
    free(best);
    hk_free(dir);
    hk_free(got_commit);
    hk_free(got_variant);
    hk_hub_free(hub);
    hk_env_free(owned);
    return rc;
}

HK_API int hk_has_kernel(bool *out, const hk_get_kernel_options *o) {
    if (!out) return hk_fail(HK_ERR_INVALID_ARG, "hk_has_kernel: out is NULL");
    *out = false;
    int rc = check_opts(o);
    if (rc) return rc;
    const hk_env *env;
    hk_env *owned;
    rc = get_env(&env, &owned, o);
    if (rc) return rc;
    hk_hub *hub = NULL;
    char commit[65];
    char *repo = NULL, *rev = NULL, *best = NULL;
    rc = new_hub(&hub, o);
    /* an existence check loads no code: no publisher check, as before redirects were followed */
    if (rc == HK_OK) {
        rc = resolve_target(&repo, &rev, commit, &best, hub, env, o, 1);
        /* kernels has_kernel(check_arch=True): the chosen variant's metadata archs must admit the
         * device (skip_arch_check skips it, as check_arch=False) */
        if (rc == HK_OK) rc = precheck_arch(hub, repo, commit, best, o, env);
        if (rc == HK_ERR_NO_VARIANT || rc == HK_ERR_ARCH) {
            /* "no" is an answer, not an error: the reason stays readable as hk_last_error() */
            hk_log(HK_LOG_INFO, "%s: no kernel for this machine: %s", o->repo_id, hk_last_error());
            rc = HK_OK;
        } else if (rc == HK_OK) {
            *out = true;
        }
    }
    hk_free(repo);
    hk_free(rev);
    free(best);
    hk_hub_free(hub);
    hk_env_free(owned);
    return rc;
}

HK_API int hk_load_locked(hk_kernel **out, const char *lockfile, const char *repo_id,
                          const hk_get_kernel_options *o) {
    if (!out || !lockfile || !repo_id) return hk_fail(HK_ERR_INVALID_ARG, "hk_load_locked: NULL argument");
    *out = NULL;
    hk_lockfile *lock = NULL;
    int rc = hk_lockfile_read(&lock, lockfile);
    if (rc) return rc;
    const hk_lock_entry *e = hk_lockfile_find(lock, repo_id);
    if (!e) {
        rc = hk_fail(HK_ERR_LOCKFILE, "%s is not locked in %s: add it and run `hubkern lock`", repo_id,
                     lockfile);
        hk_lockfile_free(lock);
        return rc;
    }
    const hk_env *env;
    hk_env *owned = NULL;
    hk_hub *hub = NULL;
    char *build = NULL, *best = NULL, *vdir = NULL, *dir = NULL, *c2 = NULL, *v2 = NULL;
    char **names = NULL;
    size_t n = 0;
    uint64_t checked[2] = {0, 0};
    hk_get_kernel_options lo;
    if (o) lo = *o;
    else hk_get_kernel_options_init(&lo);
    lo.offline = true; /* a locked load never touches the network */
    lo.repo_id = repo_id;
    rc = get_env(&env, &owned, &lo);
    if (rc == HK_OK) rc = new_hub(&hub, &lo);
    if (rc == HK_OK) {
        char *repo_dir = hk_cache_repo_dir(hk_hub_cache_root(hub), HK_REPO_KERNEL, repo_id);
        build = repo_dir ? hk_asprintf("%s/snapshots/%s/build", repo_dir, e->commit) : NULL;
        free(repo_dir);
        if (!build) rc = hk_fail(HK_ERR_NOMEM, "out of memory");
        else if (!hk_is_dir(build))
            rc = hk_fail(HK_ERR_OFFLINE, "%s at the locked commit %s is not in the cache (%s); "
                         "prefetch it with `hubkern download --lock %s`", repo_id, e->commit,
                         hk_hub_cache_root(hub), lockfile);
    }
    if (rc == HK_OK) rc = hk_list_subdirs(&names, &n, build);
    if (rc == HK_OK) rc = choose_variant(&best, env, lo.backend, names, n, repo_id, lo.variant);
    if (rc == HK_OK && already_loaded(out, hub, repo_id, e->commit, best)) goto done;
    if (rc == HK_OK && e->num_variants > 0) { /* old format: per-variant git_lfs_concat hashes */
        const char *want = NULL;
        for (size_t i = 0; i < e->num_variants; i++)
            if (strcmp(e->variant_names[i], best) == 0) want = e->variant_hashes[i];
        vdir = hk_path_join(build, best);
        char got[72];
        if (!want)
            rc = hk_fail(HK_ERR_LOCKFILE, "%s: the lock has no hash for variant %s", repo_id, best);
        else if ((rc = hk_variant_hash_from_cache(got, vdir)) == HK_OK && strcmp(got, want) != 0)
            rc = hk_fail(HK_ERR_LOCKFILE, "%s variant %s in the cache hashes to %s but %s locks %s: "
                         "the cache is corrupted or the lock is stale; re-download",
                         repo_id, best, got, lockfile, want);
    }
    if (rc == HK_OK) { /* verify sizes/digest of the cached variant, offline */
        hk_pull_spec s = HK_PULL_SPEC_INIT;
        s.repo_id = repo_id;
        s.revision = e->commit;
        s.variant = best;
        s.trust_remote_code = 1;
        rc = fetch_variant(&dir, &c2, &v2, checked, hub, &s);
    }
    if (rc == HK_OK) {
        hk_load_request req;
        fill_request(&req, &lo, env);
        req.variant_dir = dir;
        req.variant_name = best;
        req.commit = e->commit;
        req.bytes_verified = checked[0];
        req.bytes_trusted = checked[1];
        rc = hk_kernel_load_variant(out, &req);
    }
done:
    if (rc) hk_fail_context("loading %s locked by %s", repo_id, lockfile);
    hk_kstrv_free(names, n);
    free(build);
    free(best);
    free(vdir);
    hk_free(dir);
    hk_free(c2);
    hk_free(v2);
    hk_hub_free(hub);
    hk_env_free(owned);
    hk_lockfile_free(lock);
    return rc;
}
