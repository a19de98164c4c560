/* test/comm/driver.c — see driver.h. */
#define _GNU_SOURCE
#include "driver.h"

#include <dirent.h>
#include <fcntl.h>
#include <glob.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int drv_fails;
static const char *DIR_;

void check(int ok, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(ok ? stdout : stderr, ok ? "ok   " : "FAIL ");
  vfprintf(ok ? stdout : stderr, fmt, ap);
  fprintf(ok ? stdout : stderr, "\n");
  va_end(ap);
  drv_fails += !ok;
}

int drv_mkdir(char *template_) {
  if (!mkdtemp(template_))
    return -1;
  DIR_ = template_;
  return 0;
}

int drv_finish(int n) {
  DIR *d = NULL;
  if (DIR_ && drv_fails) {
    fprintf(stderr, "files kept in %s\n", DIR_);
  } else if (DIR_ && (d = opendir(DIR_)) != NULL) {
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
      if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
        unlink(path(e->d_name));
    closedir(d);
    rmdir(DIR_);
  }
  printf("%s: %d ranks, %d failed\n", drv_fails ? "FAILED" : "passed", n,
         drv_fails);
  return drv_fails ? 1 : 0;
}

char *path(const char *name) {
  static char buf[8][512];
  static int k;
  char *p = buf[k++ % 8];
  snprintf(p, sizeof buf[0], "%s/%s", DIR_, name);
  return p;
}

int drv_count_files(const char *pattern) {
  glob_t g;
  int n = glob(path(pattern), 0, NULL, &g) == 0 ? (int)g.gl_pathc : 0;
  globfree(&g);
  return n;
}

/* A wrapper script `name` that runs rank1 (a shell line) on rank 1 alone,
 * then execs its command; NULL when it cannot be written. */
static const char *rank1_wrapper(const char *name, const char *rank1) {
  const char *sh = path(name);
  FILE *f = fopen(sh, "w");
  if (!f)
    return NULL;
  fprintf(f,
          "if [ \"${PMI_RANK:-${OMPI_COMM_WORLD_RANK:-0}}\" = 1 ]; then\n"
          "  %s\n"
          "fi\n"
          "exec \"$@\"\n",
          rank1);
  return fclose(f) ? NULL : sh;
}

const char *drv_rank1_script(const char *name, const char *extra) {
  char line[1024];
  if (snprintf(line, sizeof line, "exec \"$@\" %s", extra) >= (int)sizeof line)
    return NULL; /* too long to write whole */
  return rank1_wrapper(name, line);
}

const char *drv_rank1_freeze_script(const char *name, unsigned stop_s,
                                    unsigned hold_s) {
  char line[160];
  snprintf(line, sizeof line,
           "(sleep %u; kill -STOP $$; sleep %u; kill -KILL $$) "
           ">/dev/null 2>&1 &",
           stop_s, hold_s);
  return rank1_wrapper(name, line);
}

char *slurp(const char *p, size_t *len) {
  FILE *f = fopen(p, "rb");
  if (!f)
    return NULL;
  size_t cap = 4096, n = 0;
  char *b = malloc(cap);
  size_t got;
  while (b && (got = fread(b + n, 1, cap - n - 1, f)) > 0) {
    n += got;
    if (n + 1 == cap) {
      char *nb = realloc(b, cap *= 2);
      if (!nb)
        free(b);
      b = nb;
    }
  }
  fclose(f);
  if (b)
    b[n] = '\0';
  if (len)
    *len = n;
  return b;
}

int run(char *const *argv, const char *log) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
      _exit(126);
    dup2(fd, 1);
    dup2(fd, 2);
    close(fd);
    execvp(argv[0], argv);
    _exit(127);
  }
  int ws;
  if (pid < 0 || waitpid(pid, &ws, 0) != pid)
    return -1;
  return WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
}

const char *json_value(const char *json, const char *key) {
  char k[64];
  snprintf(k, sizeof k, "\"%s\":", key);
  const char *p = json ? strstr(json, k) : NULL;
  if (!p)
    return NULL;
  p += strlen(k);
  while (*p == ' ')
    p++;
  return p;
}

int count(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = hay; p && (p = strstr(p, needle)); p++)
    n++;
  return n;
}

static const char *reprise_bin, *mpiexec_bin, *npflag;

int drv_args(int argc, char **argv) {
  int n = argc == 5 ? atoi(argv[4]) : 0;
  if (n < 1) {
    fprintf(stderr, "usage: %s REPRISE MPIEXEC NUMPROC_FLAG N\n", argv[0]);
    return 0;
  }
  reprise_bin = argv[1];
  mpiexec_bin = argv[2];
  npflag = argv[3];
  return n;
}

int drv_reprise(int np, const char *tag, const char *const *a,
                const char *const *b) {
  return drv_reprise_wrapped(np, tag, NULL, a, b);
}

int drv_reprise_wrapped(int np, const char *tag, const char *wrapper,
                        const char *const *a, const char *const *b) {
  char *argv[96];
  char nps[16];
  size_t k = 0, cap = sizeof argv / sizeof *argv - 1;
  if (np > 0) {
    snprintf(nps, sizeof nps, "%d", np);
    argv[k++] = (char *)mpiexec_bin;
    argv[k++] = (char *)npflag;
    argv[k++] = nps;
  }
  if (wrapper) {
    argv[k++] = (char *)"sh";
    argv[k++] = (char *)wrapper;
  }
  argv[k++] = (char *)reprise_bin;
  for (; a && *a && k < cap; a++)
    argv[k++] = (char *)*a;
  for (; b && *b && k < cap; b++)
    argv[k++] = (char *)*b;
  argv[k] = NULL;
  char log[64];
  snprintf(log, sizeof log, "%s.log", tag);
  int st = run(argv, path(log));
  if (st != 0 && st != 2) { /* show why */
    char *out = slurp(path(log), NULL);
    fprintf(stderr, "--- %s (exit %d):\n%s---\n", tag, st, out ? out : "");
    free(out);
  }
  return st;
}
