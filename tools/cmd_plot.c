/* tools/cmd_plot.c — `reprise plot`: draws benchmark rows (`reprise bench
 * --json`) or training timings (`reprise train --timings`) with gnuplot,
 * to SVG or PNG by the output's extension. `reprise bench --plot` calls
 * rp_cli_plot_bench with the rows it just measured.
 *
 * The timings file (written by `reprise train --timings FILE`):
 *
 *   {"format": "reprise-timings", "version": 1,
 *    "iterations": [{"iteration": 0, "mode": "eager", "ns": 1834000},
 *                   {"iteration": 1, "mode": "replay", "ns": 412000}, ...]}
 *
 * one object per training iteration: its index (>= 0), how it ran (any
 * short string: "eager", "record", "replay"; one line per mode) and its
 * wall time in ns (> 0). Other keys are ignored.
 *
 * gnuplot is found on PATH (or at $REPRISE_GNUPLOT); without it the command
 * says so and exits 1. SVG needs only the svg terminal (gnuplot-nox has
 * it); PNG needs pngcairo (or the older libgd png), which some builds of
 * gnuplot-nox lack: the command checks and says so. */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef REPRISE_HAVE_CJSON
#include <cJSON.h>
#endif

/* ---- gnuplot (found without reading any JSON) ---- */

/* Whether path is a regular file this process may execute (a directory
 * passes access(X_OK)). */
static int is_program(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0 && S_ISREG(sb.st_mode) && access(path, X_OK) == 0;
}

/* The first program called name on PATH (malloc'd), or NULL. */
static char *on_path(const char *name) {
  const char *path = getenv("PATH");
  if (!path)
    path = "/usr/bin:/bin";
  for (const char *p = path; *p;) {
    size_t len = strcspn(p, ":"), cap = len + strlen(name) + 2;
    char *cand = malloc(cap);
    if (!cand)
      return NULL;
    snprintf(cand, cap, "%.*s/%s", (int)len, len ? p : ".", name);
    if (is_program(cand))
      return cand;
    free(cand);
    p += len + (p[len] == ':');
  }
  return NULL;
}

/* gnuplot's path: $REPRISE_GNUPLOT (a path, or a name looked up on PATH),
 * else the first `gnuplot` on PATH. */
static char *find_gnuplot(void) {
  const char *env = getenv("REPRISE_GNUPLOT");
  if (env && *env && strchr(env, '/'))
    return is_program(env) ? strdup(env) : NULL;
  return on_path(env && *env ? env : "gnuplot");
}

/* RP_CLI_OK when gnuplot is found; RP_CLI_FAILED (1) when none is
 * installed, RP_CLI_USAGE (2, a bad variable) when REPRISE_GNUPLOT names
 * no program; said on stderr. */
int rp_cli_gnuplot_check(const char *cmd, const char *out) {
  char *gp = find_gnuplot();
  const char *env = getenv("REPRISE_GNUPLOT");
  if (gp) {
    free(gp);
    return RP_CLI_OK;
  }
  if (env && *env) {
    rp_cli_say(stderr,
               "reprise %s: REPRISE_GNUPLOT=%s is not an executable program%s: "
               "cannot draw '%s'\n",
               cmd, env, strchr(env, '/') ? "" : " on PATH", out);
    return RP_CLI_USAGE;
  }
  rp_cli_say(stderr,
             "reprise %s: gnuplot is not installed (apt-get install "
             "gnuplot-nox, or set REPRISE_GNUPLOT): cannot draw '%s'\n",
             cmd, out);
  return RP_CLI_FAILED;
}

#ifdef REPRISE_HAVE_CJSON /* plotting reads JSON: without cJSON, say so */

/* ---- one series of points ---- */

typedef struct series {
  char *name;       /* whole: series are told apart by it (gp_legend cuts) */
  int group, style; /* colour (workload) and dash (mode) indices */
  double *x, *y;
  uint32_t n, cap;
} series;

typedef struct plot {
  series *s;
  uint32_t n;
  const char *title, *xlabel, *ylabel;
  int logx;
} plot;

static void plot_free(plot *p) {
  for (uint32_t i = 0; i < p->n; i++) {
    free(p->s[i].name);
    free(p->s[i].x);
    free(p->s[i].y);
  }
  free(p->s);
  memset(p, 0, sizeof *p);
}

static series *series_get(plot *p, const char *name, int group, int style) {
  for (uint32_t i = 0; i < p->n; i++)
    if (!strcmp(p->s[i].name, name))
      return &p->s[i];
  char *copy = strdup(name);
  series *s = copy ? realloc(p->s, sizeof *s * (p->n + 1)) : NULL;
  if (!s) {
    free(copy);
    return NULL;
  }
  p->s = s;
  s = &p->s[p->n++];
  memset(s, 0, sizeof *s);
  s->name = copy;
  s->group = group;
  s->style = style;
  return s;
}

static int series_add(series *s, double x, double y) {
  if (s->n == s->cap) {
    uint32_t cap = s->cap ? 2 * s->cap : 16;
    double *nx = realloc(s->x, sizeof *nx * cap);
    if (nx)
      s->x = nx;
    double *ny = nx ? realloc(s->y, sizeof *ny * cap) : NULL;
    if (!ny)
      return -1;
    s->y = ny;
    s->cap = cap;
  }
  s->x[s->n] = x;
  s->y[s->n++] = y;
  return 0;
}

typedef struct point {
  double x, y;
  uint32_t at; /* its place in the input */
} point;

static int cmp_num(double a, double b) {
  return a < b ? -1 : a > b; /* inputs are finite (no NaN from cJSON) */
}

