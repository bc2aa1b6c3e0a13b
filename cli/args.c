/* The command line's one argument parser: see cli/args.h. getopt_long is not used because it
 * cannot tell "given twice" from "given once", has no notion of conflicting options, and its
 * messages carry its own prefix; this parser reads the same tables the help, man page and
 * completions are printed from. */
#include "cli/args.h"
#include "cli/cli.h"
#include "cli/wrap.h"
#include "util/text.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const cli_opt cli_common_opts[] = {
    {HK_OPT_FLAG, "help", 'h', NULL, "show this help and exit", NULL, NULL},
    {HK_OPT_COUNT, "verbose", 'v', NULL, "more log output on stderr: retries, requests (-vv: debug)", NULL, NULL},
    {HK_OPT_FLAG, "quiet", 'q', NULL, "no progress display, summary lines or warnings on stderr (errors still)", NULL, NULL},
    {HK_OPT_END, NULL, 0, NULL, NULL, NULL, NULL},
};


size_t cli_edit_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63) return 64;
    size_t row[64];
    for (size_t j = 0; j <= lb; j++) row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

/* every table of a spec, the common options last */
static const cli_opt *table_at(const cli_spec *s, int t) {
    int n = 0;
    while (n < HK_CLI_MAX_TABLES && s->tables[n]) n++;
    return t < n ? s->tables[t] : t == n ? cli_common_opts : NULL;
}

static const cli_opt *find_long(const cli_spec *s, const char *name, size_t len) {
    for (int t = 0; table_at(s, t); t++)
        for (const cli_opt *o = table_at(s, t); o->kind != HK_OPT_END; o++)
            if ((strlen(o->name) == len && strncmp(o->name, name, len) == 0) ||
                (o->alias && strlen(o->alias) == len && strncmp(o->alias, name, len) == 0))
                return o;
    return NULL;
}

static const cli_opt *find_short(const cli_spec *s, char c) {
    for (int t = 0; table_at(s, t); t++)
        for (const cli_opt *o = table_at(s, t); o->kind != HK_OPT_END; o++)
            if (o->short_name == c) return o;
    return NULL;
}

static const cli_opt *find_name(const cli_spec *s, const char *name) {
    const cli_opt *o = find_long(s, name, strlen(name));
    if (!o) { /* a programming error: the command asked for an option its spec lacks */
        fprintf(stderr, "hubkern: internal error: option --%s not in the spec of '%s'\n", name, s->name);
        abort();
    }
    return o;
}

static int unknown_option(const cli_spec *s, const char *arg) {
    const char *name = arg + 2;
    size_t len = strcspn(name, "=");
    char want[64];
    snprintf(want, sizeof want, "%.*s", (int)(len < 63 ? len : 63), name);
    const cli_opt *best = NULL, *prefixed = NULL;
    size_t bestd = 3, nprefixed = 0;
    for (int t = 0; arg[1] == '-' && table_at(s, t); t++)
        for (const cli_opt *o = table_at(s, t); o->kind != HK_OPT_END; o++) {
            size_t d = cli_edit_distance(want, o->name);
            if (d < bestd) bestd = d, best = o;
            /* an abbreviation (--vers) is far from --version by edits but names it: one match only */
            if (len >= 2 && strncmp(o->name, want, strlen(want)) == 0) prefixed = o, nprefixed++;
        }
    if (!best && nprefixed == 1) best = prefixed;
    if (best) return cli_usage_error("unrecognized option '%s' (did you mean --%s?)", arg, best->name);
    return cli_usage_error("unrecognized option '%s'", arg);
}

static int opt_label(char *buf, size_t cap, const cli_opt *o) {
    return snprintf(buf, cap, "--%s", o->name);
}

/* An empty URL, directory or file (--endpoint=) would silently mean "the default": refuse it. */
static bool must_not_be_empty(const cli_opt *o) {
    static const char *const kinds[] = {"URL", "DIR", "FILE"};
    for (size_t i = 0; o->metavar && i < sizeof kinds / sizeof kinds[0]; i++)
        if (strcmp(o->metavar, kinds[i]) == 0) return true;
    return false;
}

/* Is value one of the '|'-separated choices? */
static bool is_choice(const char *choices, const char *value) {
    size_t n = strlen(value);
    for (const char *c = choices; *c;) {
        size_t len = strcspn(c, "|");
        if (len == n && strncmp(c, value, n) == 0) return true;
        c += len;
        if (*c) c++;
    }
    return false;
}

