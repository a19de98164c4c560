/* tools/cli.c — option-parsing helpers shared by the commands. */
#include "cli.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef REPRISE_HAVE_MPI
#include <mpi.h>
#endif

#include "engine/env_rules.h"
#include "engine/util.h"
#ifdef REPRISE_HAVE_CJSON
#include "capture/json_strict.h"
#endif

int rp_cli_parse_uint(const char *s, unsigned long lo, unsigned long hi,
                      unsigned long *out) {
  unsigned long long v;
  if (!rp__parse_digits(s, lo, hi, &v))
    return 0;
  *out = (unsigned long)v; /* <= hi */
  return 1;
}

int rp_cli_parse_u32(const char *cmd, const char *opt, const char *s,
                     unsigned long lo, unsigned long hi, uint32_t *out) {
  unsigned long v;
  if (!rp_cli_parse_uint(s, lo, hi, &v))
    return rp_cli_usage_error(cmd, "%s: '%s' is not a number in %lu..%lu", opt,
                              s, lo, hi);
  *out = (uint32_t)v;
  return RP_CLI_OK;
}

int rp_cli_parse_double(const char *s, double *out) {
  /* strtod would skip leading blanks: refuse them, as trailing ones; and
   * it reads C's hexadecimal floats (0x1p-3), which no option means */
  if (!s || !s[0] || isspace((unsigned char)s[0]) || strchr(s, 'x') ||
      strchr(s, 'X'))
    return 0;
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || *end || !isfinite(v))
    return 0;
  *out = v;
  return 1;
}

int rp_cli_parse_bytes(const char *cmd, const char *opt, const char *s,
                       uint64_t hi, uint64_t *out) {
  char *end = NULL;
  unsigned long long v = 0;
  int ok = s && isdigit((unsigned char)s[0]);
  if (ok) {
    errno = 0;
    v = strtoull(s, &end, 10);
    ok = !errno;
  }
  unsigned shift = 0;
  if (ok && *end) {
    const char *units = "KMG", *u = strchr(units, toupper((unsigned char)*end));
    ok = u && end[1] == 0;
    shift = ok ? 10u * (unsigned)(u - units + 1) : 0;
  }
  if (ok && shift && v > (ULLONG_MAX >> shift))
    ok = 0;
  if (ok)
    v <<= shift;
  if (!ok || v < 1 || v > hi)
    return rp_cli_usage_error(cmd,
                              "%s: '%s' is not a byte count in 1..%llu "
                              "(K, M, G suffixes allowed)",
                              opt, s ? s : "", (unsigned long long)hi);
  *out = v;
  return RP_CLI_OK;
}

int rp_cli_parse_backend(const char *cmd, const char *s, rp_backend_kind *b) {
  if (strcmp(s, "cpu") == 0)
    *b = RP_BACKEND_CPU;
  else if (strcmp(s, "cuda") == 0)
    *b = RP_BACKEND_CUDA;
  else if (strcmp(s, "auto") == 0)
    *b = RP_BACKEND_AUTO;
  else
    return rp_cli_usage_error(cmd, "--backend: '%s' is not cpu, cuda or auto",
                              s);
  return RP_CLI_OK;
}

/* rp_cli_say's body: fmt formatted, escaped, then written in one call (a
 * line of one rank does not interleave with another's on a shared
 * stderr). Escaped as \xNN: control bytes but a final newline, DEL, and
 * UTF-8's C1 controls (C2 80..C2 9F: a terminal may act on them). */