/* x, then input order: a total order, so qsort is stable (as the
 * insertion sort it replaced: equal sizes keep the rows' order). */
static int cmp_point(const void *pa, const void *pb) {
  const point *a = pa, *b = pb;
  int c = cmp_num(a->x, b->x);
  return c ? c : (a->at > b->at) - (a->at < b->at);
}

/* Points in x order (the bench emits sizes in the order given). -1 out of
 * memory. */
static int series_sort(series *s) {
  point *pt = malloc(sizeof *pt * (s->n ? s->n : 1));
  if (!pt)
    return -1;
  for (uint32_t i = 0; i < s->n; i++)
    pt[i] = (point){s->x[i], s->y[i], i};
  qsort(pt, s->n, sizeof *pt, cmp_point);
  for (uint32_t i = 0; i < s->n; i++)
    s->x[i] = pt[i].x, s->y[i] = pt[i].y;
  free(pt);
  return 0;
}

/* ---- gnuplot ---- */

/* What gnuplot draws on its standard output, copied into f (the
 * output's stream, whose commit names the errno of a write that failed:
 * gnuplot itself exits 0 when its writes fail) as it comes; its last
 * bytes are kept for picture_whole. */
typedef struct drawn {
  FILE *f;
  unsigned char tail[64];
  size_t ntail;  /* bytes in tail */
  uint64_t size; /* bytes drawn in all */
} drawn;

static void drawn_add(drawn *d, const unsigned char *b, size_t n) {
  if (!ferror(d->f)) /* after a failed write, drained only */
    (void)!fwrite(b, 1, n, d->f);
  d->size += n;
  if (n >= sizeof d->tail) {
    memcpy(d->tail, b + n - sizeof d->tail, sizeof d->tail);
    d->ntail = sizeof d->tail;
    return;
  }
  size_t keep = d->ntail + n > sizeof d->tail ? sizeof d->tail - n : d->ntail;
  memmove(d->tail, d->tail + d->ntail - keep, keep);
  memcpy(d->tail + keep, b, n);
  d->ntail = keep + n;
}

/* Writes the script into gnuplot's stdin (in) while reading what it
 * draws from its stdout (out, -1: none), so that neither pipe fills and
 * stops both sides. 0, or -1 when fcntl or poll fails (*call: which;
 * errno: why). */
static int feed_gnuplot(int in, int out, const char *script, drawn *d,
                        const char **call) {
  size_t len = strlen(script), off = 0;
  int rc = 0, e = 0;
  int fl = fcntl(in, F_GETFL);
  if (fl < 0 || fcntl(in, F_SETFL, fl | O_NONBLOCK) != 0)
    rc = -1, e = errno, *call = "fcntl";
  while (!rc && (in >= 0 || out >= 0)) {
    struct pollfd pf[2];
    int np = 0, pi = -1, po = -1;
    if (in >= 0)
      pi = np, pf[np++] = (struct pollfd){.fd = in, .events = POLLOUT};
    if (out >= 0)
      po = np, pf[np++] = (struct pollfd){.fd = out, .events = POLLIN};
    if (poll(pf, (nfds_t)np, -1) < 0) {
      if (errno != EINTR)
        rc = -1, e = errno, *call = "poll";
      continue;
    }
    if (pi >= 0 && pf[pi].revents) {
      ssize_t w = write(in, script + off, len - off);
      if (w > 0)
        off += (size_t)w;
      /* all written, or gnuplot reads no more (EPIPE): its stdin ends */
      if (off == len || (w < 0 && errno != EINTR && errno != EAGAIN)) {
        close(in);
        in = -1;
      }
    }
    if (po >= 0 && pf[po].revents) {
      unsigned char buf[65536];
      ssize_t r = read(out, buf, sizeof buf);
      if (r > 0)
        drawn_add(d, buf, (size_t)r);
      else if (r == 0 || (errno != EINTR && errno != EAGAIN)) {
        close(out);
        out = -1;
      }
    }
  }
  if (in >= 0)
    close(in);
  if (out >= 0)
    close(out);
  errno = e;
  return rc;
}

/* Why gnuplot did not run to an exit status (run_gnuplot's -1): "starting
 * gnuplot (<path>): pipe: <strerror>" (pipe, fork, exec), "running gnuplot
 * (<path>): poll: ..." (fcntl, poll, waitpid), "gnuplot (<path>) was
 * killed by signal <n> (<name>)". */
typedef struct gp_why {
  char text[PATH_MAX + 160];
} gp_why;

static int gp_failed(gp_why *why, const char *gp, const char *doing,
                     const char *call, int e) {
  snprintf(why->text, sizeof why->text, "%s gnuplot (%s): %s: %s", doing, gp,
           call, strerror(e));
  return -1;
}

/* Runs gnuplot with `script` on its stdin; its stdout a pipe read into d
 * (NULL: ours), its stderr ours (quiet: /dev/null). Returns its exit
 * status, or -1 with why said in *why (gp_why). */
