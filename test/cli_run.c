/* test/cli_run.c — see cli_run.h. */
#include "cli_run.h"

#include <criterion/criterion.h>

#include <stdlib.h>
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

void run_cli(cli_run *r, const char *const *args) {
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
  pid_t pid = fork();
  cr_assert_geq(pid, 0, "fork");
  if (pid == 0) {
    dup2(fo, 1);
    dup2(fe, 2);
    execv(REPRISE_CLI_PATH, argv);
    _exit(127);
  }
  int ws;
  cr_assert_eq(waitpid(pid, &ws, 0), pid);
  r->status = WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
  cli_slurp(fo, r->out, sizeof r->out);
  cli_slurp(fe, r->err, sizeof r->err);
}
