/* test/cli_run.c — see cli_run.h. */
#include "cli_run.h"

#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef REPRISE_CLI_PATH
#error "test/CMakeLists.txt passes the path of the reprise binary"
#endif

void cli_slurp(int fd, char *buf, size_t cap) {
  lseek(fd, 0, SEEK_SET);
  ssize_t n = read(fd, buf, cap - 1);
  buf[n > 0 ? n : 0] = '\0';
  close(fd);
}

enum { TO_TEMP, TO_TTY, TO_CLOSED_PIPE };

/* stdout: a temporary file read back (TO_TEMP, out NULL), a
 * pseudo-terminal (TO_TTY), a pipe without a reader (TO_CLOSED_PIPE) or
 * the file out (nothing read back). */
static void run_cli_on(cli_run *r, const char *const *args, int mode,
                       const char *out, int closed, unsigned long long as_bytes,
                       unsigned nofile) {
  int tty = mode == TO_TTY;
  char *argv[32] = {(char *)"reprise"};
  for (int i = 0; args[i]; i++) {
    cr_assert_lt(i + 2, 32);
    argv[i + 1] = (char *)args[i];
  }
  char outp[] = "/tmp/rp_cli_out_XXXXXX", errp[] = "/tmp/rp_cli_err_XXXXXX";
  int fo = mkstemp(outp), fe = mkstemp(errp);
  cr_assert(fo >= 0 && fe >= 0, "mkstemp");
  unlink(outp);
  unlink(errp);
  int master = -1, slave = -1, to = -1;
  if (mode == TO_CLOSED_PIPE) { /* the write end, its reader gone */
    int p[2];
    cr_assert_eq(pipe(p), 0, "pipe");
    close(p[0]);
    to = p[1];
  } else if (out) {
    to = open(out, O_WRONLY);
    cr_assert_geq(to, 0, "open %s", out);
  }
  if (tty) { /* stdout on a terminal: the child's slave side, read here */
    master = posix_openpt(O_RDWR | O_NOCTTY);
    cr_assert(master >= 0 && grantpt(master) == 0 && unlockpt(master) == 0,
              "a pseudo-terminal");
    slave = open(ptsname(master), O_RDWR | O_NOCTTY);
    cr_assert_geq(slave, 0, "the terminal's slave side");
  }
  pid_t pid = fork();
  cr_assert_geq(pid, 0, "fork");
  if (pid == 0) {
    signal(SIGPIPE, SIG_DFL); /* whatever the runner does: as a shell */
    dup2(to >= 0 ? to : tty ? slave : fo, 1);
    dup2(fe, 2);
    if (closed >= 0)
      close(closed);
    if (as_bytes) {
      struct rlimit rl = {(rlim_t)as_bytes, (rlim_t)as_bytes};
      if (setrlimit(RLIMIT_AS, &rl) != 0 ||
          setenv("OPENBLAS_NUM_THREADS", "1", 1) != 0)
        _exit(126);
    }
    if (nofile) { /* the standard descriptors alone, then the limit */
      struct rlimit rl;
      if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        _exit(126);
      for (rlim_t fd = 3; fd < rl.rlim_cur && fd < 65536; fd++)
        close((int)fd);
      rl.rlim_cur = nofile;
      if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
        _exit(126);
    }
    execv(REPRISE_CLI_PATH, argv);
    _exit(127);
  }
  if (tty) { /* read until the child's side closes (EIO on Linux) */
    close(slave);
    size_t n = 0;
    for (;;) {
      ssize_t k = read(master, r->out + n, sizeof r->out - 1 - n);
      if (k > 0 && (n += (size_t)k) < sizeof r->out - 1)
        continue;
      if (k < 0 && errno == EINTR)
        continue;
      if (k > 0) { /* full: drain the rest so that the child can finish */
        char sink[4096];
        while (read(master, sink, sizeof sink) > 0)
          ;
      }
      break;
    }
    r->out[n] = '\0';
    close(master);
  }
  int ws;
  cr_assert_eq(waitpid(pid, &ws, 0), pid);
  r->status = WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
  if (to >= 0)
    close(to), r->out[0] = '\0';
  if (tty || to >= 0)
    close(fo);
  else
    cli_slurp(fo, r->out, sizeof r->out);
  cli_slurp(fe, r->err, sizeof r->err);
}

void run_cli(cli_run *r, const char *const *args) {
  run_cli_on(r, args, TO_TEMP, NULL, -1, 0, 0);
}

void run_cli_closed(cli_run *r, int fd, const char *const *args) {
  run_cli_on(r, args, TO_TEMP, NULL, fd, 0, 0);
}

void run_cli_tty(cli_run *r, const char *const *args) {
  run_cli_on(r, args, TO_TTY, NULL, -1, 0, 0);
}

void run_cli_to(cli_run *r, const char *out, const char *const *args) {
  run_cli_on(r, args, TO_TEMP, out, -1, 0, 0);
}

void run_cli_closed_pipe(cli_run *r, const char *const *args) {
  run_cli_on(r, args, TO_CLOSED_PIPE, NULL, -1, 0, 0);
}

void run_cli_as(cli_run *r, unsigned long long as_bytes,
                const char *const *args) {
  run_cli_on(r, args, TO_TEMP, NULL, -1, as_bytes, 0);
}

void run_cli_nofile(cli_run *r, unsigned nofile, const char *const *args) {
  run_cli_on(r, args, TO_TEMP, NULL, -1, 0, nofile);
}