static int run_gnuplot(const char *gp, const char *script, int quiet, drawn *d,
                       gp_why *why) {
  int in[2], out[2] = {-1, -1};
  if (pipe(in) != 0)
    return gp_failed(why, gp, "starting", "pipe", errno);
  if (d && pipe(out) != 0) {
    int e = errno;
    close(in[0]);
    close(in[1]);
    return gp_failed(why, gp, "starting", "pipe", e);
  }
  /* the exec's errno, written by a child whose exec failed; a successful
   * exec closes the pipe (O_CLOEXEC) and the read sees its end */
  int ex[2];
  const char *failed = pipe2(ex, O_CLOEXEC) != 0 ? "pipe" : NULL;
  pid_t pid = failed ? -1 : fork();
  if (pid < 0) {
    int e = errno;
    close(in[0]);
    close(in[1]);
    if (d) {
      close(out[0]);
      close(out[1]);
    }
    if (!failed) {
      close(ex[0]);
      close(ex[1]);
    }
    return gp_failed(why, gp, "starting", failed ? failed : "fork", e);
  }
  if (pid == 0) {
    signal(SIGPIPE, SIG_DFL); /* as a shell would start it */
    dup2(in[0], 0);
    if (d)
      dup2(out[1], 1);
    for (int i = 0; i < 2; i++) {
      if (in[i] > 2)
        close(in[i]);
      if (out[i] > 2)
        close(out[i]);
    }
    int null = quiet ? open("/dev/null", O_WRONLY) : -1;
    if (null >= 0)
      dup2(null, 2);
    execl(gp, "gnuplot", (char *)NULL);
    int e = errno;
    ssize_t w = write(ex[1], &e, sizeof e);
    (void)w;
    _exit(127);
  }
  close(ex[1]);
  close(in[0]);
  if (d)
    close(out[1]);
  int ee = 0;
  ssize_t r;
  while ((r = read(ex[0], &ee, sizeof ee)) < 0 && errno == EINTR)
    ;
  close(ex[0]);
  if (r == (ssize_t)sizeof ee) { /* the exec failed: gnuplot never ran */
    close(in[1]);
    if (d)
      close(out[0]);
    while (waitpid(pid, &(int){0}, 0) < 0 && errno == EINTR)
      ;
    return gp_failed(why, gp, "starting", "exec", ee);
  }
  const char *call = NULL;
  int fed = feed_gnuplot(in[1], out[0], script, d, &call);
  int fe = errno, ws;
  while (waitpid(pid, &ws, 0) < 0)
    if (errno != EINTR)
      return gp_failed(why, gp, "running", "waitpid", errno);
  if (fed != 0)
    return gp_failed(why, gp, "running", call, fe);
  if (WIFSIGNALED(ws)) {
    snprintf(why->text, sizeof why->text,
             "gnuplot (%s) was killed by signal %d (%s)", gp, WTERMSIG(ws),
             strsignal(WTERMSIG(ws)));
    return -1;
  }
  return WEXITSTATUS(ws); /* not signalled: exited (no WUNTRACED) */
}

/* The terminal for the output's extension (.svg or .png, checked by the
 * caller), checked against this gnuplot. NULL (said on stderr) when this
 * gnuplot cannot write it. */
static const char *terminal_for(const char *cmd, const char *gp,
                                const char *out) {
  const char *dot = strrchr(out, '.');
  if (!strcasecmp(dot, ".svg"))
    return "svg size 960,640 dynamic font 'sans,11'";
  gp_why why;
  int st = run_gnuplot(gp, "set terminal pngcairo\n", 1, NULL, &why);
  if (st == 0)
    return "pngcairo size 960,640 font 'sans,10'";
  if (st > 0 &&
      (st = run_gnuplot(gp, "set terminal png\n", 1, NULL, &why)) == 0)
    return "png size 960,640";
  if (st < 0) { /* no answer: not a missing terminal */
    rp_cli_say(stderr,
               "reprise %s: %s: cannot check its PNG terminal for '%s'\n", cmd,
               why.text, out);
    return NULL;
  }
  rp_cli_say(stderr,
             "reprise %s: this gnuplot (%s) has no PNG terminal "
             "(pngcairo is missing from some gnuplot-nox builds): write .svg "
             "instead\n",
             cmd, gp);
  return NULL;
}

/* n bytes of s in a gnuplot single-quoted string: no escapes inside, ''
 * is a quote; control bytes are dropped, and what XML may not hold (bytes
 * that are no UTF-8, U+FFFE, U+FFFF) becomes U+FFFD: an SVG's titles are
 * XML text. */
static void gp_put(FILE *f, const char *s, size_t n) {
  const unsigned char *p = (const unsigned char *)s;
  for (size_t i = 0; i < n;) {
    size_t k = rp_cli_utf8_len(p + i);
    if (k > n - i) /* a sequence cut by the end of the range */
      k = 0;
    int nonchar = /* U+FFFE, U+FFFF: one character, replaced */
        k == 3 && p[i] == 0xef && p[i + 1] == 0xbf && p[i + 2] >= 0xbe;
    if (k == 0 || nonchar) {
      fputs("\xef\xbf\xbd", f);
      i += k ? k : 1;
      continue;
    }
    if (p[i] == '\'')
      fputc('\'', f);
    if (k > 1 || (p[i] >= 0x20 && p[i] != 0x7f))
      fwrite(p + i, 1, k, f);
    i += k;
  }
}

static void gp_str(FILE *f, const char *s) {
  fputc('\'', f);
  gp_put(f, s, strlen(s));
  fputc('\'', f);
}

#define UTF8_CONT(c) (((unsigned char)(c)&0xc0) == 0x80)

/* A series' title: a name over 95 bytes shows its first 60 and last 32
 * (cut at UTF-8 characters), for display only: names that share a long
 * prefix (or suffix) stay apart as series. */
static void gp_legend(FILE *f, const char *s) {
  size_t len = strlen(s), head = 60, tail = len - 32;
  if (len <= 95) {
    gp_str(f, s);
    return;
  }
  while (head && UTF8_CONT(s[head]))
    head--;
  while (tail < len && UTF8_CONT(s[tail]))
    tail++;
  fputc('\'', f);
  gp_put(f, s, head);
  fputs("...", f);
  gp_put(f, s + tail, len - tail);
  fputc('\'', f);
}

