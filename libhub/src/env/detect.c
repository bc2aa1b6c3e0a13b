/* Machine detection: OS/CPU (uname), Python (one interpreter call), torch / LibTorch and tvm-ffi
 * (files on disk, never imported), CUDA (libcuda / libcudart) and ROCm (libamdhip64) through
 * dlopen. Everything is
 * optional: a machine with none of it is a normal, fast result. */
#include "env/env_internal.h"

#include <ctype.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define HK_TEXT_MAX (8u << 20) /* largest text file we read (torch/__init__.py is ~100 KiB) */

static char *read_text(const char *path) {
    char *text = NULL;
    if (hk_read_file(&text, NULL, path, HK_TEXT_MAX) != HK_OK) {
        hk_clear_error();
        return NULL;
    }
    return text;
}

static bool is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* ---- parsers (exposed for tests) ------------------------------------------------------------ */

static const char *skip_blank(const char *p) {
    while (*p == ' ' || *p == '\t') p++;
    return p;
}

char *hk_py_assignment(const char *text, const char *name) {
    if (!text || !name) return NULL;
    size_t nlen = strlen(name);
    for (const char *line = text; line && *line;) {
        const char *eol = strchr(line, '\n');
        size_t llen = eol ? (size_t)(eol - line) : strlen(line);
        if (llen > nlen && strncmp(line, name, nlen) == 0 &&
            (line[nlen] == ' ' || line[nlen] == '\t' || line[nlen] == ':' || line[nlen] == '=')) {
            const char *p = skip_blank(line + nlen);
            if (*p == ':') /* annotation: skip to the '=' */
                while (p < line + llen && *p != '=') p++;
            if (p < line + llen && *p == '=' && p[1] != '=') {
                /* chained `a = b = 'x'`: the value is the last right-hand side */
                const char *q = p + 1;
                for (;;) {
                    q = skip_blank(q);
                    if (*q == '\'' || *q == '"') {
                        char quote = *q;
                        const char *end = q + 1;
                        while (end < line + llen && *end != quote && *end != '\\') end++;
                        if (end >= line + llen || *end != quote) break;
                        return hk_strndup(q + 1, (size_t)(end - q - 1));
                    }
                    if (strncmp(q, "None", 4) == 0 && !isalnum((unsigned char)q[4]) && q[4] != '_')
                        return hk_strdup("");
                    /* an identifier followed by '=': continue the chain */
                    const char *id = q;
                    while (id < line + llen && (isalnum((unsigned char)*id) || *id == '_')) id++;
                    if (id == q) break;
                    id = skip_blank(id);
                    if (*id != '=' || id[1] == '=') break;
                    q = id + 1;
                }
            }
        }
        line = eol ? eol + 1 : NULL;
    }
    return NULL;
}

int hk_torch_cmake_cxx11(const char *text) {
    static const char needle[] = "-D_GLIBCXX_USE_CXX11_ABI=";
    const char *p = text ? strstr(text, needle) : NULL;
    for (; p; p = strstr(p + 1, needle)) {
        char c = p[sizeof needle - 1];
        if (c == '0' || c == '1') return c - '0';
    }
    return -1;
}

int hk_torch_init_cxx11(const char *text) {
    const char *p = text ? strstr(text, "def compiled_with_cxx11_abi") : NULL;
    if (!p) return -1;
    /* The body: skip the signature and an optional docstring, take the first statement. */
    const char *body = strchr(p, ':');
    if (!body) return -1;
    const char *end = strstr(body, "\ndef ");
    const char *ret = strstr(body, "return ");
    if (!ret || (end && ret > end)) return -1;
    ret += 7;
    if (strncmp(ret, "True", 4) == 0 && !isalnum((unsigned char)ret[4])) return 1;
    if (strncmp(ret, "False", 5) == 0 && !isalnum((unsigned char)ret[5])) return 0;
    return -1; /* e.g. `return _C._GLIBCXX_USE_CXX11_ABI`: decided at run time */
}