__attribute__((format(printf, 2, 0))) static void
say_v(FILE *f, const char *fmt, va_list ap) {
  char small[1024], *b = small;
  va_list aq;
  va_copy(aq, ap);
  int n = vsnprintf(small, sizeof small, fmt, ap);
  if (n >= (int)sizeof small && (b = malloc((size_t)n + 1)) != NULL)
    vsnprintf(b, (size_t)n + 1, fmt, aq);
  va_end(aq);
  if (n < 0) { /* an encoding error: say so rather than nothing */
    fputs("(a message could not be formatted)\n", f);
    return;
  }
  if (!b) { /* no memory for a long message: its first part */
    b = small;
    n = (int)sizeof small - 1;
  }
  char out_small[4096], *out = out_small;
  size_t cap = 4 * (size_t)n + 1; /* each byte at most \xNN */
  if (cap > sizeof out_small && !(out = malloc(cap))) {
    out = out_small; /* no memory: the part that fits */
    cap = sizeof out_small;
    n = (int)(cap - 1) / 4;
  }
  size_t k = 0;
  for (int i = 0; i < n; i++) {
    unsigned char c = (unsigned char)b[i];
    int c1 = c == 0xc2 && i + 1 < n && (unsigned char)b[i + 1] >= 0x80 &&
             (unsigned char)b[i + 1] <= 0x9f;
    if ((c < 0x20 && !(c == '\n' && i == n - 1)) || c == 0x7f || c1 ||
        (c >= 0x80 && c <= 0x9f && i > 0 && (unsigned char)b[i - 1] == 0xc2))
      k += (size_t)snprintf(out + k, cap - k, "\\x%02x", c);
    else
      out[k++] = (char)c;
  }
  fwrite(out, 1, k, f);
  if (out != out_small)
    free(out);
  if (b != small)
    free(b);
}

void rp_cli_say(FILE *f, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  say_v(f, fmt, ap);
  va_end(ap);
}

const char *rp_cli_float_str(char *buf, size_t n, float v) {
  /* between 1e-4 and 1e9 without an exponent: 10, not 1e+01 */
  int plain = fabsf(v) >= 1e-4f && fabsf(v) < 1e9f;
  for (int p = 1; p <= 9; p++)
    if (snprintf(buf, n, "%.*g", p, (double)v) > 0 && strtof(buf, NULL) == v &&
        (!plain || !strchr(buf, 'e')))
      break;
  return buf;
}

int rp_cli_usage_error(const char *cmd, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "reprise %s: ", cmd);
  say_v(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\nTry 'reprise %s --help'.\n", cmd);
  return RP_CLI_USAGE;
}

int rp_cli_each_item(const char *list, int (*each)(const char *item, void *arg),
                     void *arg) {
  char item[64];
  for (const char *p = list;;) {
    size_t len = strcspn(p, ",");
    /* Longer than any name: truncated, it still matches none. */
    size_t n = len < sizeof item ? len : sizeof item - 1;
    memcpy(item, p, n);
    item[n] = '\0';
    int rc = each(item, arg);
    if (rc || p[len] == '\0')
      return rc;
    p += len + 1;
  }
}

/* ---- the environment: REPRISE_* variables (README "Environment") ---- */

/* A variable's value, or NULL when unset or empty (empty counts as unset,
 * as in the library). */
static const char *env_value(const char *var) {
  const char *s = getenv(var);
  return s && *s ? s : NULL;
}

int rp_cli_env_u32(const char *cmd, const char *var, unsigned long lo,
                   unsigned long hi, uint32_t *out, int *set) {
  const char *s = env_value(var);
  if (!s)
    return RP_CLI_OK;
  unsigned long v;
  if (!rp_cli_parse_uint(s, lo, hi, &v))
    return rp_cli_usage_error(cmd, "%s=%s: not a number in %lu..%lu", var, s,
                              lo, hi);
  *out = (uint32_t)v;
  if (set)
    *set = 1;
  return RP_CLI_OK;
}

int rp_cli_env_backend(const char *cmd, rp_backend_kind *b, int *set) {
  const char *s = env_value("REPRISE_BACKEND");
  if (!s)
    return RP_CLI_OK;
  if (strcmp(s, "cpu") == 0)
    *b = RP_BACKEND_CPU;
  else if (strcmp(s, "cuda") == 0)
    *b = RP_BACKEND_CUDA;
  else if (strcmp(s, "auto") == 0)
    *b = RP_BACKEND_AUTO;
  else
    return rp_cli_usage_error(cmd,
                              "REPRISE_BACKEND=%s: not cpu, cuda or "
                              "auto",
                              s);
  if (set)
    *set = 1;
  return RP_CLI_OK;
}