/* A colour a group (a workload, with its worker count and backend when
 * rows vary in them; a training mode): 16 colours, then the same ones
 * with another point type (pt_of), up to PLOT_GROUPS groups. */
static const char *const COLORS[] = {
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b",
    "#e377c2", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39",
    "#7b4173", "#bcbd22", "#7f7f7f", "#000000"};
#define NCOLORS (int)(sizeof COLORS / sizeof COLORS[0])
#define PLOT_GROUPS 64

/* A series' point type: its mode's (style), shifted for every round of
 * the colours. */
static int pt_of(const series *s) {
  return 7 + s->style + 4 * (s->group / NCOLORS);
}

/* Points a series draws at most: a longer one (a training run's every
 * iteration) is cut into PLOT_BUCKETS runs of consecutive points, each
 * drawn as its lowest and highest point in x order, a line without
 * markers: the envelope, spikes included, in a picture of bounded size
 * (a million points made a 106 MB SVG). */
#define PLOT_BUCKETS 2000u

static void put_point(FILE *f, const series *s, uint32_t k) {
  fprintf(f, "%.9g %.9g\n", s->x[k], s->y[k]);
}

static void series_data(FILE *f, const series *s) {
  if (s->n <= 2 * PLOT_BUCKETS) {
    for (uint32_t k = 0; k < s->n; k++)
      put_point(f, s, k);
    return;
  }
  for (uint32_t b = 0; b < PLOT_BUCKETS; b++) {
    uint32_t lo = (uint32_t)((uint64_t)s->n * b / PLOT_BUCKETS),
             hi = (uint32_t)((uint64_t)s->n * (b + 1) / PLOT_BUCKETS);
    uint32_t kmin = lo, kmax = lo;
    for (uint32_t k = lo + 1; k < hi; k++) {
      kmin = s->y[k] < s->y[kmin] ? k : kmin;
      kmax = s->y[k] > s->y[kmax] ? k : kmax;
    }
    put_point(f, s, kmin < kmax ? kmin : kmax);
    if (kmin != kmax)
      put_point(f, s, kmin < kmax ? kmax : kmin);
  }
}

static void script_series(FILE *f, const plot *p) {
  for (uint32_t i = 0; i < p->n; i++) {
    fprintf(f, "$s%u << EOD\n", i);
    series_data(f, &p->s[i]);
    fprintf(f, "EOD\n");
  }
  fprintf(f, "plot ");
  for (uint32_t i = 0; i < p->n; i++) {
    const series *s = &p->s[i];
    if (s->n > 2 * PLOT_BUCKETS)
      fprintf(f, "%s$s%u using 1:2 with lines lw 1 dt %d lc rgb '%s' title ",
              i ? ", \\\n     " : "", i,
              1 + s->style + 4 * (s->group / NCOLORS),
              COLORS[s->group % NCOLORS]);
    else
      fprintf(f,
              "%s$s%u using 1:2 with linespoints lw 2 pt %d dt %d "
              "lc rgb '%s' title ",
              i ? ", \\\n     " : "", i, pt_of(s), 1 + s->style,
              COLORS[s->group % NCOLORS]);
    gp_legend(f, s->name);
  }
  fputc('\n', f);
}

/* A range gnuplot would find empty (one x or one y over every series: it
 * warns on stderr and widens it itself) widened around the value by a
 * factor of 2 each way (the axes are logarithmic or positive). */
static void script_ranges(FILE *f, const plot *p) {
  for (int axis = 0; axis < 2; axis++) {
    double lo = INFINITY, hi = -INFINITY;
    for (uint32_t i = 0; i < p->n; i++)
      for (uint32_t k = 0; k < p->s[i].n; k++) {
        double v = axis ? p->s[i].y[k] : p->s[i].x[k];
        lo = v < lo ? v : lo, hi = v > hi ? v : hi;
      }
    if (lo == hi && !axis && !p->logx) /* linear x, maybe 0 */
      fprintf(f, "set xrange [%.9g:%.9g]\n", lo - 1, hi + 1);
    else if (lo == hi && lo > 0)
      fprintf(f, "set %crange [%.9g:%.9g]\n", axis ? 'y' : 'x', lo / 2, hi * 2);
  }
}

/* The whole script, which draws on gnuplot's standard output; NULL when
 * out of memory. */
static char *make_script(const plot *p, const char *term) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  if (!f)
    return NULL;
  /* noenhanced: names are drawn as written ("replay_x^2" is no
   * subscript and superscript) */
  fprintf(f,
          "set terminal %s\nset termoption noenhanced\nset output\n"
          "set title ",
          term);
  gp_str(f, p->title);
  fprintf(f, "\nset xlabel ");
  gp_str(f, p->xlabel);
  fprintf(f, "\nset ylabel ");
  gp_str(f, p->ylabel);
  /* a legend beside the plot takes its width from the longest name: past
   * 40 bytes the key goes below, and the plot keeps the picture's width */
  size_t longest = 0;
  for (uint32_t i = 0; i < p->n; i++)
    longest = strlen(p->s[i].name) > longest ? strlen(p->s[i].name) : longest;
  fprintf(f,
          "\nset logscale y\n%sset grid\nset key %s\n"
          "set format y '%%g'\n",
          p->logx ? "set logscale x\n" : "",
          longest > 40 ? "below left Left reverse" : "outside right top");
  script_ranges(f, p);
  script_series(f, p);
  fprintf(f, "set output\n");
  if (fclose(f) != 0) {
    free(text);
    return NULL;
  }
  return text;
}

