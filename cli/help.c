/* The man page, the shell completions and a JSON dump of every command's spec, all printed from
 * the specs the parser reads (cli/args.h), so that none of them can drift from the real options. */
#include "cli/help.h"
#include "cli/cli.h"
#include "cli/wrap.h"

#include <stdlib.h>
#include <string.h>

static const cli_opt *table_at(const cli_spec *s, int t) {
    int n = 0;
    while (n < HK_CLI_MAX_TABLES && s->tables[n]) n++;
    return t < n ? s->tables[t] : t == n ? cli_common_opts : NULL;
}

static const char *kind_name(cli_opt_kind k) {
    return k == HK_OPT_FLAG ? "flag" : k == HK_OPT_COUNT ? "count" : k == HK_OPT_VALUE ? "value" : "list";
}

int cli_help_json(const cli_spec *only) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "program", "hubkern");
    cJSON_AddStringToObject(root, "hubkern_version", HK_CLI_VERSION);
    cJSON *cmds = cJSON_AddArrayToObject(root, "commands");
    for (size_t i = 0; i < cli_ncommands; i++) {
        const cli_spec *s = cli_commands[i].spec;
        if (only && s != only) continue;
        cJSON *c = cJSON_CreateObject();
        cJSON_AddStringToObject(c, "name", s->name);
        cJSON_AddStringToObject(c, "summary", s->summary);
        cJSON_AddStringToObject(c, "synopsis", s->synopsis);
        if (s->description) cJSON_AddStringToObject(c, "description", s->description);
        if (s->subcommands) cJSON_AddStringToObject(c, "subcommands", s->subcommands);
        cJSON_AddBoolToObject(c, "json", s->json);
        cJSON *opts = cJSON_AddArrayToObject(c, "options");
        for (int t = 0; table_at(s, t); t++)
            for (const cli_opt *o = table_at(s, t); o->kind != HK_OPT_END; o++) {
                cJSON *jo = cJSON_CreateObject();
                cJSON_AddStringToObject(jo, "name", o->name);
                if (o->short_name) {
                    char sh[3] = {'-', o->short_name, 0};
                    cJSON_AddStringToObject(jo, "short", sh);
                }
                if (o->alias) cJSON_AddStringToObject(jo, "alias", o->alias);
                cJSON_AddStringToObject(jo, "kind", kind_name(o->kind));
                if (o->metavar) cJSON_AddStringToObject(jo, "metavar", o->metavar);
                if (o->choices) cJSON_AddStringToObject(jo, "choices", o->choices);
                cJSON_AddStringToObject(jo, "help", o->help);
                cJSON_AddItemToArray(opts, jo);
            }
        cJSON_AddItemToArray(cmds, c);
    }
    cli_print_json(root);
    return 0;
}

/* roff text: a leading '.' or '\'' would be a request, '\' an escape, '-' a hyphen */
static void roff(const char *s) {
    int bol = 1;
    for (; *s; s++) {
        if (bol && (*s == '.' || *s == '\'')) fputs("\\&", stdout);
        if (*s == '\\') fputs("\\e", stdout);
        else if (*s == '-') fputs("\\-", stdout);
        else putchar(*s);
        bol = *s == '\n';
    }
}

/* text with every "docs/NAME.md" the specs mention pointing at its installed copy
 * (cli/CMakeLists.txt installs docs/ to HK_DOC_INSTALL_DIR): the page names only what is there.
 * Caller frees; NULL when out of memory. */
static char *with_doc_paths(const char *s) {
    static const char dir[] = HK_DOC_INSTALL_DIR "/";
    size_t n = 0;
    for (const char *p = s; (p = strstr(p, "docs/")) != NULL; p += 5) n++;
    char *out = malloc(strlen(s) + n * sizeof dir + 1), *o = out;
    if (!out) return NULL;
    const char *p;
    while ((p = strstr(s, "docs/")) != NULL) {
        memcpy(o, s, (size_t)(p - s));
        o += p - s;
        memcpy(o, dir, sizeof dir - 1);
        o += sizeof dir - 1;
        s = p + 5;
    }
    strcpy(o, s);
    return out;
}