static int add(cli_args *a, const cli_opt *o, const char *value) {
    if (value && !*value && must_not_be_empty(o))
        return cli_usage_error("--%s needs a %s, got an empty value", o->name, o->metavar);
    if (value && o->choices && !is_choice(o->choices, value)) { /* the choices the completion offers are all */
        char list[256] = "";
        for (const char *c = o->choices; *c && strlen(list) + 3 < sizeof list;) {
            size_t len = strcspn(c, "|"), n = strlen(list);
            snprintf(list + n, sizeof list - n, "%s%.*s", n ? ", " : "", (int)len, c);
            c += len + (c[len] == '|');
        }
        return cli_usage_error("--%s '%s' is not one of: %s", o->name, value, list);
    }
    /* a revision is judged before any request, as git judges a ref name */
    if (value && o->metavar && strcmp(o->metavar, "REV") == 0 && !hk__revision_valid(value))
        return cli_usage_error("--%s '%s' is not a revision name (a branch, tag or commit)", o->name, value);
    if (o->kind == HK_OPT_VALUE || o->kind == HK_OPT_FLAG) {
        for (size_t i = 0; i < a->nocc; i++)
            if (a->occ[i].opt == o && o->kind == HK_OPT_VALUE) {
                char l[80];
                opt_label(l, sizeof l, o);
                return cli_usage_error("%s given more than once", l);
            }
    }
    cli_occurrence *g = realloc(a->occ, (a->nocc + 1) * sizeof *g);
    if (!g) return cli_usage_error("out of memory");
    a->occ = g;
    a->occ[a->nocc].opt = o;
    a->occ[a->nocc].value = value;
    a->nocc++;
    return 0;
}

static int check_conflicts(cli_args *a) {
    const char *c = a->spec->conflicts;
    while (c && *c) {
        size_t n = strcspn(c, ";");
        char pair[128];
        snprintf(pair, sizeof pair, "%.*s", (int)(n < 127 ? n : 127), c);
        char *comma = strchr(pair, ',');
        if (comma) {
            *comma = '\0';
            if (cli_count(a, pair) && cli_count(a, comma + 1))
                return cli_usage_error("--%s and --%s cannot be used together", pair, comma + 1);
        }
        c += n;
        if (*c == ';') c++;
    }
    return 0;
}

int cli_parse(cli_args *a, const cli_spec *spec, int argc, char **argv) {
    memset(a, 0, sizeof *a);
    a->spec = spec;
    cli_set_spec(spec);
    a->pos = calloc((size_t)argc + 1, sizeof *a->pos);
    if (!a->pos) return cli_usage_error("out of memory");
    /* --json decides how errors are reported, parse errors included: look for it first */
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (spec->json && strcmp(argv[i], "--json") == 0) cli_set_json(1);
    int rc = 0;
    bool only_pos = false;
    for (int i = 1; i < argc && rc == 0; i++) {
        char *arg = argv[i];
        if (only_pos || arg[0] != '-' || arg[1] == '\0') {
            a->pos[a->npos++] = arg;
            continue;
        }
        if (strcmp(arg, "--") == 0) {
            only_pos = true;
            continue;
        }
        if (arg[1] == '-') {
            const char *name = arg + 2, *eq = strchr(name, '=');
            const cli_opt *o = find_long(spec, name, eq ? (size_t)(eq - name) : strlen(name));
            if (!o) return unknown_option(spec, arg);
            if (o->kind == HK_OPT_FLAG || o->kind == HK_OPT_COUNT) {
                if (eq) return cli_usage_error("--%s takes no value", o->name);
                rc = add(a, o, NULL);
            } else if (eq) {
                rc = add(a, o, eq + 1);
            } else if (i + 1 < argc) {
                rc = add(a, o, argv[++i]);
            } else {
                return cli_usage_error("--%s needs a value (%s)", o->name, o->metavar ? o->metavar : "VALUE");
            }
            continue;
        }
        for (const char *p = arg + 1; *p && rc == 0; p++) { /* -vq, -o FILE, -oFILE */
            const cli_opt *o = find_short(spec, *p);
            if (!o) return cli_usage_error("unrecognized option '-%c'", *p);
            if (o->kind == HK_OPT_FLAG || o->kind == HK_OPT_COUNT) {
                rc = add(a, o, NULL);
            } else if (p[1]) {
                rc = add(a, o, p + 1);
                break;
            } else if (i + 1 < argc) {
                rc = add(a, o, argv[++i]);
            } else {
                return cli_usage_error("-%c needs a value (%s)", *p, o->metavar ? o->metavar : "VALUE");
            }
        }
    }
    if (rc) return rc;
    a->help = cli_count(a, "help") > 0;
    if (a->help) return 0;
    cli_set_verbosity(cli_count(a, "verbose"), cli_count(a, "quiet") > 0);
    return check_conflicts(a);
}