/* Whether what gnuplot drew ends as a whole picture does: an SVG with
 * its closing tag, a PNG with its IEND chunk (a gnuplot that stops
 * halfway may still exit 0). */
static int picture_whole(const drawn *d, const char *term) {
  size_t n = d->ntail;
  const unsigned char *tail = d->tail;
  if (!d->size)
    return 0;
  if (!strncmp(term, "svg", 3)) {
    while (n && strchr(" \t\r\n", tail[n - 1]))
      n--;
    return n >= 6 && !memcmp(tail + n - 6, "</svg>", 6);
  }
  static const unsigned char iend[] = {0,   0,   0,    0,    'I',  'E',
                                       'N', 'D', 0xae, 0x42, 0x60, 0x82};
  return n >= sizeof iend && !memcmp(tail + n - sizeof iend, iend, sizeof iend);
}

static int draw(const char *cmd, const plot *p, const char *out) {
  if (!p->n) {
    rp_cli_say(stderr, "reprise %s: nothing to plot\n", cmd);
    return RP_CLI_FAILED;
  }
  char *gp = find_gnuplot();
  if (!gp)
    return rp_cli_gnuplot_check(cmd, out);
  const char *term = terminal_for(cmd, gp, out);
  char *script = term ? make_script(p, term) : NULL;
  int rc = RP_CLI_FAILED;
  if (term && !script)
    rp_cli_say(stderr, "reprise %s: out of memory\n", cmd);
  /* what gnuplot draws goes through a pipe into the output's stream: out
   * is replaced only by a whole picture, a failing gnuplot leaves the
   * previous one, and a write that fails (a full disk) is said with its
   * cause by the commit */
  rp_output *o = NULL;
  if (script && !rp_cli_output_open(cmd, "--output", out, &o)) {
    drawn d = {.f = rp_output_file(o)};
    gp_why why;
    int st = run_gnuplot(gp, script, 0, &d, &why);
    if (st == 0 && picture_whole(&d, term)) {
      rc = rp_cli_output_commit(cmd, "--output", out, o);
    } else if (st == 0) {
      rp_output_abort(o);
      rp_cli_say(stderr,
                 "reprise %s: gnuplot's picture is cut short (it exited 0 "
                 "without finishing it): '%s' not written (a file there is "
                 "unchanged)\n",
                 cmd, out);
    } else if (st < 0) {
      rp_output_abort(o);
      rp_cli_say(stderr,
                 "reprise %s: %s: '%s' not written (a file there is "
                 "unchanged)\n",
                 cmd, why.text, out);
    } else {
      rp_output_abort(o);
      rp_cli_say(stderr,
                 "reprise %s: gnuplot (%s) failed (exit status %d): "
                 "'%s' not written (a file there is unchanged)\n",
                 cmd, gp, st, out);
    }
  }
  free(script);
  free(gp);
  return rc;
}

/* ---- reading the inputs ---- */

/* name's group index, a new one for a new name; -1 past PLOT_GROUPS. */
static int group_of(const char **names, int *n, const char *name) {
  for (int i = 0; i < *n; i++)
    if (!strcmp(names[i], name))
      return i;
  if (*n == PLOT_GROUPS)
    return -1;
  names[(*n)++] = name;
  return *n - 1;
}

/* The first key of object o that appears twice in it, or NULL. */
static const char *dup_key(const cJSON *o) {
  for (const cJSON *c = cJSON_IsObject(o) ? o->child : NULL; c; c = c->next)
    for (const cJSON *d = o->child; d != c; d = d->next)
      if (c->string && d->string && !strcmp(c->string, d->string))
        return c->string;
  return NULL;
}

/* A key as rp_cli_put_quoted writes it (at most 64 bytes as \xNN, then
 * "..."), into buf for a message written in one call. */
#define KEY_QUOTED (64 * 4 + 4)
static const char *quoted(char *buf, size_t n, const char *s) {
  FILE *m = fmemopen(buf, n, "w");
  buf[0] = '\0';
  if (m) {
    rp_cli_put_quoted(m, s);
    fclose(m);
  }
  return buf;
}

/* "reprise CMD: 'FILE': " and the message, one line on stderr written by
 * rp_cli_say (a name's control bytes escaped); file NULL: the rows just
 * measured, named by no file. */
