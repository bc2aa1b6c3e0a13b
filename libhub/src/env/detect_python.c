/* Python detection: one short interpreter call (never imports torch), killed after a timeout, and
 * remembered on disk keyed by what its answer depends on, so that a pull or an hk_get_kernel does
 * not start an interpreter each time (14 ms with a venv, 115 ms through a pyenv shim: issue 24). */
#include "env/env_internal.h"

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
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

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

/* Run `python -c script`, collect stdout (≤ 1 MiB) within timeout_ms. NULL with *oom set when
 * the answer could not be stored (not the same as "no interpreter"). */
static char *run_python(const char *python, int timeout_ms, bool *oom) {
    *oom = false;
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
        hk__log(HK_LOG_DEBUG, "cannot run Python interpreter '%s': %s", python, strerror(rc));
        return NULL;
    }
    hk_strbuf sb;
    hk__sb_init(&sb);
    long long deadline = (long long)hk__now_ms() + timeout_ms;
    bool timed_out = false;
    for (;;) {
        long long left = deadline - (long long)hk__now_ms();
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
        hk__sb_append_n(&sb, buf, (size_t)n);
    }
    close(fds[0]);
    if (timed_out) {
        kill(pid, SIGKILL);
        hk__log(HK_LOG_WARN, "Python interpreter '%s' did not answer within %d ms; ignoring it", python,
               timeout_ms);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    char *out = hk__sb_steal(&sb);
    if (!out) {
        *oom = true;
        return NULL;
    }
    if (timed_out || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        if (!timed_out)
            hk__log(HK_LOG_DEBUG, "Python interpreter '%s' failed (status %d)", python, status);
        free(out);
        return NULL;
    }
    return out;
}

/* ---- the remembered answer ------------------------------------------------------------------ */
/* $XDG_CACHE_HOME/hubkern/python-env/<sha256 of the key> holds "hubkern-pyenv-1", a stamp of the
 * answer's sys.path directories, then the interpreter's answer. The key: the interpreter as
 * posix_spawnp would find it and the file it resolves to (path, inode, size, mtime), the variables
 * that change sys.path, and for a script (a pyenv shim picks the interpreter by PYENV_VERSION and
 * .python-version files) the cwd with those files. The stamp (each sys.path directory's inode and
 * mtime: installing or removing a package or a .pth file changes them) is checked on every read.
 * HUBKERN_PYTHON_CACHE=0 turns it off. */
static void stat_into(hk_strbuf *sb, const char *path) {
    struct stat st;
    if (stat(path, &st) == 0)
        hk__sb_printf(sb, "%s %llu %llu %lld %lld.%09ld\n", path, (unsigned long long)st.st_dev,
                      (unsigned long long)st.st_ino, (long long)st.st_size, (long long)st.st_mtim.tv_sec,
                      st.st_mtim.tv_nsec);
    else
        hk__sb_printf(sb, "%s -\n", path);
}

/* what posix_spawnp runs for cmd: cmd itself when it names a path, else the first executable on PATH */
static char *which(const char *cmd) {
    if (strchr(cmd, '/')) return hk__strdup(cmd);
    const char *path = getenv("PATH");
    if (!path) path = "/bin:/usr/bin";
    for (const char *p = path;;) {
        size_t n = strcspn(p, ":");
        char *c = hk__asprintf("%.*s/%s", (int)n, n ? p : ".", cmd);
        struct stat st;
        if (c && stat(c, &st) == 0 && S_ISREG(st.st_mode) && access(c, X_OK) == 0) return c;
        free(c);
        if (!p[n]) return NULL;
        p += n + 1;
    }
}

static bool is_script(const char *path) {
    char head[2] = {0, 0};
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    size_t n = fread(head, 1, 2, f);
    fclose(f);
    return n == 2 && head[0] == '#' && head[1] == '!';
}