static void roff_docs(const char *s) {
    char *t = with_doc_paths(s);
    roff(t ? t : s);
    free(t);
}

/* The specs' preformatted text is laid out for a terminal's help (80 columns); man indents it by 7,
 * so every line is re-broken at this width, the continuation aligned under the text that follows a
 * "label  " column (or under the line's own indent). */
#define HK_MAN_TEXT_WIDTH 72

static void roff_piece(void *ud, size_t index, const char *piece, size_t len, size_t indent) {
    (void)ud;
    (void)index;
    char *p = strndup(piece, len);
    printf("%*s", (int)indent, "");
    if (p) roff(p);
    free(p);
    printf("\n");
}

static void man_nf_line(const char *line, size_t n) {
    if (n == 0) return; /* (.nf keeps blank lines; the page never had them) */
    cli_wrap(line, n, HK_MAN_TEXT_WIDTH, cli_wrap_hang(line, n, HK_MAN_TEXT_WIDTH / 2), roff_piece, NULL);
}

static void man_nf(const char *orig) {
    char *all = with_doc_paths(orig); /* before the breaks: the paths are longer */
    const char *text = all ? all : orig;
    while (*text) {
        char *block = NULL;
        size_t len = 0, hang = 0, used = cli_wrap_block(text, HK_MAN_TEXT_WIDTH / 2, &block, &len, &hang);
        if (block && len) cli_wrap(block, len, HK_MAN_TEXT_WIDTH, hang, roff_piece, NULL);
        else if (!block) man_nf_line(text, strcspn(text, "\n"));
        free(block);
        text += used;
    }
    free(all);
}

static int man(void) {
    printf(".TH HUBKERN 1 \"\" \"hubkern %s\" \"User Commands\"\n", HK_CLI_VERSION);
    printf(".SH NAME\nhubkern \\- a native client for the Hugging Face Kernel Hub\n");
    printf(".SH SYNOPSIS\n.B hubkern\n.I command\n[\\fIoptions\\fR]\n");
    printf(".SH DESCRIPTION\nDownloads, verifies, loads, locks and serves compute kernels in the layout of the "
           "huggingface_hub cache. \\fBhubkern help\\fR \\fIcommand\\fR prints what this page says about one "
           "command. Exit status: 0 success, 1 failure, 2 usage error, 130 interrupted (Ctrl-C), 143 stopped "
           "by SIGTERM.\n");
    printf(".SH COMMANDS\n");
    for (size_t i = 0; i < cli_ncommands; i++) {
        const cli_spec *s = cli_commands[i].spec;
        printf(".SS hubkern %s\n", s->name);
        const char *syn = s->synopsis;
        while (*syn) {
            size_t n = strcspn(syn, "\n");
            printf(".nf\n.B\n");
            man_nf_line(syn, n);
            printf(".fi\n");
            syn += n;
            if (*syn) syn++;
        }
        printf(".PP\n");
        roff(s->summary);
        printf(".\n");
        if (s->description) {
            printf(".PP\n.nf\n");
            man_nf(s->description);
            printf(".fi\n");
        }
        for (int t = 0; table_at(s, t); t++)
            for (const cli_opt *o = table_at(s, t); o->kind != HK_OPT_END; o++) {
                printf(".TP\n");
                if (o->short_name) printf("\\fB\\-%c\\fR, ", o->short_name);
                printf("\\fB\\-\\-");
                roff(o->name);
                printf("\\fR");
                if (o->alias) {
                    printf(", \\fB\\-\\-");
                    roff(o->alias);
                    printf("\\fR");
                }
                if (o->metavar) {
                    printf(" \\fI");
                    roff(o->metavar);
                    printf("\\fR");
                }
                printf("\n");
                roff_docs(o->help);
                printf("\n");
            }
    }
    printf(".SH EXIT STATUS\n0 success; 1 failure (and a report that found problems: \\fBcache verify\\fR, "
           "\\fBvariants\\fR when nothing fits); 2 usage error (a missing, unknown, empty, conflicting or "
           "invalid argument: a value outside its choices, a bad repo id or revision, a bundle name of a kind that "
           "cannot be written), in every command; 130 interrupted (Ctrl\\-C).\n");
    printf(".SH JSON\nWith \\fB\\-\\-json\\fR every command prints one JSON object on stdout, on success and on "
           "error: the schema version, the command and its fields, or an error object (code, message, hint, "
           "exit_status). ");
    roff(HK_DOC_INSTALL_DIR "/json.md describes it; " HK_DOC_INSTALL_DIR "/json-schema/hubkern-1.json is the schema.\n");
    printf(".SH ENVIRONMENT\nHF_ENDPOINT, HF_TOKEN, HF_HUB_OFFLINE, HF_HUB_CACHE, HF_HOME, KERNELS_CACHE, "
           "HF_HUB_DISABLE_PROGRESS_BARS, HF_HUB_ETAG_TIMEOUT, HF_HUB_DOWNLOAD_TIMEOUT, HUBKERN_VERBOSE.\n");
    printf(".SH SEE ALSO\n\\fBhf\\fR(1), \\fBkernels\\fR(1)\n");
    return 0;
}