int rp_cli_env_backend_src(const char *cmd, rp_backend_kind *b,
                           const char **src) {
  int set = 0, rc;
  if (!*src && (rc = rp_cli_env_backend(cmd, b, &set)))
    return rc;
  if (set)
    *src = "REPRISE_BACKEND";
  return rp_cli_env_check(cmd);
}

int rp_cli_env_workers(const char *cmd, uint32_t *workers, int *set) {
  int rc = rp_cli_env_u32(cmd, "REPRISE_CPUS", 1, RP_CLI_MAX_WORKERS, workers,
                          set); /* deprecated spelling: WORKERS wins */
  if (!rc)
    rc = rp_cli_env_u32(cmd, "REPRISE_WORKERS", 1, RP_CLI_MAX_WORKERS, workers,
                        set);
  return rc;
}

/* Every REPRISE_* variable a runtime reads, with what each accepts (the
 * library's table): checked by every command that starts a runtime, before
 * any work, as a usage error. */
int rp_cli_env_check(const char *cmd) {
  for (size_t i = 0; i < rp_env_nrules; i++) {
    const rp_env_rule *r = &rp_env_rules[i];
    const char *s = env_value(r->var);
    if (!s || rp__env_rule_accepts(r, s))
      continue;
    if (r->words) { /* "a|b|c" said as "a, b or c", as --backend's */
      char said[128] = "";
      size_t nw = 1;
      for (const char *p = r->words; *p; p++)
        nw += *p == '|';
      const char *p = r->words;
      for (size_t k = 0; k < nw; k++) {
        size_t len = strcspn(p, "|");
        rp_cli_appendf(said, sizeof said, "%s%.*s",
                       k == 0        ? ""
                       : k + 1 == nw ? " or "
                                     : ", ",
                       (int)len, p);
        p += len + (p[len] != 0);
      }
      return rp_cli_usage_error(cmd, "%s=%s: not %s", r->var, s, said);
    }
    return rp_cli_usage_error(cmd, "%s=%s: not a number in %lu..%lu", r->var, s,
                              r->lo, r->hi);
  }
  return RP_CLI_OK;
}

/* ---- output paths, checked before the work ---- */

int rp_cli_check_output(const char *cmd, const char *opt, const char *path) {
  if (!path)
    return RP_CLI_OK;
  if (!*path)
    return rp_cli_usage_error(cmd, "%s: an empty file name", opt);
  /* The writer's own check, without writing: the target is not touched
   * (nothing is lost if the run fails later), a temporary file is created
   * next to it and removed. Other processes may check the same path at
   * the same time (the ranks of `mpiexec reprise train --dist`): each
   * temporary name carries its process id, and another process creating
   * or removing the path itself meanwhile is no error. */
  if (rp_output_check(path) != RP_OK) {
    rp_cli_say(stderr, "reprise %s: %s %s: %s\n", cmd, opt, path,
               rp_error_detail());
    return RP_CLI_FAILED;
  }
  return RP_CLI_OK;
}

/* path's folder, resolved, and its last component: "d/x" and "./d/x"
 * (or a link to d) give the same, whether or not x exists yet. 0 when the
 * folder does not resolve (the output check then says why). */
static int resolve_parent(const char *path, char *out, size_t n) {
  const char *slash = strrchr(path, '/');
  char dir[PATH_MAX], real[PATH_MAX];
  if (!slash)
    strcpy(dir, ".");
  else if (slash == path)
    strcpy(dir, "/");
  else {
    size_t len = (size_t)(slash - path);
    if (len >= sizeof dir)
      return 0;
    memcpy(dir, path, len);
    dir[len] = '\0';
  }
  if (!realpath(dir, real))
    return 0;
  return snprintf(out, n, "%s/%s", real, slash ? slash + 1 : path) < (int)n;
}

static int same_file(const char *a, const char *b) {
  if (!strcmp(a, b))
    return 1;
  struct stat sa, sb;
  if (stat(a, &sa) == 0 && stat(b, &sb) == 0)
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  char ra[2 * PATH_MAX], rb[2 * PATH_MAX];
  return resolve_parent(a, ra, sizeof ra) && resolve_parent(b, rb, sizeof rb) &&
         !strcmp(ra, rb);
}