char *hk_metadata_version(const char *text) {
    for (const char *line = text; line && *line;) {
        const char *eol = strchr(line, '\n');
        if (strncmp(line, "Version:", 8) == 0) {
            const char *v = skip_blank(line + 8);
            size_t n = eol ? (size_t)(eol - v) : strlen(v);
            while (n > 0 && isspace((unsigned char)v[n - 1])) n--;
            return n ? hk_strndup(v, n) : NULL;
        }
        if (line[0] == '\n' || (line[0] == '\r' && line[1] == '\n')) break; /* end of headers */
        line = eol ? eol + 1 : NULL;
    }
    return NULL;
}

void hk_torch_local_tag(const char *version, char **cuda, char **hip) {
    *cuda = *hip = NULL;
    const char *plus = version ? strchr(version, '+') : NULL;
    if (!plus) return;
    const char *tag = plus + 1;
    if (strncmp(tag, "cu", 2) == 0 && isdigit((unsigned char)tag[2])) {
        /* cu130 → 13.0 (last digit is the minor, as in variant names) */
        size_t n = strspn(tag + 2, "0123456789");
        if (n >= 2 && n <= 4)
            *cuda = hk_asprintf("%.*s.%c", (int)(n - 1), tag + 2, tag[2 + n - 1]);
    } else if (strncmp(tag, "rocm", 4) == 0 && isdigit((unsigned char)tag[4])) {
        uint32_t ma, mi;
        if (hk_env_ver2(tag + 4, &ma, &mi)) *hip = hk_asprintf("%u.%u", ma, mi);
    }
}

/* ---- OS / CPU ------------------------------------------------------------------------------- */

void hk_env_detect_os(hk_env *env) {
    struct utsname u;
    if (uname(&u) != 0) return;
    char os[sizeof u.sysname];
    size_t i = 0;
    for (; u.sysname[i] && i + 1 < sizeof os; i++) os[i] = (char)tolower((unsigned char)u.sysname[i]);
    os[i] = '\0';
    if (strncmp(os, "mingw", 5) == 0 || strncmp(os, "msys", 4) == 0 || strncmp(os, "cygwin", 6) == 0)
        strcpy(os, "windows");
    if (hk_env_set(env, "os", os) != HK_OK) hk_clear_error();
    if (hk_env_set(env, "cpu", u.machine) != HK_OK) hk_clear_error();

    if (strcmp(os, "darwin") == 0) {
        char *plist = read_text("/System/Library/CoreServices/SystemVersion.plist");
        const char *k = plist ? strstr(plist, "<key>ProductVersion</key>") : NULL;
        const char *s = k ? strstr(k, "<string>") : NULL;
        const char *e = s ? strstr(s, "</string>") : NULL;
        if (e) {
            char *v = hk_strndup(s + 8, (size_t)(e - s - 8));
            if (v && hk_env_set(env, "macos_version", v) != HK_OK) hk_clear_error();
            free(v);
        }
        free(plist);
    }
}

/* ---- Python --------------------------------------------------------------------------------- */

/* One short call: executable, version, free-threading, and sys.path (the import search path that
 * importlib.util.find_spec("torch") would walk). Never imports torch. */