/* the words a shell may offer after `hubkern CMD`: long options, short options, subcommands */
static void words(const cli_spec *s, int with_subs) {
    for (int t = 0; table_at(s, t); t++)
        for (const cli_opt *o = table_at(s, t); o->kind != HK_OPT_END; o++) {
            printf(" --%s", o->name);
            if (o->alias) printf(" --%s", o->alias);
            if (o->short_name) printf(" -%c", o->short_name);
        }
    if (with_subs && s->subcommands) printf(" %s", s->subcommands);
}

static void value_cases(const char *indent, int zsh) {
    /* options taking a value: offer their choices, else files */
    for (size_t i = 0; i < cli_ncommands; i++) {
        const cli_spec *s = cli_commands[i].spec;
        for (int t = 0; table_at(s, t); t++)
            for (const cli_opt *o = table_at(s, t); o->kind != HK_OPT_END; o++) {
                if (o->kind != HK_OPT_VALUE && o->kind != HK_OPT_LIST) continue;
                printf("%s%s:--%s", indent, s->name, o->name);
                if (o->alias) printf("|%s:--%s", s->name, o->alias);
                if (o->short_name) printf("|%s:-%c", s->name, o->short_name);
                if (o->choices) {
                    char ch[256];
                    snprintf(ch, sizeof ch, "%s", o->choices);
                    for (char *p = ch; *p; p++)
                        if (*p == '|') *p = ' ';
                    if (zsh) printf(") compadd -- %s; return ;;\n", ch);
                    else printf(") COMPREPLY=($(compgen -W \"%s\" -- \"$cur\")); return ;;\n", ch);
                } else {
                    if (zsh) printf(") _files; return ;;\n");
                    else printf(") COMPREPLY=($(compgen -f -- \"$cur\")); return ;;\n");
                }
            }
    }
}