int rp_cli_check_output_names(const char *cmd, const char *const (*outs)[2],
                              size_t n) {
  for (size_t i = 0; i < n; i++)
    for (size_t j = i + 1; outs[i][1] && j < n; j++)
      if (outs[j][1] && same_file(outs[i][1], outs[j][1]))
        return rp_cli_usage_error(cmd, "%s and %s name the same file '%s'",
                                  outs[i][0], outs[j][0], outs[j][1]);
  return RP_CLI_OK;
}

int rp_cli_check_outputs(const char *cmd, const char *const (*outs)[2],
                         size_t n) {
  int rc = rp_cli_check_output_names(cmd, outs, n);
  if (rc)
    return rc;
  for (size_t i = 0; i < n; i++)
    if ((rc = rp_cli_check_output(cmd, outs[i][0], outs[i][1])))
      return rc;
  return RP_CLI_OK;
}

int rp_cli_check_inputs(const char *cmd, const char *const (*ins)[2],
                        size_t m) {
  for (size_t j = 0; j < m; j++)
    if (ins[j][1] && !ins[j][1][0])
      return rp_cli_usage_error(cmd, "%s: an empty file name", ins[j][0]);
  return RP_CLI_OK;
}

int rp_cli_check_not_inputs(const char *cmd, const char *const (*outs)[2],
                            size_t n, const char *const (*ins)[2], size_t m) {
  for (size_t i = 0; i < n; i++)
    for (size_t j = 0; outs[i][1] && j < m; j++) {
      if (!ins[j][1] || (!strcmp(outs[i][0], "--save-weights") &&
                         !strcmp(ins[j][0], "--load-weights")))
        continue;
      if (same_file(outs[i][1], ins[j][1]))
        return rp_cli_usage_error(cmd,
                                  "%s %s is the %s file: writing it would "
                                  "replace what the run reads",
                                  outs[i][0], outs[i][1], ins[j][0]);
    }
  return RP_CLI_OK;
}

int rp_cli_output_open(const char *cmd, const char *opt, const char *path,
                       rp_output **o) {
  if (rp_output_open(path, o) != RP_OK) {
    rp_cli_say(stderr, "reprise %s: %s %s: %s\n", cmd, opt, path,
               rp_error_detail());
    return RP_CLI_FAILED;
  }
  return RP_CLI_OK;
}

int rp_cli_output_commit(const char *cmd, const char *opt, const char *path,
                         rp_output *o) {
  if (o && rp_output_commit(o) != RP_OK) {
    rp_cli_say(stderr, "reprise %s: %s %s: %s\n", cmd, opt, path,
               rp_error_detail());
    return RP_CLI_FAILED;
  }
  return RP_CLI_OK;
}

void rp_cli_runtime_what(char *buf, size_t n, const char *src,
                         rp_backend_kind b) {
  snprintf(buf, n, "creating the runtime (%s%s%s)", src,
           src[0] == '-' ? " " : "=",
           b == RP_BACKEND_CUDA  ? "cuda"
           : b == RP_BACKEND_CPU ? "cpu"
                                 : "auto");
}

void rp_cli_appendf(char *buf, size_t n, const char *fmt, ...) {
  size_t k = strnlen(buf, n);
  if (k + 1 >= n)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf + k, n - k, fmt, ap);
  va_end(ap);
}

int rp_cli_stdout_reader_gone(int err) {
  struct pollfd p = {.fd = STDOUT_FILENO, .events = POLLOUT};
  return err == EPIPE || (poll(&p, 1, 0) == 1 && (p.revents & POLLERR));
}

void rp_cli_put_quoted(FILE *f, const char *s) {
  size_t i = 0;
  for (; s[i] && i < 64; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c >= 0x20 && c < 0x7f && c != '\\')
      fputc(c, f);
    else
      fprintf(f, "\\x%02x", c);
  }
  if (s[i])
    fputs("...", f);
}

void rp_cli_text_put(rp_cli_text *t, int ch) {
  if (t->held) {
    t->held = 0;
    if (ch >= 0x80 && ch <= 0x9f) { /* C2 80..C2 9F: a C1 control */
      fputc('?', t->f);
      return;
    }
    fputc(0xc2, t->f);
  }
  if (ch == 0xc2)
    t->held = 1;
  else
    fputc(ch == '\n' || ch == '\t' || (ch >= 32 && ch != 127) ? ch : '?', t->f);
}

