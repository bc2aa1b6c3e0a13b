/* The command line's process-wide state (command name, --json, -v/-q) and the one way it reports
 * errors: "hubkern CMD: ..." on stderr and, under --json, a JSON error object on stdout. */
#include "cli/cli.h"

#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *g_command = "";
static const cli_spec *g_spec; /* the running command's, once its arguments are parsed */
static int g_json, g_json_printed, g_quiet, g_verbose, g_token_option;

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
void cli_set_token_option(int given) { g_token_option = given; }
void cli_set_spec(const cli_spec *spec) { g_spec = spec; }
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
    fprintf(stderr, "hubkern%s%s: %s: %s\n", *g_command ? " " : "", g_command, names[level], msg); /* "hubkern pull: warning: ..." */
}

void cli_install_logger(int verbosity) {
    hk_log_level lvl = verbosity >= 2    ? HK_LOG_DEBUG
                       : verbosity == 1  ? HK_LOG_INFO
                       : verbosity == 0  ? HK_LOG_WARN
                                         : HK_LOG_ERROR;
    hk_set_log_callback(log_to_stderr, NULL, lvl);
}

/* The envelope of every --json document (docs/json.md): the schema version and the command
 * first, then the command's own fields. A command hands an object; anything else is a bug. */
static cJSON *envelope(cJSON *payload) {
    cJSON *root = cJSON_CreateObject();
    if (!root) return NULL;
    cJSON_AddStringToObject(root, "schema", CLI_JSON_SCHEMA);
    cJSON_AddStringToObject(root, "command", *g_command ? g_command : "hubkern");
    while (payload && cJSON_IsObject(payload) && payload->child) {
        cJSON *it = cJSON_DetachItemViaPointer(payload, payload->child);
        if (strcmp(it->string, "schema") == 0 || strcmp(it->string, "command") == 0) cJSON_Delete(it);
        else cJSON_AddItemToObject(root, it->string, it); /* the key string moves with the item */
    }
    return root;
}

void cli_print_json(cJSON *j) {
    if (g_json_printed) { /* one document on stdout, never two */
        cJSON_Delete(j);
        return;
    }
    cJSON *doc = j && cJSON_IsObject(j) ? envelope(j) : NULL;
    char *txt = doc ? cJSON_Print(doc) : NULL;
    if (txt) {
        printf("%s\n", txt);
        g_json_printed = 1;
    }
    free(txt);
    cJSON_Delete(doc);
    cJSON_Delete(j);
}

/* One JSON string as cJSON prints it (so the streamed array below is byte for byte the one a tree of
 * cJSON strings prints): a reference node reused for every string, printed into buf, which holds
 * the longest string escaped (at most 6 bytes a byte, the quotes and cJSON's 5 bytes of slack). */
static bool print_string(cJSON *node, char *buf, size_t cap, const char *s) {
    node->valuestring = (char *)s;
    return cap <= INT_MAX && cJSON_PrintPreallocated(node, buf, (int)cap, 0);
}

void cli_print_json_strings(cJSON *j, size_t n, const char *(*get)(void *ud, size_t i), void *ud) {
    if (g_json_printed) {
        cJSON_Delete(j);
        return;
    }
    size_t longest = 0;
    for (size_t i = 0; i < n; i++) {
        const char *s = get(ud, i);
        if (s && strlen(s) > longest) longest = strlen(s);
    }
    size_t cap = longest <= (SIZE_MAX - 16) / 6 ? 6 * longest + 16 : 0;
    char *buf = cap ? malloc(cap) : NULL;
    cJSON *node = cJSON_CreateStringReference("");
    cJSON *doc = buf && node && j && cJSON_IsObject(j) ? envelope(j) : NULL;
    char *txt = doc ? cJSON_Print(doc) : NULL;
    char *at = txt ? strstr(txt, CLI_JSON_STREAMED) : NULL; /* (a raw item; in a string cJSON escapes it) */
    if (at) { /* everything that can fail for want of memory has: the document is printed whole */
        fwrite(txt, 1, (size_t)(at - txt), stdout);
        fputc('[', stdout);
        bool first = true;
        for (size_t i = 0; i < n; i++) {
            const char *s = get(ud, i);
            if (!s || !print_string(node, buf, cap, s)) continue; /* (as cJSON_CreateString(NULL) adds nothing) */
            if (!first) fputs(", ", stdout);
            fputs(buf, stdout);
            first = false;
        }
        printf("]%s\n", at + 1);
        g_json_printed = 1;
    }
    if (node) node->valuestring = NULL; /* a reference: never freed by cJSON_Delete */
    cJSON_Delete(node);
    free(txt);
    free(buf);
    cJSON_Delete(doc);
    cJSON_Delete(j);
}

/* here rather than in args.c: the hints need it, and args.c calls into this file */
int cli_spec_has(const cli_spec *s, const char *name) {
    for (int t = 0; t < HK_CLI_MAX_TABLES && s->tables[t]; t++)
        for (const cli_opt *o = s->tables[t]; o->kind != HK_OPT_END; o++)
            if (strcmp(o->name, name) == 0) return 1;
    return 0;
}