static void say_input(const char *cmd, const char *file, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void say_input(const char *cmd, const char *file, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (file)
    rp_cli_say(stderr, "reprise %s: '%s': %s\n", cmd, file, msg);
  else
    rp_cli_say(stderr, "reprise %s: %s\n", cmd, msg);
}

/* Two values (either may be absent) are equal. */
static int same_value(const cJSON *a, const cJSON *b) {
  return a && b ? cJSON_Compare(a, b, 1) : a == b;
}

/* The line style of a bench mode: replay, eager, static, other. */
static int mode_style(const char *mode) {
  return !strcmp(mode, "replay")   ? 0
         : !strcmp(mode, "eager")  ? 1
         : !strcmp(mode, "static") ? 2
                                   : 3;
}

/* A DAG workload row (one with "workload") that cannot be drawn: why,
 * else NULL. */
static const char *bad_row(const cJSON *r) {
  const cJSON *w = cJSON_GetObjectItemCaseSensitive(r, "workload");
  const cJSON *m = cJSON_GetObjectItemCaseSensitive(r, "mode");
  const cJSON *n = cJSON_GetObjectItemCaseSensitive(r, "nodes");
  const cJSON *y = cJSON_GetObjectItemCaseSensitive(r, "ns_per_task_median");
  if (!cJSON_IsString(w) || !w->valuestring[0])
    return "\"workload\" is not a non-empty string";
  if (!cJSON_IsString(m) || !m->valuestring[0])
    return "\"mode\" is not a non-empty string";
  if (!cJSON_IsNumber(n) || !(n->valuedouble >= 1) ||
      !(n->valuedouble <= 4294967295.0) ||
      n->valuedouble != floor(n->valuedouble))
    return "\"nodes\" is not a whole number in 1..4294967295";
  if (!cJSON_IsNumber(y) || !isfinite(y->valuedouble) || y->valuedouble <= 0)
    return "\"ns_per_task_median\" is not a finite number above 0";
  return NULL;
}

/* Bench rows: one series per (workload, mode); x nodes, y ns per task.
 * file names the rows in errors (NULL: rows just measured). Rows without
 * "workload" (--hop, --xfer, --build, --gpu, --dist) are passed over; a
 * workload row that cannot be drawn, an entry that is not an object or a
 * key given twice is refused, naming the row. */
static int bench_series(const cJSON *rows, plot *p, const char *cmd,
                        const char *file) {
  if (!cJSON_IsArray(rows)) {
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(rows, "format");
    int timings =
        cJSON_IsString(fmt) && !strcmp(fmt->valuestring, "reprise-timings");
    say_input(cmd, file, "%s",
              timings ? "a train timings file, not bench rows: plot it with "
                        "--train"
                      : "not bench rows (want the JSON array that `reprise "
                        "bench --json` writes)");
    return -1;
  }
  /* rows of several worker counts or backends (files put together) are
   * told apart: their series and colours carry them */
  const cJSON *r, *first_w = NULL, *first_b = NULL;
  int vary_w = 0, vary_b = 0, seen = 0;
  cJSON_ArrayForEach(r, rows) {
    if (!cJSON_GetObjectItemCaseSensitive(r, "workload"))
      continue;
    const cJSON *wk = cJSON_GetObjectItemCaseSensitive(r, "workers");
    const cJSON *be = cJSON_GetObjectItemCaseSensitive(r, "backend");
    if (!seen++)
      first_w = wk, first_b = be;
    vary_w |= !same_value(wk, first_w);
    vary_b |= !same_value(be, first_b);
  }
  const char *groups[PLOT_GROUPS];
  char *keys[PLOT_GROUPS] = {0}; /* the groups' names when they carry more */
  int ng = 0, rc = 0;
  uint32_t ri = 0;
  cJSON_ArrayForEach(r, rows) {
    uint32_t i = ri++;
    const char *twice = dup_key(r), *why = NULL;
    if (!cJSON_IsObject(r))
      why = "not an object";
    else if (twice) {
      char kq[KEY_QUOTED];
      say_input(cmd, file, "row %u: key '%s' appears twice", i,
                quoted(kq, sizeof kq, twice));
      rc = -1;
      break;
    } else if (!cJSON_GetObjectItemCaseSensitive(r, "workload"))
      continue; /* --hop, --xfer, --build, --gpu, --dist rows */
    else
      why = bad_row(r);
    if (why) {
      say_input(cmd, file, "row %u: %s", i, why);
      rc = -1;
      break;
    }
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(r, "workload");
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(r, "mode");
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(r, "nodes");
    const cJSON *y = cJSON_GetObjectItemCaseSensitive(r, "ns_per_task_median");
    char more[96] = "";
    if (vary_w) {
      const cJSON *wk = cJSON_GetObjectItemCaseSensitive(r, "workers");
      if (cJSON_IsNumber(wk))
        snprintf(more, sizeof more, ", %.0f worker%s", wk->valuedouble,
                 wk->valuedouble == 1 ? "" : "s");
      else
        snprintf(more, sizeof more, ", workers ?");
    }
    if (vary_b) {
      const cJSON *be = cJSON_GetObjectItemCaseSensitive(r, "backend");
      size_t at = strlen(more);
      snprintf(more + at, sizeof more - at, ", %s",
               cJSON_IsString(be) ? be->valuestring : "backend ?");
    }
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "quick"))) {
      size_t at = strlen(more); /* a smoke test's figures, said so */
      snprintf(more + at, sizeof more - at, " (--quick)");
    }
    size_t glen = strlen(w->valuestring) + strlen(more) + 1;
    size_t len = glen + strlen(m->valuestring) + 1;
    char *name = malloc(len), *key = malloc(glen);
    series *s = NULL;
    if (name && key) {
      snprintf(key, glen, "%s%s", w->valuestring, more);
      snprintf(name, len, "%s %s%s", w->valuestring, m->valuestring, more);
      int g = group_of(groups, &ng, key);
      if (g < 0) {
        say_input(cmd, file,
                  "row %u: more than %d workloads (with their worker counts "
                  "and backends) to tell apart: plot fewer",
                  i, PLOT_GROUPS);
        free(name);
        free(key);
        rc = -1;
        break;
      }
      if (groups[g] == key) /* a new group keeps its name */
        keys[g] = key, key = NULL;
      s = series_get(p, name, g, mode_style(m->valuestring));
    }
    free(name);
    free(key);
    if (!s || series_add(s, n->valuedouble, y->valuedouble)) {
      rp_cli_say(stderr, "reprise %s: out of memory\n", cmd);
      rc = -1;
      break;
    }
  }
  for (int g = 0; g < PLOT_GROUPS; g++)
    free(keys[g]);
  if (rc)
    return rc;
  if (!p->n) {
    say_input(cmd, file,
              "nothing to plot: no DAG workload rows (workload, mode, nodes, "
              "ns_per_task_median); the rows of --hop, --xfer, --build, "
              "--gpu and --dist are not plotted");
    return -1;
  }
  for (uint32_t i = 0; i < p->n; i++)
    if (series_sort(&p->s[i])) {
      rp_cli_say(stderr, "reprise %s: out of memory\n", cmd);
      return -1;
    }
  p->title = "reprise bench: cost per task against graph size";
  p->xlabel = "tasks in the graph (log)";
  p->ylabel = "ns per task, median of 5 runs (log)";
  p->logx = 1;
  return 0;
}