void rp_cli_text_end(rp_cli_text *t) {
  if (t->held)
    fputc(0xc2, t->f);
  t->held = 0;
}

#ifdef REPRISE_HAVE_CJSON
struct cJSON *rp_cli_json_parse(const char *text, size_t len) {
  cJSON *doc = NULL;
  return rp__json_parse_strict(text, len, len / 6 + 65536, &doc) ? NULL : doc;
}
#else
struct cJSON *rp_cli_json_parse(const char *text, size_t len) {
  (void)text, (void)len;
  rp_error_set(RP_EUNSUPPORTED, "this build has no JSON support");
  return NULL;
}
#endif

void rp_cli_json_num(FILE *f, const char *key, double v, int ok) {
  if (ok && isfinite(v))
    fprintf(f, ",\n  \"%s\": %.9g", key, v);
  else
    fprintf(f, ",\n  \"%s\": null", key);
}

size_t rp_cli_utf8_len(const unsigned char *p) {
  unsigned c = p[0];
  size_t n = c < 0x80                 ? 1
             : c >= 0xc2 && c <= 0xdf ? 2
             : (c & 0xf0) == 0xe0     ? 3
             : c >= 0xf0 && c <= 0xf4 ? 4
                                      : 0;
  for (size_t i = 1; i < n; i++)
    if ((p[i] & 0xc0) != 0x80)
      return 0;
  if ((c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] >= 0xa0) ||
      (c == 0xf0 && p[1] < 0x90) || (c == 0xf4 && p[1] >= 0x90))
    return 0;
  return n;
}

void rp_cli_json_str(FILE *f, const char *key, const char *s) {
  fprintf(f, ",\n  \"%s\": ", key);
  if (!s) {
    fprintf(f, "null");
    return;
  }
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)s; *p;) {
    size_t n = rp_cli_utf8_len(p);
    if (*p == '"' || *p == '\\')
      fprintf(f, "\\%c", *p);
    else if (*p < 0x20 || *p == 0x7f)
      fprintf(f, "\\u%04x", *p);
    else if (n)
      fwrite(p, 1, n, f);
    else
      fputs("\\ufffd", f); /* not UTF-8: the replacement character */
    p += n ? n : 1;
  }
  fputc('"', f);
}

/* ---- usage ---- */

static void (*cur_usage)(FILE *f);

void rp_cli_set_usage(void (*usage)(FILE *f)) {
  cur_usage = usage;
}

static int help_errno;

void rp_cli_print_help(void (*usage)(FILE *f)) {
  errno = 0; /* what a failed write of the text sets stays */
  usage(stdout);
  if ((fflush(stdout) != 0 || ferror(stdout)) && !help_errno)
    help_errno = errno;
}

int rp_cli_stdout_errno(void) {
  return help_errno;
}

int rp_cli_bad_option(const char *cmd) {
  fputc('\n', stderr);
  if (cur_usage)
    cur_usage(stderr);
  else
    fprintf(stderr, "Try 'reprise %s --help'.\n", cmd);
  return RP_CLI_USAGE;
}

/* ---- --dist: options parsed once MPI runs ---- */

int rp_cli_wants_dist(int argc, char **argv) {
  const char *launched[] = {"PMI_SIZE", "PMI_RANK", "PMIX_RANK",
                            "OMPI_COMM_WORLD_SIZE"};
  int under = 0;
  for (size_t k = 0; k < sizeof launched / sizeof *launched; k++)
    under |= getenv(launched[k]) != NULL;
  for (int i = 1; under && i < argc; i++) {
    if (!strcmp(argv[i], "--"))
      return 0;
    size_t n = strlen(argv[i]);
    if (n >= 4 && n <= 6 && !strncmp(argv[i], "--dist", n))
      return 1;
  }
  return 0;
}