static char *cache_file(const char *python) {
    const char *off = getenv("HUBKERN_PYTHON_CACHE");
    if (off && strcmp(off, "0") == 0) return NULL;
    const char *xdg = hk__getenv("XDG_CACHE_HOME"), *home = hk__getenv("HOME");
    if (!xdg && !home) return NULL;
    char *exe = which(python);
    if (!exe) return NULL;
    hk_strbuf key;
    hk__sb_init(&key);
    hk__sb_append(&key, "hubkern-pyenv-1\n");
    stat_into(&key, exe);
    char *real = realpath(exe, NULL);
    if (real) stat_into(&key, real);
    static const char *const vars[] = {"PYTHONPATH", "PYTHONHOME", "PYTHONNOUSERSITE", "PYTHONUSERBASE",
                                       "PYTHONSAFEPATH", "PYTHONPLATLIBDIR", "VIRTUAL_ENV", "CONDA_PREFIX",
                                       "PYENV_VERSION", "PYENV_ROOT", "HOME"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        hk__sb_printf(&key, "%s=%s%s\n", vars[i], v ? "1" : "0", v ? v : "");
    }
    if (real && is_script(real)) {
        char *cwd = getcwd(NULL, 0);
        if (cwd) hk__sb_printf(&key, "cwd=%s\n", cwd);
        for (char *d = cwd; d && *d;) { /* .python-version in the cwd and every parent */
            char *f = hk__asprintf("%s/.python-version", d);
            if (f) stat_into(&key, f);
            free(f);
            char *slash = strrchr(d, '/');
            if (!slash) break;
            *slash = '\0';
        }
        free(cwd);
        const char *root = getenv("PYENV_ROOT");
        char *gv = root ? hk__asprintf("%s/version", root) : hk__asprintf("%s/.pyenv/version", home ? home : "");
        if (gv) stat_into(&key, gv);
        free(gv);
    }
    free(real);
    free(exe);
    char *file = NULL;
    if (!key.oom) {
        char hex[65];
        hk__sha256_hex(hex, key.data, key.len);
        file = xdg ? hk__asprintf("%s/hubkern/python-env/%s", xdg, hex)
                   : hk__asprintf("%s/.cache/hubkern/python-env/%s", home, hex);
    }
    hk__sb_free(&key);
    return file;
}

/* the stamp of an answer: its sys.path directories (lines 5 on), stat'ed */
static char *answer_stamp(const char *answer) {
    hk_strbuf sb;
    hk__sb_init(&sb);
    int line = 0;
    for (const char *p = answer; *p;) {
        size_t n = strcspn(p, "\n");
        if (++line > 4 && n > 0) {
            char *dir = hk__strndup(p, n);
            if (dir) stat_into(&sb, dir);
            else sb.oom = true;
            free(dir);
        }
        p += n + (p[n] ? 1 : 0);
    }
    char hex[65];
    bool ok = !sb.oom;
    if (ok) hk__sha256_hex(hex, sb.data ? sb.data : "", sb.len);
    hk__sb_free(&sb);
    return ok ? hk__strdup(hex) : NULL;
}

static char *cache_read(const char *file) {
    FILE *f = fopen(file, "rb");
    if (!f) return NULL;
    char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    bool whole = feof(f);
    fclose(f);
    buf[n] = '\0';
    static const char magic[] = "hubkern-pyenv-1\n";
    char *nl = strncmp(buf, magic, sizeof magic - 1) == 0 ? strchr(buf + sizeof magic - 1, '\n') : NULL;
    if (!whole || !nl) return NULL;
    *nl = '\0';
    const char *answer = nl + 1;
    char *stamp = answer_stamp(answer);
    char *out = stamp && strcmp(stamp, buf + sizeof magic - 1) == 0 ? hk__strdup(answer) : NULL;
    free(stamp);
    return out;
}

static void cache_write(const char *file, const char *answer) {
    char *stamp = answer_stamp(answer);
    char *text = stamp ? hk__asprintf("hubkern-pyenv-1\n%s\n%s", stamp, answer) : NULL;
    char *dir = hk__strdup(file);
    char *slash = dir ? strrchr(dir, '/') : NULL;
    if (slash) *slash = '\0';
    /* best effort: a cache that cannot be written only costs the next call an interpreter run */
    if (text && slash && strlen(text) < (1u << 16) && hk__mkdirs(dir, 0777) == HK_OK)
        (void)hk__write_file_atomic(file, text, strlen(text));
    hk_clear_error();
    free(dir);
    free(text);
    free(stamp);
}

int hk__env_detect_python(hk_env *env, const char *python, int timeout_ms, bool want_sys_path) {
    bool oom = false;
    char *memo = cache_file(python);
    char *out = memo ? cache_read(memo) : NULL;
    if (!out) {
        out = run_python(python, timeout_ms, &oom);
        if (out && memo && strncmp(out, "hubkern-env-1\n", 14) == 0) cache_write(memo, out);
    }
    free(memo);
    if (!out) return oom ? HK_ERR_NOMEM : HK_ERR_NOT_FOUND;
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
        rc |= hk__env_put(env, HK_K_PYTHON, exe);
        if (hk_env_set(env, "python_version", ver) != HK_OK) hk_clear_error();
        if (hk_env_set(env, "python_free_threaded", ft) != HK_OK) hk_clear_error();
        if (want_sys_path) {
            hk_strbuf sb;
            hk__sb_init(&sb);
            for (char *p; (p = strtok_r(NULL, "\n", &save));)
                if (!strchr(p, ':')) hk__sb_printf(&sb, "%s%s", sb.len ? ":" : "", p);
            char *joined = hk__sb_steal(&sb);
            rc |= joined ? hk__env_put(env, HK_K_SITE_PACKAGES, joined) : HK_ERR_NOMEM;
            free(joined);
        }
    }
    free(out);
    return rc ? HK_ERR_NOMEM : HK_OK;
}

