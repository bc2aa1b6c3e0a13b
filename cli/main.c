/* hubkern: entry point and subcommand dispatch. */
#include "cli/cli.h"

#include <hubkern.h>

#include <stdlib.h>
#include <string.h>

/* Subcommands register here; keep the list sorted by name. */
#define HK_COMMANDS(X) \
    X(bundle, "move cached repos to air-gapped machines as one tar file") \
    X(cache, "inspect, verify, prune or remove entries of the local cache") \
    X(download, "prefetch the kernels pinned in a kernels.lock") \
    X(env, "show the detected machine: OS, CPU, Python, torch, tvm-ffi, CUDA, backend") \
    X(info, "show a kernel's publisher trust, versions and variants") \
    X(load, "get, load and list a kernel as a C program would; --call smoke-tests it") \
    X(lock, "pin kernels (org/name=N) to commits in a kernels.lock") \
    X(publish, "record a directory as a commit on a branch of a repo in a store") \
    X(pull, "download a kernel variant into the cache, verified") \
    X(serve, "run a Hub-compatible mirror over a store") \
    X(trust_root, "show, locate or install the Sigstore trusted_root.json") \
    X(variants, "resolve a local kernel's build variants for this (or a described) machine") \
    X(verify_signature, "verify a kernel's Sigstore signatures as `kernels verify-signature` does") \
    X(version, "print the hubkern version") \
    X(versions, "list the versions (vN branches) of a kernel")

#define HK_DECLARE(name, summary) int hk_cmd_##name(int argc, char **argv);
HK_COMMANDS(HK_DECLARE)

int hk_cmd_version(int argc, char **argv) {
    printf("hubkern %s\n", hk_version());
    return 0;
}

static const hk_command k_commands[] = {
#define HK_ENTRY(name, summary) {#name, hk_cmd_##name, summary},
    HK_COMMANDS(HK_ENTRY)
};

/* "trust_root" is typed "trust-root" */
static bool command_is(const char *name, const char *typed) {
    for (; *name && *typed; name++, typed++)
        if (*name != *typed && !(*name == '_' && *typed == '-')) return false;
    return *name == *typed;
}

static void usage(FILE *f) {
    fprintf(f, "usage: hubkern <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof k_commands / sizeof k_commands[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "%s", k_commands[i].name);
        for (char *c = name; *c; c++)
            if (*c == '_') *c = '-';
        fprintf(f, "  %-16s %s\n", name, k_commands[i].summary);
    }
    fprintf(f, "\n'hubkern <command> --help' describes each command's options.\n");
}

static void log_to_stderr(void *ud, hk_log_level level, const char *msg) {
    static const char *const names[] = {"error", "warning", "info", "debug"};
    fprintf(stderr, "hubkern: %s: %s\n", names[level], msg);
}

void hk_cli_install_logger(int verbosity) {
    hk_log_level lvl = verbosity >= 2 ? HK_LOG_DEBUG : verbosity == 1 ? HK_LOG_INFO : HK_LOG_WARN;
    hk_set_log_callback(log_to_stderr, NULL, lvl);
}

int hk_cli_report_error(const char *what) {
    fprintf(stderr, "hubkern: %s%s%s [%s]\n", what ? what : "", what ? ": " : "", hk_last_error(),
            hk_error_name(hk_last_error_code()));
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "--version") == 0) return hk_cmd_version(argc - 1, argv + 1);
    hk_cli_install_logger(getenv("HUBKERN_VERBOSE") ? atoi(getenv("HUBKERN_VERBOSE")) : 0);
    for (size_t i = 0; i < sizeof k_commands / sizeof k_commands[0]; i++) {
        if (!command_is(k_commands[i].name, argv[1])) continue;
        /* libcurl's global state, set up before any thread starts (the server's included) */
        if (hk_init() != HK_OK) {
            fprintf(stderr, "hubkern: %s\n", hk_last_error());
            return 1;
        }
        int rc = k_commands[i].run(argc - 1, argv + 1);
        hk_shutdown();
        return rc;
    }
    fprintf(stderr, "hubkern: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