#ifdef REPRISE_HAVE_MPI
/* parse with this process's stdout and stderr sent to /dev/null. */
static int parse_quiet(rp_cli_parse_fn parse, int argc, char **argv,
                       void *out) {
  fflush(stdout);
  fflush(stderr);
  int o = dup(1), e = dup(2), n = open("/dev/null", O_WRONLY | O_CLOEXEC);
  int quiet = o >= 0 && e >= 0 && n >= 0; /* else parse aloud */
  if (quiet) {
    dup2(n, 1);
    dup2(n, 2);
  }
  int rc = parse(argc, argv, out);
  fflush(stdout);
  fflush(stderr);
  if (quiet) {
    dup2(o, 1);
    dup2(e, 2);
  }
  int fds[3] = {o, e, n};
  for (int k = 0; k < 3; k++)
    if (fds[k] >= 0)
      close(fds[k]);
  return rc;
}

int rp_cli_parse_dist(const char *cmd, int argc, char **argv,
                      rp_cli_parse_fn parse, void *out, size_t size) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int rc =
      rank == 0 ? parse(argc, argv, out) : parse_quiet(parse, argc, argv, out);
  int v[2] = {rc, -rc}, m[2] = {0, 0}, r0 = rc;
  MPI_Allreduce(v, m, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (m[0] == -m[1]) /* one verdict: rank 0 said it */
    return rc;
  MPI_Bcast(&r0, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (rc != r0 && rc != 0) {
    fprintf(stderr,
            "reprise %s: rank %d: refuses its options (rank 0 %s its "
            "own):\n",
            cmd, rank, r0 ? "refused" : "accepted");
    memset(out, 0, size);
    (void)parse(argc, argv, out);
  } else if (rc == 0 && r0 == 0 && rank == 0) {
    fprintf(stderr, "reprise %s: rank 0: another rank refused its options\n",
            cmd);
  }
  return m[0] > 0 ? m[0] : RP_CLI_USAGE; /* one status: launchers merge them */
}

int rp_cli_same_inputs(const char *cmd, const rp_cli_input *in, unsigned n) {
  if (n == 0 || n > 8)
    return RP_CLI_OK;
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  unsigned long long mine[8];
  for (unsigned k = 0; k < n; k++)
    mine[k] = in[k].h;
  unsigned long long *all = calloc((size_t)size * n, sizeof *all);
  int ok = all != NULL, every = 0;
  MPI_Allreduce(&ok, &every, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!every) {
    free(all);
    fprintf(stderr,
            "reprise %s: rank %d: --dist: out of memory comparing the "
            "ranks' inputs\n",
            cmd, rank);
    return RP_CLI_FAILED;
  }
  MPI_Allgather(mine, (int)n, MPI_UNSIGNED_LONG_LONG, all, (int)n,
                MPI_UNSIGNED_LONG_LONG, MPI_COMM_WORLD);
  char msg[512] = "";
  unsigned differ = 0;
  for (int r = 1; r < size; r++) {
    char what[256] = "";
    for (unsigned k = 0; k < n; k++)
      if (all[(size_t)r * n + k] != all[k])
        rp_cli_appendf(what, sizeof what, "%s%s", what[0] ? ", " : "",
                       in[k].what);
    if (what[0] && differ++ < 4)
      rp_cli_appendf(msg, sizeof msg, "; rank %d: %s", r, what);
  }
  free(all);
  if (!differ)
    return RP_CLI_OK;
  if (rank == 0) {
    if (differ > 4)
      rp_cli_appendf(msg, sizeof msg, "; %u more rank%s", differ - 4,
                     differ - 4 == 1 ? "" : "s");
    rp_cli_usage_error(cmd,
                       "--dist: ranks given other inputs than rank 0's "
                       "(every rank must run the same command on the same "
                       "files): %s",
                       msg + 2);
  }
  return RP_CLI_USAGE;
}
#else
int rp_cli_parse_dist(const char *cmd, int argc, char **argv,
                      rp_cli_parse_fn parse, void *out, size_t size) {
  (void)cmd, (void)size;
  return parse(argc, argv, out);
}
int rp_cli_same_inputs(const char *cmd, const rp_cli_input *in, unsigned n) {
  (void)cmd, (void)in, (void)n;
  return RP_CLI_OK;
}
#endif
