/* Python detection: one short interpreter call (never imports torch), killed after a timeout. */
#include "env/env_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
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

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

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

int hk__env_detect_python(hk_env *env, const char *python, int timeout_ms, bool want_sys_path) {
    bool oom;
    char *out = run_python(python, timeout_ms, &oom);
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