static int completion(const char *shell) {
    if (strcmp(shell, "bash") == 0) {
        printf("# bash completion for hubkern (generated by `hubkern help --completion bash`)\n");
        printf("_hubkern() {\n    local cur=\"${COMP_WORDS[COMP_CWORD]}\" prev=\"${COMP_WORDS[COMP_CWORD-1]}\"\n");
        printf("    COMPREPLY=()\n    if [ \"$COMP_CWORD\" -eq 1 ]; then\n        COMPREPLY=($(compgen -W \"");
        for (size_t i = 0; i < cli_ncommands; i++) printf("%s ", cli_commands[i].spec->name);
        printf("help --help --version -V\" -- \"$cur\"))\n        return\n    fi\n");
        printf("    local cmd=\"${COMP_WORDS[1]}\"\n");
        /* where a subcommand is expected (cache _, bundle _), only the subcommands: no file names */
        printf("    if [ \"$COMP_CWORD\" -eq 2 ] && [[ \"$cur\" != -* ]]; then\n        case \"$cmd\" in\n");
        for (size_t i = 0; i < cli_ncommands; i++)
            if (cli_commands[i].spec->subcommands)
                printf("            %s) COMPREPLY=($(compgen -W \"%s\" -- \"$cur\")); return ;;\n",
                       cli_commands[i].spec->name, cli_commands[i].spec->subcommands);
        printf("        esac\n    fi\n");
        printf("    case \"$cmd:$prev\" in\n");
        value_cases("        ", 0);
        printf("    esac\n    local words=\"\"\n    case \"$cmd\" in\n");
        for (size_t i = 0; i < cli_ncommands; i++) {
            printf("        %s) words=\"", cli_commands[i].spec->name);
            words(cli_commands[i].spec, 1);
            printf("\" ;;\n");
        }
        printf("        help) words=\"");
        for (size_t i = 0; i < cli_ncommands; i++) printf(" %s", cli_commands[i].spec->name);
        printf("\" ;;\n    esac\n");
        printf("    if [[ \"$cur\" == -* || \"$cmd\" == help ]]; then\n");
        printf("        COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n");
        printf("    else\n        COMPREPLY=($(compgen -W \"$words\" -f -- \"$cur\"))\n    fi\n}\n");
        printf("complete -o filenames -F _hubkern hubkern\n");
        return 0;
    }
    if (strcmp(shell, "zsh") == 0) {
        printf("#compdef hubkern\n# zsh completion for hubkern (generated by `hubkern help --completion zsh`)\n");
        printf("_hubkern() {\n    local -a cmds\n    cmds=(\n");
        for (size_t i = 0; i < cli_ncommands; i++) {
            printf("        '%s:", cli_commands[i].spec->name);
            for (const char *p = cli_commands[i].spec->summary; *p; p++)
                fputs(*p == '\'' ? "'\\''" : *p == ':' ? "\\:" : (char[]){*p, 0}, stdout);
            printf("'\n");
        }
        printf("        'help:describe a command'\n    )\n");
        printf("    if (( CURRENT == 2 )); then\n        _describe 'command' cmds\n        return\n    fi\n");
        printf("    local cmd=${words[2]} prev=${words[CURRENT-1]}\n");
        printf("    if (( CURRENT == 3 )) && [[ $PREFIX != -* ]]; then\n        case $cmd in\n");
        for (size_t i = 0; i < cli_ncommands; i++)
            if (cli_commands[i].spec->subcommands)
                printf("            %s) compadd -- %s; return ;;\n", cli_commands[i].spec->name,
                       cli_commands[i].spec->subcommands);
        printf("        esac\n    fi\n");
        printf("    case \"$cmd:$prev\" in\n");
        value_cases("        ", 1);
        printf("    esac\n    local -a w\n    case $cmd in\n");
        for (size_t i = 0; i < cli_ncommands; i++) {
            printf("        %s) w=(", cli_commands[i].spec->name);
            words(cli_commands[i].spec, 1);
            printf(" ) ;;\n");
        }
        printf("        help) w=(");
        for (size_t i = 0; i < cli_ncommands; i++) printf(" %s", cli_commands[i].spec->name);
        printf(" ) ;;\n    esac\n    compadd -- $w\n    _files\n}\n_hubkern \"$@\"\n");
        return 0;
    }
    return cli_usage_error("--completion takes bash or zsh, got '%s'", shell);
}

int cli_help_generate(int argc, char **argv) {
    const char *o = argv[1];
    if (strcmp(o, "--all-json") == 0 || strcmp(o, "--json") == 0) {
        cli_set_json(1);
        return cli_help_json(NULL);
    }
    if (strcmp(o, "--man") == 0) return man();
    if (strncmp(o, "--completion=", 13) == 0) return completion(o + 13);
    if (strcmp(o, "--completion") == 0 && argc > 2) return completion(argv[2]);
    if (strcmp(o, "--help") == 0 || strcmp(o, "-h") == 0) {
        printf("usage: hubkern help [COMMAND] [--json]\n       hubkern help --all-json | --man | --completion bash|zsh\n\n"
               "hubkern help COMMAND is hubkern COMMAND --help. The other forms print every\n"
               "command's options as JSON (--json with a COMMAND: that command's), the\n"
               "hubkern(1) man page, or a completion script; the build installs the last two.\n");
        return 0;
    }
    return cli_usage_error("unrecognized option '%s'", o);
}
