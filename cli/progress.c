/* Download progress: a bar that fits the terminal's width (TIOCGWINSZ, else COLUMNS, else 80) and
 * is redrawn in place with \r, naming the file and showing bytes, speed and ETA; or plain lines
 * every few seconds (--progress=plain); nothing when stderr is not a terminal unless asked, under
 * -q or --json, or with HF_HUB_DISABLE_PROGRESS_BARS as huggingface_hub reads it. Also the SIGINT
 * flag that turns Ctrl-C into a cancel of the transfer. */
#include "cli/progress.h"
#include "cli/cli.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t g_interrupted;
static cli_progress *g_active; /* the display on screen, for cli_progress_clear */

/* SIGINT and SIGTERM alike: the first stops the transfer at its next step (the command then says
 * what was kept), a second one ends the process at once with the shell's code for the signal. */
static void on_signal(int sig) {
    if (g_interrupted) { /* do not wait for the transfer loop */
        static const char msg[] = "\nhubkern: interrupted again; stopping now (partial files stay for the next pull)\n";
        ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
        (void)w;
        _exit(128 + sig);
    }
    g_interrupted = sig;
}

void cli_catch_interrupt(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

int cli_interrupted(void) { return (int)g_interrupted; }

int cli_interrupt_status(int rc) { return g_interrupted ? 128 + (int)g_interrupted : rc; }

static uint64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static int env_true(const char *name) {
    const char *v = getenv(name);
    if (!v) return 0;
    return strcmp(v, "1") == 0 || strcasecmp(v, "true") == 0 || strcasecmp(v, "yes") == 0 || strcasecmp(v, "on") == 0;
}

int cli_progress_init(cli_progress *p, const char *arg) {
    memset(p, 0, sizeof *p);
    if (!arg || strcmp(arg, "auto") == 0) p->mode = isatty(STDERR_FILENO) ? HK_PROGRESS_BAR : HK_PROGRESS_NONE;
    else if (strcmp(arg, "bar") == 0) p->mode = HK_PROGRESS_BAR;
    else if (strcmp(arg, "plain") == 0) p->mode = HK_PROGRESS_PLAIN;
    else if (strcmp(arg, "none") == 0) p->mode = HK_PROGRESS_NONE;
    else return cli_usage_error("--progress takes auto, bar, plain or none, got '%s'", arg);
    /* an explicit --progress wins over the environment, as in hf; -q and --json always win */
    if ((!arg && env_true("HF_HUB_DISABLE_PROGRESS_BARS")) || cli_quiet() || cli_json()) p->mode = HK_PROGRESS_NONE;
    p->start_ms = now_ms();
    return 0;
}

static int term_width(void) {
    struct winsize ws;
    if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
    const char *c = getenv("COLUMNS");
    int n = c ? atoi(c) : 0;
    return n > 0 ? n : 80;
}

/* "512 B", "12.3 kB", "4.5 MB" (decimal units, as the rest of the CLI prints) */
static void human(char *buf, size_t cap, double n) {
    static const char *const u[] = {"B", "kB", "MB", "GB", "TB"};
    size_t i = 0;
    while (n >= 999.95 && i + 1 < sizeof u / sizeof u[0]) n /= 1000.0, i++;
    if (i == 0) snprintf(buf, cap, "%.0f %s", n, u[i]);
    else snprintf(buf, cap, "%.1f %s", n, u[i]);
}

static void eta_text(char *buf, size_t cap, const cli_progress *p) {
    if (p->speed <= 0 || p->total_bytes <= p->done_bytes) {
        snprintf(buf, cap, p->total_bytes && p->total_bytes <= p->done_bytes ? "0:00" : "--:--");
        return;
    }
    unsigned long s = (unsigned long)((double)(p->total_bytes - p->done_bytes) / p->speed + 0.5);
    if (s >= 3600) snprintf(buf, cap, "%lu:%02lu:%02lu", s / 3600, s / 60 % 60, s % 60);
    else snprintf(buf, cap, "%lu:%02lu", s / 60, s % 60);
}

/* the last path component, so that the name fits */
static const char *base(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

static void draw_bar(cli_progress *p) {
    int w = term_width();
    if (w < 20) w = 20;
    char done[24], total[24], speed[24], eta[48], stats[200];
    human(done, sizeof done, (double)p->done_bytes);
    human(total, sizeof total, (double)p->total_bytes);
    human(speed, sizeof speed, p->speed);
    eta_text(eta, sizeof eta, p);
    double f = p->total_bytes ? (double)p->done_bytes / (double)p->total_bytes : 0;
    if (f > 1) f = 1;
    int pct = (int)(f * 100);
    /* widest first; drop parts until the line fits in w - 1 columns (no wrap, no scroll) */
    char line[512];
    const char *name = p->item[0] ? base(p->item) : "";
    for (int level = 0; level < 5; level++) {
        if (level == 0) snprintf(stats, sizeof stats, " %3d%% %s/%s %s/s %s %u/%u", pct, done, total, speed, eta,
                                 p->done_files, p->total_files);
        else if (level == 1) snprintf(stats, sizeof stats, " %3d%% %s/%s %s/s %s", pct, done, total, speed, eta);
        else if (level == 2) snprintf(stats, sizeof stats, " %3d%% %s %s/s %s", pct, done, speed, eta);
        else snprintf(stats, sizeof stats, " %3d%% %s", pct, eta);
        int room = w - 1 - (int)strlen(stats);
        int namew = level >= 4 ? 0 : (int)strlen(name) < 24 ? (int)strlen(name) : 24;
        if (namew && room - namew - 1 < 12) namew = room - 13 > 8 ? room - 13 : 0;
        int cells = room - 2 - (namew ? namew + 1 : 0);
        if (cells < 5 && level < 4) continue;
        if (cells < 1) cells = 1;
        if (cells > 40) cells = 40;
        int k = (int)(f * cells);
        char bar[48];
        for (int i = 0; i < cells; i++) bar[i] = i < k ? '#' : ' ';
        bar[cells] = '\0';
        snprintf(line, sizeof line, "%.*s%s[%s]%s", namew, name, namew ? " " : "", bar, stats);
        if ((int)strlen(line) <= w - 1 || level == 4) break;
    }
    if ((int)strlen(line) > w - 1) line[w - 1] = '\0';
    /* \r, the line, then erase what a longer earlier line left to the right */
    fprintf(stderr, "\r%s\033[K", line);
    fflush(stderr);
    p->drawn = 1;
}

static void draw_plain(const cli_progress *p) {
    char done[24], total[24], speed[24], eta[48];
    human(done, sizeof done, (double)p->done_bytes);
    human(total, sizeof total, (double)p->total_bytes);
    human(speed, sizeof speed, p->speed);
    eta_text(eta, sizeof eta, p);
    fprintf(stderr, "hubkern %s: %s of %s (%u/%u files) at %s/s, eta %s%s%s\n", cli_command(), done, total,
            p->done_files, p->total_files, speed, eta, p->item[0] ? ", " : "", p->item);
    fflush(stderr);
}

int cli_progress_cb(void *ud, const hk_progress *pr) {
    cli_progress *p = ud;
    if (g_interrupted) return 1;
    if (!p || p->mode == HK_PROGRESS_NONE || strcmp(pr->stage, "download") != 0) return 0;
    g_active = p;
    cli_output_set_line_clear(cli_progress_clear); /* messages clear the bar's line first */
    uint64_t t = now_ms();
    if (pr->item) snprintf(p->item, sizeof p->item, "%s", pr->item);
    if (p->speed_ms == 0) {
        p->speed_ms = t;
        p->speed_bytes = pr->done_bytes;
    } else if (t - p->speed_ms >= 500) { /* exponential smoothing over half-second windows */
        double inst = (double)(pr->done_bytes - p->speed_bytes) * 1000.0 / (double)(t - p->speed_ms);
        p->speed = p->speed > 0 ? 0.7 * p->speed + 0.3 * inst : inst;
        p->speed_ms = t;
        p->speed_bytes = pr->done_bytes;
    }
    if (p->speed <= 0 && t > p->start_ms) /* under half a second so far: the average since the start */
        p->speed = (double)pr->done_bytes * 1000.0 / (double)(t - p->start_ms);
    p->done_bytes = pr->done_bytes;
    p->total_bytes = pr->total_bytes;
    p->done_files = pr->done_files;
    p->total_files = pr->total_files;
    bool finished = pr->total_bytes && pr->done_bytes >= pr->total_bytes && pr->done_files == pr->total_files;
    if (p->mode == HK_PROGRESS_BAR) {
        if (t - p->last_ms >= 100 || finished) {
            p->last_ms = t;
            draw_bar(p);
        }
    } else if (p->last_ms == 0 || t - p->last_ms >= 2000 || finished) {
        if (finished && p->drawn) return 0; /* the final line once */
        p->last_ms = t ? t : 1;
        draw_plain(p);
        if (finished) p->drawn = 1;
    }
    return 0;
}

void cli_progress_clear(void) {
    cli_progress *p = g_active;
    if (p && p->mode == HK_PROGRESS_BAR && p->drawn) {
        fprintf(stderr, "\r\033[K");
        p->drawn = 0;
    }
}

void cli_progress_done(cli_progress *p) {
    if (p->mode == HK_PROGRESS_BAR && p->drawn) fprintf(stderr, "\n");
    p->drawn = 0;
    if (g_active == p) g_active = NULL;
}