/* HK_ERR_NO_VARIANT: name only the options the running command has (download has no --variant) */
static const char *variant_hint(void) {
    static const char *const opts[] = {"variant", "backend", "all-variants"};
    static const char *const shown[] = {"--variant V", "--backend B", "--all-variants"};
    static char buf[160];
    size_t n = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < 3; i++) {
        if (!g_spec || !cli_spec_has(g_spec, opts[i])) continue;
        n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%s", n ? " or " : "use ", shown[i]);
        if (n >= sizeof buf) break;
    }
    return buf[0] ? buf : NULL;
}

/* "try 'hubkern CMD --help'": what every usage error ends with */
static const char *usage_hint(void) {
    static char hint[96];
    snprintf(hint, sizeof hint, "try 'hubkern %s%s--help'", g_command, *g_command ? " " : "");
    return hint;
}

/* What to do next, per error code, where the message itself does not already say it. */
static const char *code_hint(const char *code_name, int status) {
    static const struct {
        const char *code, *hint;
    } k[] = {
        {"HK_ERR_AUTH", "check the token: HF_TOKEN, the token file, or --token"},
        {"HK_ERR_FORBIDDEN", "ask the repo's owner for access, or use a token that has it"},
        {"HK_ERR_RATE_LIMITED", "wait and retry, or send a token (HF_TOKEN or --token)"},
        {"HK_ERR_NETWORK", "check the endpoint (--endpoint, HF_ENDPOINT) and the network; --offline uses the cache"},
        {"HK_ERR_TIMEOUT", "retry; HF_HUB_DOWNLOAD_TIMEOUT and HF_HUB_ETAG_TIMEOUT set the limits"},
        {"HK_ERR_OFFLINE", "pull it once online (without --offline or HF_HUB_OFFLINE)"},
        {"HK_ERR_DIGEST", "run 'hubkern cache verify', then 'hubkern cache rm REPO' and pull again"},
        {"HK_ERR_INTEGRITY", "run 'hubkern cache verify', then 'hubkern cache rm REPO' and pull again"},
        {"HK_ERR_UNTRUSTED", "pass --trust-remote-code if you trust this publisher"},
        {"HK_ERR_SIGNATURE", "docs/sigstore.md: the signing policies, HUBKERN_SIGNATURE and the trust root"},
        {"HK_ERR_CANCELLED", "run the command again: the files completed so far stay in the cache"},
        {"HK_ERR_INTERNAL", "please report this as a hubkern bug"},
    };
    if (status == 2) return NULL; /* usage errors: the caller's hint names the command's help */
    if (strcmp(code_name, "HK_ERR_NO_VARIANT") == 0) return variant_hint();
    if (g_token_option && strcmp(code_name, "HK_ERR_AUTH") == 0)
        return "the token given with --token was rejected: check it, or leave --token out to use HF_TOKEN or the "
               "token file";
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        if (strcmp(k[i].code, code_name) == 0) return k[i].hint;
    return NULL;
}

static void json_error(const char *code_name, const char *message, const char *hint, int status) {
    if (!g_json || g_json_printed) return;
    cJSON *j = cJSON_CreateObject();
    cJSON *e = cJSON_AddObjectToObject(j, "error");
    cJSON_AddStringToObject(e, "code", code_name);
    cJSON_AddStringToObject(e, "message", message);
    if (hint) cJSON_AddStringToObject(e, "hint", hint);
    else cJSON_AddNullToObject(e, "hint");
    cJSON_AddNumberToObject(e, "exit_status", status);
    cli_print_json(j);
    fflush(stdout);
}

/* "hubkern CMD: hint: ..." after the error line, so that text and JSON say the same */
static void print_hint(const char *hint) {
    if (hint) fprintf(stderr, "hubkern%s%s: hint: %s\n", *g_command ? " " : "", g_command, hint);
}

int cli_report_error(const char *what) {
    clear_line();
    const char *code = hk_error_name(hk_last_error_code());
    /* HK_ERR_INVALID_ARG from the library is an argument the user gave that it refused (a repo id,
     * a revision, a bundle name): a usage error, exit 2, like the ones the CLI finds itself */
    int status = hk_last_error_code() == HK_ERR_CANCELLED ? 130 : hk_last_error_code() == HK_ERR_INVALID_ARG ? 2 : 1;
    const char *hint = status == 2 ? usage_hint() : code_hint(code, status);
    fprintf(stderr, "hubkern%s%s: %s%s%s [%s]\n", *g_command ? " " : "", g_command, what ? what : "", what ? ": " : "",
            hk_last_error(), code);
    print_hint(hint);
    if (g_json) {
        size_t n = strlen(hk_last_error()) + (what ? strlen(what) : 0) + 3;
        char *msg = malloc(n);
        if (msg) snprintf(msg, n, "%s%s%s", what ? what : "", what ? ": " : "", hk_last_error());
        json_error(code, msg ? msg : hk_last_error(), hint, status);
        free(msg);
    }
    return status;
}

int cli_fail(int status, const char *code_name, const char *fmt, ...) {
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    clear_line();
    fprintf(stderr, "hubkern%s%s: %s\n", *g_command ? " " : "", g_command, msg);
    json_error(code_name, msg, code_hint(code_name, status), status);
    return status;
}

int cli_usage_error(const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char *cmd = *g_command ? g_command : NULL;
    fprintf(stderr, "hubkern%s%s: %s\n%s\n", cmd ? " " : "", cmd ? cmd : "", msg, usage_hint());
    json_error("HK_ERR_INVALID_ARG", msg, usage_hint(), 2);
    return 2;
}