static const char k_py_script[] =
    "import sys, os\n"
    "try:\n"
    "    import sysconfig\n"
    "    ft = 1 if sysconfig.get_config_var('Py_GIL_DISABLED') else 0\n"
    "except Exception:\n"
    "    ft = 0\n"
    "print('hubkern-env-1')\n"
    "print(sys.executable)\n"
    "print('%d.%d.%d' % tuple(sys.version_info[:3]))\n"
    "print(ft)\n"
    "for p in sys.path:\n"
    "    if p and '\\n' not in p and os.path.isdir(p):\n"
    "        print(os.path.abspath(p))\n";

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Run `python -c script`, collect stdout (≤ 1 MiB) within timeout_ms. */
static char *run_python(const char *python, int timeout_ms) {
    int fds[2];
    if (pipe(fds) != 0) return NULL;
    fcntl(fds[0], F_SETFD, FD_CLOEXEC);
    fcntl(fds[1], F_SETFD, FD_CLOEXEC);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    char *argv[] = {(char *)python, (char *)"-c", (char *)k_py_script, NULL};
    pid_t pid;
    int rc = posix_spawnp(&pid, python, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    if (rc != 0) {
        close(fds[0]);
        hk_log(HK_LOG_DEBUG, "cannot run Python interpreter '%s': %s", python, strerror(rc));
        return NULL;
    }
    hk_strbuf sb;
    hk_sb_init(&sb);
    long long deadline = now_ms() + timeout_ms;
    bool timed_out = false;
    for (;;) {
        long long left = deadline - now_ms();
        if (left <= 0) {
            timed_out = true;
            break;
        }
        struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
        int pr = poll(&pfd, 1, (int)left);
        if (pr < 0 && errno == EINTR) continue;
        if (pr <= 0) {
            timed_out = pr == 0;
            break;
        }
        char buf[4096];
        ssize_t n = read(fds[0], buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        if (sb.len + (size_t)n > (1u << 20)) break;
        hk_sb_append_n(&sb, buf, (size_t)n);
    }
    close(fds[0]);
    if (timed_out) {
        kill(pid, SIGKILL);
        hk_log(HK_LOG_WARN, "Python interpreter '%s' did not answer within %d ms; ignoring it", python,
               timeout_ms);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    char *out = hk_sb_steal(&sb);
    if (timed_out || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        if (!timed_out)
            hk_log(HK_LOG_DEBUG, "Python interpreter '%s' failed (status %d)", python, status);
        free(out);
        return NULL;
    }
    return out;
}

int hk_env_detect_python(hk_env *env, const char *python, int timeout_ms, bool want_sys_path) {
    char *out = run_python(python, timeout_ms);
    if (!out) return HK_ERR_NOT_FOUND;
    char *save = NULL;
    char *line = strtok_r(out, "\n", &save);
    if (!line || strcmp(line, "hubkern-env-1") != 0) {
        free(out);
        return HK_ERR_PARSE;
    }
    char *exe = strtok_r(NULL, "\n", &save);
    char *ver = strtok_r(NULL, "\n", &save);
    char *ft = strtok_r(NULL, "\n", &save);
    int rc = HK_OK;
    if (exe && ver && ft) {
        rc |= hk_env_put(env, HK_K_PYTHON, exe);
        if (hk_env_set(env, "python_version", ver) != HK_OK) hk_clear_error();
        if (hk_env_set(env, "python_free_threaded", ft) != HK_OK) hk_clear_error();
        if (want_sys_path) {
            hk_strbuf sb;
            hk_sb_init(&sb);
            for (char *p; (p = strtok_r(NULL, "\n", &save));)
                if (!strchr(p, ':')) hk_sb_printf(&sb, "%s%s", sb.len ? ":" : "", p);
            char *joined = hk_sb_steal(&sb);
            rc |= joined ? hk_env_put(env, HK_K_SITE_PACKAGES, joined) : HK_ERR_NOMEM;
            free(joined);
        }
    }
    free(out);
    return rc ? HK_ERR_NOMEM : HK_OK;
}

/* ---- torch / LibTorch ------------------------------------------------------------------------ */

/* Does this (small) region of a shared library mention C++11-ABI std::string symbols? Scans the
 * file for "_ZNSt7__cxx11" (1), else the pre-C++11 "_ZNSs" (0), else -1. */
static int scan_lib_cxx11(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    static const char new_abi[] = "_ZNSt7__cxx11", old_abi[] = "_ZNSs";
    char buf[65536 + 16];
    size_t keep = 0;
    int seen_old = 0, result = -1;
    for (;;) {
        size_t n = fread(buf + keep, 1, sizeof buf - 16 - keep, f);
        if (n == 0) break;
        size_t len = keep + n;
        for (size_t i = 0; i + sizeof new_abi - 1 <= len; i++) {
            if (buf[i] != '_') continue;
            if (memcmp(buf + i, new_abi, sizeof new_abi - 1) == 0) {
                result = 1;
                break;
            }
            if (memcmp(buf + i, old_abi, sizeof old_abi - 1) == 0) seen_old = 1;
        }
        if (result == 1) break;
        keep = sizeof new_abi - 2;
        memmove(buf, buf + len - keep, keep);
    }
    fclose(f);
    return result == 1 ? 1 : seen_old ? 0 : -1;
}

/* The cxx11 ABI flag of a torch tree (Linux only; upstream reports None elsewhere). */
static void detect_cxx11(hk_env *env, const char *torch_root, bool python_pkg) {
    const char *os = env->f[HK_K_OS];
    if (!os || strcmp(os, "linux") != 0) return;
    int abi = -1;
    if (python_pkg) { /* torch >= 2.9: compiled_with_cxx11_abi() returns a literal True */
        char *p = hk_path_join(torch_root, "__init__.py");
        char *t = p ? read_text(p) : NULL;
        abi = hk_torch_init_cxx11(t);
        free(t);
        free(p);
    }
    if (abi < 0) { /* older torch and LibTorch: TORCH_CXX_FLAGS in the CMake config */
        char *p = hk_path_join(torch_root, "share/cmake/Torch/TorchConfig.cmake");
        char *t = p ? read_text(p) : NULL;
        abi = hk_torch_cmake_cxx11(t);
        free(t);
        free(p);
    }
    if (abi < 0) { /* last resort: the mangled std::string symbols of libc10 */
        char *p = hk_path_join(torch_root, "lib/libc10.so");
        if (p) abi = scan_lib_cxx11(p);
        free(p);
    }
    if (abi >= 0) hk_env_put(env, HK_K_TORCH_CXX11_ABI, abi ? "1" : "0");
}

static void put_version2(hk_env *env, hk_env_key k, const char *raw) {
    uint32_t ma, mi;
    if (!raw || !hk_env_ver2(raw, &ma, &mi)) return;
    char buf[32];
    snprintf(buf, sizeof buf, "%u.%u", ma, mi);
    hk_env_put(env, k, buf);
}

static bool detect_torch_package(hk_env *env, const char *site) {
    char *root = hk_path_join(site, "torch");
    char *vpath = root ? hk_path_join(root, "version.py") : NULL;
    char *text = vpath && is_file(vpath) ? read_text(vpath) : NULL;
    free(vpath);
    char *full = hk_py_assignment(text, "__version__");
    if (!full || !*full) {
        free(full);
        free(text);
        free(root);
        return false;
    }
    env->torch_installed = true;
    hk_env_put(env, HK_K_TORCH_DIR, root);
    hk_env_put(env, HK_K_TORCH_FULL_VERSION, full);
    put_version2(env, HK_K_TORCH_VERSION, full);
    char *cuda = hk_py_assignment(text, "cuda");
    char *hip = hk_py_assignment(text, "hip");
    char *xpu = hk_py_assignment(text, "xpu");
    put_version2(env, HK_K_TORCH_CUDA_VERSION, cuda);
    if (hip && *hip) { /* "6.3.42131-fa1d09cbd" → text before '-' → 6.3 */
        char *dash = strchr(hip, '-');
        if (dash) *dash = '\0';
        put_version2(env, HK_K_TORCH_HIP_VERSION, hip);
    }
    if (xpu && strlen(xpu) >= 6 && isdigit((unsigned char)xpu[0]) && isdigit((unsigned char)xpu[5])) {
        /* kernels: f"{xpu[0:4]}.{xpu[5:6]}" ("20250301" → 2025.3) */
        char buf[16];
        snprintf(buf, sizeof buf, "%.4s.%c", xpu, xpu[5]);
        put_version2(env, HK_K_TORCH_XPU_VERSION, buf);
    }
    free(cuda);
    free(hip);
    free(xpu);
    free(full);
    free(text);
    detect_cxx11(env, root, true);
    free(root);
    return true;
}

static bool dir_exists_in(const hk_env *env, const char *pkg) {
    for (size_t i = 0; i < env->nsite; i++) {
        char *p = hk_path_join(env->site[i], pkg);
        bool ok = p && hk_is_dir(p);
        free(p);
        if (ok) return true;
    }
    return false;
}

/* LibTorch: build-version ("2.11.0+cu130"), else the version header; the CMake config marks it. */
static void detect_libtorch(hk_env *env, const char *dir) {
    char *cfg = hk_path_join(dir, "share/cmake/Torch/TorchConfig.cmake");
    bool is_libtorch = cfg && is_file(cfg);
    free(cfg);
    if (!is_libtorch) {
        hk_log(HK_LOG_WARN, "'%s' is not a LibTorch directory (no share/cmake/Torch/TorchConfig.cmake)", dir);
        return;
    }
    char *full = NULL;
    char *bv = hk_path_join(dir, "build-version");
    char *text = bv ? read_text(bv) : NULL;
    free(bv);
    if (text) {
        text[strcspn(text, "\r\n")] = '\0';
        if (*text) full = hk_strdup(text);
    }
    free(text);
    if (!full) {
        static const char *const headers[] = {"include/torch/headeronly/version.h",
                                              "include/torch/csrc/api/include/torch/version.h"};
        for (size_t i = 0; i < HK_ARRAY_LEN(headers) && !full; i++) {
            char *hp = hk_path_join(dir, headers[i]);
            char *h = hp ? read_text(hp) : NULL;
            const char *ma = h ? strstr(h, "#define TORCH_VERSION_MAJOR ") : NULL;
            const char *mi = h ? strstr(h, "#define TORCH_VERSION_MINOR ") : NULL;
            if (ma && mi) full = hk_asprintf("%ld.%ld", strtol(ma + 28, NULL, 10), strtol(mi + 28, NULL, 10));
            free(h);
            free(hp);
        }
    }
    if (!full) return;
    env->torch_installed = true;
    hk_env_put(env, HK_K_TORCH_DIR, dir);
    hk_env_put(env, HK_K_TORCH_FULL_VERSION, full);
    put_version2(env, HK_K_TORCH_VERSION, full);
    char *cuda = NULL, *hip = NULL;
    hk_torch_local_tag(full, &cuda, &hip);
    if (cuda) hk_env_put(env, HK_K_TORCH_CUDA_VERSION, cuda);
    if (hip) hk_env_put(env, HK_K_TORCH_HIP_VERSION, hip);
    free(cuda);
    free(hip);
    free(full);
    detect_cxx11(env, dir, false);
}

void hk_env_detect_torch(hk_env *env, const char *libtorch_dir) {
    for (size_t i = 0; i < env->nsite; i++)
        if (detect_torch_package(env, env->site[i])) break;
    if (env->torch_installed) {
        /* Out-of-tree backends that kernels checks before torch's own CUDA/HIP. [inferred:
         * kernels tests torch.backends.tpu / torch.neuron / the privateuse1 name at run time;
         * these packages are what provide them.] */
        env->has_torch_tpu = dir_exists_in(env, "torch_tpu");
        env->has_torch_neuronx = dir_exists_in(env, "torch_neuronx");
        env->has_torch_npu = dir_exists_in(env, "torch_npu");
    } else if (libtorch_dir) {
        hk_env_put(env, HK_K_LIBTORCH_DIR, libtorch_dir);
        detect_libtorch(env, libtorch_dir);
    }
}

/* ---- tvm-ffi -------------------------------------------------------------------------------- */

static char *dist_info_version(const char *site, const char *prefix) {
    DIR *d = opendir(site);
    if (!d) return NULL;
    char *version = NULL;
    size_t plen = strlen(prefix);
    for (struct dirent *e; !version && (e = readdir(d));) {
        if (strncmp(e->d_name, prefix, plen) != 0 || !hk_str_ends_with(e->d_name, ".dist-info"))
            continue;
        char *dir = hk_path_join(site, e->d_name);
        char *meta = dir ? hk_path_join(dir, "METADATA") : NULL;
        char *text = meta ? read_text(meta) : NULL;
        version = hk_metadata_version(text);
        free(text);
        free(meta);
        free(dir);
    }
    closedir(d);
    return version;
}

void hk_env_detect_tvm_ffi(hk_env *env, const char *explicit_lib) {
    const char *os = env->f[HK_K_OS];
    const char *libname = os && strcmp(os, "darwin") == 0 ? "tvm_ffi/lib/libtvm_ffi.dylib"
                                                           : "tvm_ffi/lib/libtvm_ffi.so";
    if (explicit_lib) hk_env_put(env, HK_K_TVM_FFI_LIB, explicit_lib);
    for (size_t i = 0; i < env->nsite; i++) {
        char *pkg = hk_path_join(env->site[i], "tvm_ffi");
        bool found = pkg && hk_is_dir(pkg);
        if (!found) {
            free(pkg);
            continue;
        }
        /* tvm_ffi.__version__ comes from tvm_ffi/_version.py; the wheel's METADATA agrees. */
        char *vp = hk_path_join(pkg, "_version.py");
        char *text = vp ? read_text(vp) : NULL;
        char *full = hk_py_assignment(text, "__version__");
        free(text);
        free(vp);
        if (!full || !*full) {
            free(full);
            full = dist_info_version(env->site[i], "apache_tvm_ffi-");
        }
        if (full) {
            hk_env_put(env, HK_K_TVM_FFI_FULL_VERSION, full);
            put_version2(env, HK_K_TVM_FFI_VERSION, full);
        }
        free(full);
        if (!explicit_lib) {
            char *lib = hk_path_join(env->site[i], libname);
            if (lib && is_file(lib)) hk_env_put(env, HK_K_TVM_FFI_LIB, lib);
            free(lib);
        }
        free(pkg);
        break;
    }
}

/* ---- CUDA ----------------------------------------------------------------------------------- */

typedef int (*cu_init_fn)(unsigned);
typedef int (*cu_int_fn)(int *);
typedef int (*cu_dev_get_fn)(int *, int);
typedef int (*cu_attr_fn)(int *, int, int);
typedef int (*cu_name_fn)(char *, int, int);
typedef int (*cudart_ver_fn)(int *);

#define HK_CU_ATTR_CC_MAJOR 75 /* CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR */
#define HK_CU_ATTR_CC_MINOR 76 /* CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR */

static void put_cuda_int_version(hk_env *env, hk_env_key k, int v) {
    /* 12080 → 12.8, 13000 → 13.0 (same encoding for the driver and the runtime) */
    char buf[32];
    snprintf(buf, sizeof buf, "%d.%d", v / 1000, (v % 1000) / 10);
    hk_env_put(env, k, buf);
}

/* dlsym returns void*; converting through a union keeps -Wpedantic quiet. */
static void *sym(void *h, const char *name) { return dlsym(h, name); }
#define HK_SYM(type, h, name) ((type)(uintptr_t)sym((h), (name)))

static void detect_driver(hk_env *env) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        hk_log(HK_LOG_DEBUG, "no CUDA driver: %s", dlerror());
        return;
    }
    /* The handle stays open: unloading libcuda after cuInit is not safe. */
    cu_init_fn cu_init = HK_SYM(cu_init_fn, h, "cuInit");
    cu_int_fn drv_ver = HK_SYM(cu_int_fn, h, "cuDriverGetVersion");
    cu_int_fn dev_count = HK_SYM(cu_int_fn, h, "cuDeviceGetCount");
    cu_dev_get_fn dev_get = HK_SYM(cu_dev_get_fn, h, "cuDeviceGet");
    cu_attr_fn attr = HK_SYM(cu_attr_fn, h, "cuDeviceGetAttribute");
    cu_name_fn dev_name = HK_SYM(cu_name_fn, h, "cuDeviceGetName");
    int v = 0;
    if (drv_ver && drv_ver(&v) == 0 && v > 0) put_cuda_int_version(env, HK_K_CUDA_DRIVER_VERSION, v);
    int n = 0;
    if (!cu_init || !dev_count || !dev_get || !attr || cu_init(0) != 0 || dev_count(&n) != 0 || n <= 0)
        return;
    if (n > 256) n = 256;
    hk_gpu *gpus = calloc((size_t)n, sizeof *gpus);
    if (!gpus) return;
    int got = 0;
    for (int i = 0; i < n; i++) {
        int dev = 0, ma = 0, mi = 0;
        if (dev_get(&dev, i) != 0 || attr(&ma, HK_CU_ATTR_CC_MAJOR, dev) != 0 ||
            attr(&mi, HK_CU_ATTR_CC_MINOR, dev) != 0)
            continue;
        char name[256] = "";
        if (!dev_name || dev_name(name, (int)sizeof name - 1, dev) != 0) snprintf(name, sizeof name, "GPU %d", i);
        name[sizeof name - 1] = '\0';
        gpus[got].major = ma;
        gpus[got].minor = mi;
        gpus[got].name = hk_strdup(name);
        got++;
    }
    for (int i = 0; i < env->ngpus; i++) free(env->gpus[i].name);
    free(env->gpus);
    env->gpus = gpus;
    env->ngpus = got;
}

static void detect_runtime(hk_env *env) {
    /* kernels: ctypes.util.find_library("cudart") then cudaRuntimeGetVersion. */
    static const char *const names[] = {"libcudart.so", "libcudart.so.13", "libcudart.so.12",
                                        "libcudart.so.11.0"};
    for (size_t i = 0; i < HK_ARRAY_LEN(names); i++) {
        void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (!h) continue;
        cudart_ver_fn fn = HK_SYM(cudart_ver_fn, h, "cudaRuntimeGetVersion");
        int v = 0;
        if (fn && fn(&v) == 0 && v > 0) {
            put_cuda_int_version(env, HK_K_CUDA_RUNTIME_VERSION, v);
            return; /* the handle stays open, as ctypes keeps it */
        }
        dlclose(h);
    }
    (void)dlerror();
}

void hk_env_detect_cuda(hk_env *env) {
    detect_driver(env);
    if (!env->torch_installed) detect_runtime(env);
}

/* ---- ROCm (HIP) ----------------------------------------------------------------------------- */

typedef int (*hip_int_fn)(int *);
typedef int (*hip_props_fn)(void *, int);

/* Where the runtime writes `char gcnArchName[256]` (LP64 Linux; from the HIP headers):
 *   hipDeviceProp_tR0600, filled by hipGetDevicePropertiesR0600 (exported since HIP 6.0, the
 *   struct a HIP >= 6 program's `hipGetDeviceProperties` macro names): byte 1160 of 1472;
 *   hipDeviceProp_t of HIP 5 (= hipDeviceProp_tR0000), filled by the symbol hipGetDeviceProperties
 *   in HIP 5 and, for old binaries, still by that plain symbol in HIP 6 and later: byte 396 of 792.
 * The symbol picks the layout, not the runtime version: HIP 6's plain hipGetDeviceProperties
 * still writes the old struct. The buffer is far larger than either struct and zeroed, and the
 * name read back must look like a gcnArchName, so a layout we do not know gives "unknown". */
#define HK_HIP_ARCH_OFFSET_R0600 1160
#define HK_HIP_ARCH_OFFSET_R0000 396
#define HK_HIP_PROPS_BUF (64u << 10)

void hk_env_detect_rocm(hk_env *env, const char *const *libs, size_t nlibs) {
    static const char *const defaults[] = {"libamdhip64.so", "libamdhip64.so.7", "libamdhip64.so.6",
                                           "libamdhip64.so.5"};
    if (!libs) {
        libs = defaults;
        nlibs = HK_ARRAY_LEN(defaults);
    }
    if (sizeof(void *) != 8 || sizeof(size_t) != 8) return; /* the offsets are LP64 ones */
    void *h = NULL;
    for (size_t i = 0; i < nlibs && !h; i++) h = libs[i] ? dlopen(libs[i], RTLD_NOW | RTLD_LOCAL) : NULL;
    if (!h) {
        const char *e = dlerror();
        hk_log(HK_LOG_DEBUG, "no HIP runtime (libamdhip64): %s", e ? e : "not found");
        return;
    }
    hip_int_fn rt_version = HK_SYM(hip_int_fn, h, "hipRuntimeGetVersion");
    hip_int_fn dev_count = HK_SYM(hip_int_fn, h, "hipGetDeviceCount");
    hip_props_fn props = HK_SYM(hip_props_fn, h, "hipGetDevicePropertiesR0600");
    size_t offset = HK_HIP_ARCH_OFFSET_R0600;
    if (!props) {
        props = HK_SYM(hip_props_fn, h, "hipGetDeviceProperties");
        offset = HK_HIP_ARCH_OFFSET_R0000;
    }
    if (!rt_version || !dev_count || !props) {
        /* nothing was called: unloading is safe */
        hk_log(HK_LOG_DEBUG, "the HIP runtime found lacks hipRuntimeGetVersion / hipGetDeviceCount / "
               "hipGetDeviceProperties; ignoring it");
        dlclose(h);
        (void)dlerror();
        return;
    }
    /* From here on the runtime may have initialised itself: the handle stays open (as for
     * libcuda, and as torch keeps it). */
    int v = 0;
    char buf[32];
    if (rt_version(&v) == 0 && hk_hip_version_text(buf, sizeof buf, v))
        hk_env_put(env, HK_K_HIP_RUNTIME_VERSION, buf);
    int n = 0;
    if (dev_count(&n) != 0 || n <= 0) {
        hk_log(HK_LOG_DEBUG, "the HIP runtime reports no device");
        return;
    }
    unsigned char *p = calloc(1, HK_HIP_PROPS_BUF);
    if (!p) return;
    if (props(p, 0) == 0) {
        const char *name = (const char *)p + offset;
        if (memchr(name, '\0', 256) && hk_env_gcn_arch_valid(name))
            hk_env_put(env, HK_K_GPU_ARCH, name);
        else
            hk_log(HK_LOG_DEBUG, "the HIP runtime's device properties hold no gcnArchName where "
                   "expected (byte %zu); GPU arch unknown", offset);
    }
    free(p);
}

/* ---- hk_env_detect -------------------------------------------------------------------------- */

static const char *pick(const char *opt, const char *var, bool use_env) {
    if (opt && *opt) return opt;
    return use_env ? hk_getenv(var) : NULL;
}

int hk_env_detect(hk_env **out, const hk_env_options *opts) {
    if (!out) return hk_fail(HK_ERR_INVALID_ARG, "hk_env_detect: out is NULL");
    *out = NULL;
    hk_env_options none = {0};
    if (!opts) opts = &none;
    bool use_env = !opts->no_env_overrides;

    hk_env *env = NULL;
    int rc = hk_env_new(&env);
    if (rc) return rc;

    const char *python = pick(opts->python, "HUBKERN_PYTHON", use_env);
    const char *site = pick(opts->site_packages, "HUBKERN_SITE_PACKAGES", use_env);
    const char *libtorch = pick(opts->libtorch_dir, "HUBKERN_LIBTORCH_DIR", use_env);
    const char *tvm_lib = pick(opts->tvm_ffi_lib, "HUBKERN_TVM_FFI_LIB", use_env);
    if (!tvm_lib && use_env) tvm_lib = hk_getenv("TVM_FFI_LIB");
    bool no_python = opts->no_python || (python && strcmp(python, "none") == 0) ||
                     (use_env && hk_env_true("HUBKERN_NO_PYTHON"));
    bool no_cuda = opts->no_cuda || (use_env && hk_env_true("HUBKERN_NO_CUDA"));
    bool no_rocm = opts->no_rocm || (use_env && hk_env_true("HUBKERN_NO_ROCM"));
    int timeout = opts->python_timeout_ms > 0 ? opts->python_timeout_ms : 10000;

    hk_env_detect_os(env);
    if (!no_python) {
        const char *exe = python ? python : "python3";
        rc = hk_env_detect_python(env, exe, timeout, site == NULL);
        if (rc == HK_ERR_NOMEM) goto oom;
        if (rc != HK_OK && python)
            hk_log(HK_LOG_WARN, "the Python interpreter '%s' could not be queried; continuing without Python", python);
    }
    if (site && hk_env_put(env, HK_K_SITE_PACKAGES, site)) goto oom;
    hk_env_detect_torch(env, libtorch);
    hk_env_detect_tvm_ffi(env, tvm_lib);
    if (!no_cuda) hk_env_detect_cuda(env);
    if (!no_rocm) hk_env_detect_rocm(env, NULL, 0);

    if (use_env) {
        for (int k = 0; k < HK_K_COUNT; k++) {
            /* detection inputs, consumed above */
            if (k == HK_K_PYTHON || k == HK_K_SITE_PACKAGES || k == HK_K_LIBTORCH_DIR ||
                k == HK_K_TVM_FFI_LIB)
                continue;
            char var[64] = "HUBKERN_";
            const char *name = hk_env_key_name((hk_env_key)k);
            size_t len = strlen(var);
            for (size_t i = 0; name[i] && len + 1 < sizeof var; i++)
                var[len++] = (char)toupper((unsigned char)name[i]);
            var[len] = '\0';
            const char *value = getenv(var);
            if (!value) continue;
            /* An empty variable clears the field ("no torch here"). */
            if (hk_env_set(env, name, value) != HK_OK) {
                rc = hk_last_error_code();
                hk_fail_context("environment variable %s", var);
                hk_env_free(env);
                return rc;
            }
        }
    }
    if (hk_env_derive(env)) goto oom;
    *out = env;
    return HK_OK;
oom:
    hk_env_free(env);
    return hk_fail(HK_ERR_NOMEM, "out of memory");
}