static int timing_err(const char *cmd, const char *file, uint32_t i,
                      const char *what) {
  say_input(cmd, file, "iterations[%u]: %s", i, what);
  return -1;
}

/* Training timings: one series per mode; x iteration, y microseconds. */
static int train_series(const cJSON *doc, plot *p, const char *cmd,
                        const char *file) {
  const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(doc, "format");
  const cJSON *ver = cJSON_GetObjectItemCaseSensitive(doc, "version");
  const cJSON *its = cJSON_GetObjectItemCaseSensitive(doc, "iterations");
  if (cJSON_IsString(fmt) && !strcmp(fmt->valuestring, "reprise-timings") &&
      cJSON_IsNumber(ver) && ver->valuedouble != 1) {
    say_input(cmd, file, "timings version %g (this build reads version 1)",
              ver->valuedouble);
    return -1;
  }
  if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, "reprise-timings") ||
      !cJSON_IsNumber(ver) || ver->valuedouble != 1 || !cJSON_IsArray(its)) {
    if (cJSON_IsArray(doc)) /* as --bench names timings given to it */
      say_input(cmd, file,
                "bench rows, not a train timings file: plot them with "
                "--bench");
    else
      say_input(cmd, file,
                "not a timings file (want {\"format\": \"reprise-timings\", "
                "\"version\": 1, \"iterations\": [...]})");
    return -1;
  }
  const char *dup = dup_key(doc);
  if (dup) {
    char kq[KEY_QUOTED];
    say_input(cmd, file, "key '%s' appears twice", quoted(kq, sizeof kq, dup));
    return -1;
  }
  if (!its->child) {
    say_input(cmd, file, "no iterations to plot");
    return -1;
  }
  const char *groups[PLOT_GROUPS];
  int ng = 0;
  uint32_t i = 0;
  const cJSON *it;
  cJSON_ArrayForEach(it, its) {
    if (!cJSON_IsObject(it))
      return timing_err(cmd, file, i, "not an object");
    if ((dup = dup_key(it))) {
      char kq[KEY_QUOTED];
      say_input(cmd, file, "iterations[%u]: key '%s' appears twice", i,
                quoted(kq, sizeof kq, dup));
      return -1;
    }
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(it, "iteration");
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(it, "mode");
    const cJSON *ns = cJSON_GetObjectItemCaseSensitive(it, "ns");
    /* an iteration's index (1e999, infinity, 1e300 left gnuplot no x
     * range; 0.5 is no iteration) */
    if (!cJSON_IsNumber(n) || !(n->valuedouble >= 0) ||
        !(n->valuedouble <= 4294967295.0) ||
        n->valuedouble != floor(n->valuedouble))
      return timing_err(cmd, file, i,
                        "\"iteration\": expected a whole number in "
                        "0..4294967295");
    if (!cJSON_IsString(m) || !*m->valuestring)
      return timing_err(cmd, file, i, "\"mode\": expected a non-empty string");
    if (!cJSON_IsNumber(ns) || !(ns->valuedouble > 0) ||
        !isfinite(ns->valuedouble))
      return timing_err(cmd, file, i, "\"ns\": expected a finite number > 0");
    int g = group_of(groups, &ng, m->valuestring);
    if (g < 0) {
      char why[96];
      snprintf(why, sizeof why, "more than %d modes to tell apart: plot fewer",
               PLOT_GROUPS);
      return timing_err(cmd, file, i, why);
    }
    series *s = series_get(p, m->valuestring, g, 0);
    if (!s || series_add(s, n->valuedouble, ns->valuedouble / 1e3))
      return timing_err(cmd, file, i, "out of memory");
    i++;
  }
  for (uint32_t k = 0; k < p->n; k++) /* by iteration: the line, the thinning */
    if (series_sort(&p->s[k])) {
      rp_cli_say(stderr, "reprise %s: out of memory\n", cmd);
      return -1;
    }
  p->title = "reprise train: time per iteration";
  p->xlabel = "iteration";
  p->ylabel = "wall time per iteration, us (log)";
  return 0;
}

/* The series of file's text into p (train 1: a --timings file, else bench
 * rows): 0, or -1 after saying why, naming file. */
static int read_plot(int train, const char *cmd, const char *file,
                     const char *text, size_t len, plot *p) {
  cJSON *doc = rp_cli_json_parse(text, len);
  int rc = -1;
  if (!doc)
    say_input(cmd, file, "%s", rp_error_detail());
  else
    rc = train ? train_series(doc, p, cmd, file)
               : bench_series(doc, p, cmd, file);
  cJSON_Delete(doc); /* the series keep copies of their names */
  return rc;
}

/* read_plot of a file: a regular file of at most 64 MiB (a directory,
 * device or FIFO is refused, naming its kind). */
static int read_plot_file(int train, const char *cmd, const char *file,
                          plot *p) {
  char *text = NULL;
  size_t len = 0;
  rp_status st = rp_file_read_regular(file, (size_t)64 << 20, &text, &len);
  if (st) {
    rp_cli_say(stderr, "reprise %s: cannot read '%s': %s\n", cmd, file,
               rp_error_detail());
    return -1;
  }
  int rc = read_plot(train, cmd, file, text, len, p);
  free(text);
  return rc;
}
#endif

