/* The command line's process-wide state (command name, --json, -v/-q) and the one way it reports
 * errors: "hubkern CMD: ..." on stderr and, under --json, a JSON error object on stdout. */
#include "cli/cli.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *g_command = "";
static int g_json, g_json_printed, g_quiet, g_verbose;

void cli_set_command(const char *name) { g_command = name ? name : ""; }
/* The progress display (progress.c) leaves a line without its newline on stderr while it draws:
 * it says here how to clear that line, and every message clears it first (so output.c never calls
 * into the display). */
static void (*g_clear_line)(void);

void cli_output_set_line_clear(void (*clear)(void)) { g_clear_line = clear; }

static void clear_line(void) {
    if (g_clear_line) g_clear_line();
}

const char *cli_command(void) { return g_command; }
void cli_set_json(int on) { g_json = on; }
int cli_json(void) { return g_json; }
int cli_quiet(void) { return g_quiet; }
int cli_verbose(void) { return g_verbose; }

void cli_set_verbosity(int verbose, int quiet) {
    const char *env = getenv("HUBKERN_VERBOSE");
    int lvl = verbose;
    if (env && atoi(env) > lvl) lvl = atoi(env);
    g_verbose = lvl;
    g_quiet = quiet && lvl == 0;
    cli_install_logger(g_quiet ? -1 : lvl); /* -q: the library's warnings too (issue 24) */
}

static void log_to_stderr(void *ud, hk_log_level level, const char *msg) {
    static const char *const names[] = {"error", "warning", "info", "debug"};
    clear_line(); /* a message never lands in the middle of a progress line */
    fprintf(stderr, "hubkern: %s: %s\n", names[level], msg);
}

void cli_install_logger(int verbosity) {
    hk_log_level lvl = verbosity >= 2    ? HK_LOG_DEBUG
                       : verbosity == 1  ? HK_LOG_INFO
                       : verbosity == 0  ? HK_LOG_WARN
                                         : HK_LOG_ERROR;
    hk_set_log_callback(log_to_stderr, NULL, lvl);
}

void cli_print_json(cJSON *j) {
    char *txt = j && !g_json_printed ? cJSON_Print(j) : NULL; /* one document on stdout, never two */
    if (txt) {
        printf("%s\n", txt);
        g_json_printed = 1;
    }
    free(txt);
    cJSON_Delete(j);
}

void cli_json_error(const char *code_name, const char *message) {
    if (!g_json || g_json_printed) return;
    cJSON *j = cJSON_CreateObject();
    cJSON *e = cJSON_AddObjectToObject(j, "error");
    cJSON_AddStringToObject(e, "code", code_name);
    cJSON_AddStringToObject(e, "message", message);
    if (*g_command) cJSON_AddStringToObject(e, "command", g_command);
    cli_print_json(j);
    fflush(stdout);
}

int cli_report_error(const char *what) {
    clear_line();
    const char *code = hk_error_name(hk_last_error_code());
    fprintf(stderr, "hubkern%s%s: %s%s%s [%s]\n", *g_command ? " " : "", g_command, what ? what : "", what ? ": " : "",
            hk_last_error(), code);
    if (g_json) {
        size_t n = strlen(hk_last_error()) + (what ? strlen(what) : 0) + 3;
        char *msg = malloc(n);
        if (msg) snprintf(msg, n, "%s%s%s", what ? what : "", what ? ": " : "", hk_last_error());
        cli_json_error(code, msg ? msg : hk_last_error());
        free(msg);
    }
    return hk_last_error_code() == HK_ERR_CANCELLED ? 130 : 1;
}

int cli_fail(int status, const char *code_name, const char *fmt, ...) {
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    clear_line();
    fprintf(stderr, "hubkern%s%s: %s\n", *g_command ? " " : "", g_command, msg);
    cli_json_error(code_name, msg);
    return status;
}

int cli_usage_error(const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "hubkern %s: %s\ntry 'hubkern %s --help'\n", cli_command(), msg, cli_command());
    cli_json_error("HK_ERR_INVALID_ARG", msg);
    return 2;
}