void cli_args_free(cli_args *a) {
    free(a->pos);
    free(a->occ);
    memset(a, 0, sizeof *a);
}

const char *cli_str(const cli_args *a, const char *name) {
    const cli_opt *o = find_name(a->spec, name);
    const char *v = NULL;
    for (size_t i = 0; i < a->nocc; i++)
        if (a->occ[i].opt == o) v = a->occ[i].value;
    return v;
}

int cli_count(const cli_args *a, const char *name) {
    const cli_opt *o = find_name(a->spec, name);
    int n = 0;
    for (size_t i = 0; i < a->nocc; i++) n += a->occ[i].opt == o;
    return n;
}

int cli_int(const cli_args *a, const char *name, long max, int *out) {
    const char *v = cli_str(a, name);
    if (!v) return 0;
    char *end;
    long n = strtol(v, &end, 10);
    if (!*v || *end || n < 0 || n > max)
        return cli_usage_error("--%s takes a non-negative integer, got '%s'", name, v);
    *out = (int)n;
    return 0;
}

/* ---- help ---------------------------------------------------------------------------------- */

#define HK_HELP_COLUMN 29 /* where an option's help text starts */

typedef struct help_out {
    FILE *f;
    size_t prefix; /* the width of the prefix printed before the first piece: continuations pass it */
} help_out;

static void help_piece(void *ud, size_t index, const char *piece, size_t len, size_t indent) {
    const help_out *o = ud;
    fprintf(o->f, "%*s%.*s\n", (int)(index == 0 ? 0 : o->prefix + indent), "", (int)len, piece);
}

/* an option's help text in the column after its name: continuations stay in that column */
static void column_piece(void *ud, size_t index, const char *piece, size_t len, size_t indent) {
    (void)ud;
    (void)indent;
    printf("%*s%.*s\n", index == 0 ? 0 : HK_HELP_COLUMN, "", (int)len, piece);
}

static void print_table(const cli_opt *t, const char *title) {
    printf("\n%s:\n", title);
    for (const cli_opt *o = t; o->kind != HK_OPT_END; o++) {
        char left[96];
        int n = snprintf(left, sizeof left, "  %s%c%s--%s%s%s%s%s", o->short_name ? "-" : "",
                         o->short_name ? o->short_name : ' ', o->short_name ? ", " : "  ", o->name,
                         o->alias ? ", --" : "", o->alias ? o->alias : "", o->metavar ? " " : "",
                         o->metavar ? o->metavar : "");
        if (!o->short_name) memmove(left + 2, left + 5, strlen(left + 5) + 1), n -= 3;
        if (n < HK_HELP_COLUMN - 1) printf("%-*s ", HK_HELP_COLUMN - 1, left);
        else printf("%s\n%-*s ", left, HK_HELP_COLUMN - 1, "");
        /* the first piece is printed after the column, later ones are indented to it */
        cli_wrap(o->help, strlen(o->help), HK_HELP_WIDTH - HK_HELP_COLUMN, 0, column_piece, NULL);
    }
}

void cli_print_wrapped(FILE *f, const char *text, const char *first_prefix, const char *later_prefix,
                       size_t min_hang) {
    help_out out = {f, strlen(first_prefix)};
    for (int first = 1; text && *text; first = 0) {
        char *block = NULL;
        size_t len = 0, hang = 0;
        size_t used = cli_wrap_block(text, HK_HELP_WIDTH / 2, &block, &len, &hang);
        fputs(first ? first_prefix : later_prefix, f);
        if (block) cli_wrap(block, len, HK_HELP_WIDTH - out.prefix, hang > min_hang ? hang : min_hang, help_piece, &out);
        else fprintf(f, "%.*s\n", (int)strcspn(text, "\n"), text);
        free(block);
        text += used;
    }
}

int cli_print_help(const cli_spec *s) {
    cli_print_wrapped(stdout, s->synopsis, "usage: ", "       ", 8); /* continued under the command's name */
    printf("\n");
    cli_print_wrapped(stdout, s->summary, "", "", 0);
    if (s->description) {
        printf("\n");
        cli_print_wrapped(stdout, s->description, "", "", 0);
    }
    for (int t = 0; t < HK_CLI_MAX_TABLES && s->tables[t]; t++)
        print_table(s->tables[t], s->table_titles && s->table_titles[t] ? s->table_titles[t] : "options");
    print_table(cli_common_opts, "common options");
    return 0;
}