int rp_cli_plot_script(int train, const char *file, const char *text,
                       size_t len, const char *term, char **script) {
#ifdef REPRISE_HAVE_CJSON
  plot p = {0};
  int rc = RP_CLI_FAILED;
  if (!read_plot(train, "plot", file, text, len, &p)) {
    *script = make_script(&p, term);
    if (*script)
      rc = RP_CLI_OK;
    else
      rp_cli_say(stderr, "reprise plot: out of memory\n");
  }
  plot_free(&p);
  return rc;
#else
  (void)train, (void)file, (void)text, (void)len, (void)term, (void)script;
  rp_cli_say(stderr, "reprise plot: this build has no cJSON to read JSON\n");
  return RP_CLI_FAILED;
#endif
}

int rp_cli_plot_terminal_check(const char *cmd, const char *out) {
#ifdef REPRISE_HAVE_CJSON
  char *gp = find_gnuplot();
  if (!gp)
    return rp_cli_gnuplot_check(cmd, out);
  const char *term = terminal_for(cmd, gp, out);
  free(gp);
  return term ? RP_CLI_OK : RP_CLI_FAILED;
#else
  return rp_cli_gnuplot_check(cmd, out);
#endif
}

int rp_cli_plot_bench(const char *rows_json, size_t len, const char *out) {
#ifdef REPRISE_HAVE_CJSON
  cJSON *rows = rp_cli_json_parse(rows_json, len);
  plot p = {0};
  int rc = RP_CLI_FAILED;
  if (!rows) /* RP_ENOMEM said as such, not as rows that are no JSON */
    rp_cli_say(stderr, "reprise bench --plot: cannot read the rows: %s\n",
               rp_error_detail());
  else if (!bench_series(rows, &p, "bench --plot", NULL))
    rc = draw("bench --plot", &p, out);
  cJSON_Delete(rows);
  plot_free(&p);
  return rc;
#else
  (void)rows_json, (void)len, (void)out;
  rp_cli_say(stderr, "reprise bench --plot: this build has no cJSON\n");
  return RP_CLI_FAILED;
#endif
}

/* 1 when out ends in .svg or .png (any case). */
int rp_cli_plot_ext_ok(const char *out) {
  const char *dot = strrchr(out, '.');
  return dot && (!strcasecmp(dot, ".svg") || !strcasecmp(dot, ".png"));
}

/* ---- the command ---- */

static void plot_usage(FILE *f) {
  fprintf(f,
          "usage: reprise plot (--bench ROWS.json | --train TIMINGS.json) "
          "-o OUT.svg|OUT.png\n"
          "\n"
          "Draws with gnuplot (SVG, or PNG where gnuplot has pngcairo).\n"
          "\n"
          "  --bench FILE     rows of `reprise bench --json` (run it with\n"
          "                   --sizes for several graph sizes): ns per task\n"
          "                   against tasks per graph, one line per workload\n"
          "                   and mode, log scales\n"
          "  --train FILE     a timings file (`reprise train --timings`):\n"
          "                   time per iteration, one line per mode\n"
          "  -o, --output F   the picture; .svg or .png\n"
          "  -h, --help       this text\n"
          "\n"
          "Exit status: 0 drawn, 1 no gnuplot, no PNG terminal, a bad\n"
          "input file or a picture cut short, 2 bad usage (a\n"
          "REPRISE_GNUPLOT that names no program included).\n");
}

static const struct option PLOT_OPTS[] = {
    {"bench", required_argument, NULL, 'b'},
    {"train", required_argument, NULL, 't'},
    {"output", required_argument, NULL, 'o'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

int rp_cmd_plot(int argc, char **argv) {
  static char prog[] = "reprise plot";
  argv[0] = prog;
  rp_cli_set_usage(plot_usage);
  optind = 1;
  const char *bench = NULL, *train = NULL, *out = NULL;
  int opt;
  while ((opt = getopt_long(argc, argv, "ho:", PLOT_OPTS, NULL)) != -1) {
    if (opt == 'b')
      bench = optarg;
    else if (opt == 't')
      train = optarg;
    else if (opt == 'o')
      out = optarg;
    else if (opt == 'h') {
      plot_usage(stdout);
      return RP_CLI_OK;
    } else {
      return rp_cli_bad_option("plot");
    }
  }
  if (optind < argc)
    return rp_cli_usage_error("plot", "unexpected argument '%s'", argv[optind]);
  if (!bench == !train)
    return rp_cli_usage_error("plot", "give one of --bench and --train");
  if (!out)
    return rp_cli_usage_error("plot", "missing -o OUT.svg|OUT.png");
  if (!*out)
    return rp_cli_usage_error("plot", "--output: an empty file name");
  if (!rp_cli_plot_ext_ok(out))
    return rp_cli_usage_error("plot",
                              "'%s': the output must end in .svg or "
                              ".png",
                              out);
  const char *const outs[][2] = {{"--output", out}};
  const char *const ins[][2] = {{"--bench", bench}, {"--train", train}};
  int orc = rp_cli_check_inputs("plot", ins, 2);
  if (!orc)
    orc = rp_cli_check_not_inputs("plot", outs, 1, ins, 2);
  if (orc || (orc = rp_cli_check_output("plot", "--output", out)))
    return orc;
#ifdef REPRISE_HAVE_CJSON
  plot p = {0};
  int rc = RP_CLI_FAILED;
  if (!read_plot_file(train != NULL, "plot", bench ? bench : train, &p))
    rc = draw("plot", &p, out);
  plot_free(&p);
  return rc;
#else
  rp_cli_say(stderr, "reprise plot: this build has no cJSON to read JSON\n");
  return RP_CLI_FAILED;
#endif
}
