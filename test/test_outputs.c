/* test/test_outputs.c — nothing a user writes is ever lost. The
 * one output writer (reprise.h "Output files": rp_output_*,
 * rp_file_write_atomic), the library writers that go through it (graph
 * files, traces, checkpoints, data files), the checkpoint container
 * (train/ckpt.h), the bounded reader's argument checks, and the kill test:
 * `reprise train --save-weights F` SIGKILLed at random moments, F always
 * loads as the old or the new checkpoint. Runs under ASan and TSan in CI
 * (the misuse suites' builds). */
#include "helpers.h"

#include "cli_run.h"
#include "train/ckpt.h"
#include "train/data.h"
#include "train/mlp.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int has(const char *hay, const char *needle) {
  return strstr(hay, needle) != NULL;
}

static void tmpdir(void) {
  th_tmpdir_make("/tmp/rp_out_XXXXXX");
}

static void put(const char *path, const char *text) {
  FILE *f = fopen(path, "wb");
  cr_assert_not_null(f, "%s: %s", path, strerror(errno));
  cr_assert_eq(fwrite(text, 1, strlen(text), f), strlen(text));
  cr_assert_eq(fclose(f), 0);
}

/* The files of dir (dot files included, . and .. not). */
static int entries(const char *dir) {
  DIR *d = opendir(dir);
  cr_assert_not_null(d);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
  closedir(d);
  return n;
}

static const char *dir_of_tmp(void) {
  static char d[512];
  snprintf(d, sizeof d, "%s", th_tmp_path("x"));
  *strrchr(d, '/') = 0;
  return d;
}

/* A listening-free UNIX socket bound at path. */
static int make_socket(const char *path) {
  int s = socket(AF_UNIX, SOCK_STREAM, 0);
  cr_assert_geq(s, 0);
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  cr_assert_lt(strlen(path), sizeof a.sun_path);
  strcpy(a.sun_path, path);
  cr_assert_eq(bind(s, (struct sockaddr *)&a, sizeof a), 0, "bind: %s",
               strerror(errno));
  return s;
}

/* ---- the writer ---- */

Test(outputs, the_target_changes_only_at_commit_and_no_file_is_left) {
  tmpdir();
  const char *p = th_tmp_path("out.txt");
  put(p, "old\n");
  rp_output *o;
  RP_CHECK(rp_output_open(p, &o));
  FILE *f = rp_output_file(o);
  cr_assert_not_null(f);
  fputs("new, longer than the old\n", f);
  fflush(f);
  char *t = th_read_all(p, NULL);
  cr_assert_str_eq(t, "old\n", "the target changed before the commit");
  free(t);
  cr_assert_eq(entries(dir_of_tmp()), 2, "the temporary file is beside it");
  RP_CHECK(rp_output_commit(o));
  t = th_read_all(p, NULL);
  cr_assert_str_eq(t, "new, longer than the old\n");
  free(t);
  cr_assert_eq(entries(dir_of_tmp()), 1, "a temporary file was left");
  /* abort: the target as it was, nothing left */
  RP_CHECK(rp_output_open(p, &o));
  fputs("half", rp_output_file(o));
  rp_output_abort(o);
  rp_output_abort(NULL);
  t = th_read_all(p, NULL);
  cr_assert_str_eq(t, "new, longer than the old\n");
  free(t);
  cr_assert_eq(entries(dir_of_tmp()), 1);
  /* a new file, in one call */
  const char *q = th_tmp_path("new.bin");
  RP_CHECK(rp_file_write_atomic(q, "abc", 3));
  t = th_read_all(q, NULL);
  cr_assert_str_eq(t, "abc");
  free(t);
  RP_CHECK(rp_file_write_atomic(q, NULL, 0));
  struct stat sb;
  cr_assert_eq(stat(q, &sb), 0);
  cr_assert_eq(sb.st_size, 0);
  cr_assert_eq(entries(dir_of_tmp()), 2);
  th_tmpdir_remove();
}

/* rp_output_discard_all (a signal handler's call) removes the temporary
 * files of every output open, however many (past the 32 slots of its
 * first chunk, and of its second), and nothing else; the outputs abort as
 * usual afterwards. */
Test(outputs, discard_all_removes_the_open_outputs_temporary_files) {
  tmpdir();
  enum { NO = 70 };
  rp_output *o[NO];
  char keep[256]; /* th_tmp_path's buffers rotate */
  snprintf(keep, sizeof keep, "%s", th_tmp_path("keep.txt"));
  put(keep, "kept\n");
  for (int i = 0; i < NO; i++) {
    char name[32];
    snprintf(name, sizeof name, "out%d.txt", i);
    RP_CHECK(rp_output_open(th_tmp_path(name), &o[i]));
    fputs("half", rp_output_file(o[i]));
  }
  cr_assert_eq(entries(dir_of_tmp()), 1 + NO);
  rp_output_discard_all();
  cr_assert_eq(entries(dir_of_tmp()), 1,
               "every open output's temporary file goes");
  for (int i = 0; i < NO; i++)
    rp_output_abort(o[i]);
  cr_assert_eq(entries(dir_of_tmp()), 1, "only keep.txt");
  char *t = th_read_all(keep, NULL);
  cr_assert_str_eq(t, "kept\n");
  free(t);
  /* the slots are free again, the later chunks' too */
  for (int i = 0; i < NO; i++) {
    char name[32];
    snprintf(name, sizeof name, "again%d.txt", i);
    RP_CHECK(rp_output_open(th_tmp_path(name), &o[i]));
  }
  rp_output_discard_all();
  cr_assert_eq(entries(dir_of_tmp()), 1);
  for (int i = 0; i < NO; i++)
    rp_output_abort(o[i]);
  th_tmpdir_remove();
}

/* test_outputs links with the linker's --wrap=open (test/CMakeLists.txt):
 * when signal_after_open is set, the next open() of a temporary file
 * raises SIGUSR1 as soon as it returns, a signal that lands right after
 * the file is created. */
int __real_open(const char *path, int flags, ...);
static volatile sig_atomic_t signal_after_open, discarded;

int __wrap_open(const char *path, int flags, ...) {
  mode_t mode = 0;
  if (flags & (O_CREAT | O_TMPFILE)) {
    va_list ap;
    va_start(ap, flags);
    mode = (mode_t)va_arg(ap, int);
    va_end(ap);
  }
  int fd = __real_open(path, flags, mode);
  if (fd >= 0 && signal_after_open && strstr(path, ".tmp.")) {
    signal_after_open = 0;
    raise(SIGUSR1);
  }
  return fd;
}

static void discard_on_signal(int sig) {
  (void)sig;
  rp_output_discard_all();
  discarded = 1;
}

/* A signal whose handler calls rp_output_discard_all right after
 * rp_output_open created its temporary file, before the open returned,
 * removes that file: the file is listed for the handler before it is
 * created (it was listed after, and stayed). */
Test(outputs, discard_all_in_a_signal_right_after_the_create_removes_it) {
  tmpdir();
  struct sigaction sa = {.sa_handler = discard_on_signal}, old;
  sigemptyset(&sa.sa_mask);
  cr_assert_eq(sigaction(SIGUSR1, &sa, &old), 0);
  rp_output *o;
  signal_after_open = 1, discarded = 0;
  RP_CHECK(rp_output_open(th_tmp_path("out.txt"), &o));
  cr_assert(discarded, "the open raised no signal (the --wrap=open)");
  cr_assert_eq(entries(dir_of_tmp()), 0,
               "the temporary file created just before the signal is left");
  rp_output_abort(o);
  cr_assert_eq(entries(dir_of_tmp()), 0);
  cr_assert_eq(sigaction(SIGUSR1, &old, NULL), 0);
  th_tmpdir_remove();
}

Test(outputs, arguments_are_checked) {
  rp_output *o = (rp_output *)&o;
  RP_EXPECT(rp_output_open(NULL, &o), RP_EINVAL);
  cr_assert_null(o, "*out is NULL on error");
  RP_EXPECT(rp_output_open("", &o), RP_EINVAL);
  cr_assert(has(rp_error_detail(), "empty"), "%s", rp_error_detail());
  RP_EXPECT(rp_output_open("/tmp/x", NULL), RP_EINVAL);
  RP_EXPECT(rp_output_commit(NULL), RP_EINVAL);
  cr_assert_null(rp_output_file(NULL));
  RP_EXPECT(rp_file_write_atomic("/tmp/x", NULL, 3), RP_EINVAL);
  RP_EXPECT(rp_output_check(NULL), RP_EINVAL);
  RP_EXPECT(rp_output_open("/nonexistent-dir/x", &o), RP_EIO);
  cr_assert(has(rp_error_detail(), "No such file"), "%s", rp_error_detail());
}

/* Every kind of path that is not a regular file is refused by name before
 * anything is written, and stays what it was. */
Test(outputs, devices_fifos_sockets_directories_are_refused_by_kind) {
  tmpdir();
  const char *fifo = th_tmp_path("fifo");
  cr_assert_eq(mkfifo(fifo, 0600), 0);
  const char *sock = th_tmp_path("sock");
  int s = make_socket(sock);
  const char *dir = th_tmp_path("dir");
  cr_assert_eq(mkdir(dir, 0700), 0);
  const char *dangling = th_tmp_path("dangling");
  cr_assert_eq(symlink(th_tmp_path("nothing"), dangling), 0);
  const char *link_fifo = th_tmp_path("link-to-fifo");
  cr_assert_eq(symlink(fifo, link_fifo), 0);
  struct {
    const char *path, *kind;
    mode_t type;
  } odd[] = {
      {"/dev/null", "a character device", S_IFCHR},
      {fifo, "a FIFO", S_IFIFO},
      {sock, "a socket", S_IFSOCK},
      {dir, "a directory", S_IFDIR},
      {link_fifo, "a FIFO", S_IFLNK},
      {dangling, "dangling", S_IFLNK},
  };
  for (size_t k = 0; k < sizeof odd / sizeof odd[0]; k++) {
    rp_output *o;
    RP_EXPECT(rp_output_open(odd[k].path, &o), RP_EINVAL);
    cr_assert(has(rp_error_detail(), odd[k].kind), "%s: %s", odd[k].path,
              rp_error_detail());
    /* a directory is told to name a file in it, not about renaming */
    if (odd[k].type == S_IFDIR)
      cr_assert(has(rp_error_detail(), "name one inside it") &&
                    !has(rp_error_detail(), "renaming"),
                "%s", rp_error_detail());
    RP_EXPECT(rp_output_check(odd[k].path), RP_EINVAL);
    RP_EXPECT(rp_file_write_atomic(odd[k].path, "x", 1), RP_EINVAL);
    /* the library's own writers refuse it the same way */
    RP_EXPECT(rp_ckpt_save(odd[k].path, "mlp", 1, "x", 1), RP_EINVAL);
    cr_assert(has(rp_error_detail(), odd[k].kind), "%s", rp_error_detail());
    rp_dataset d;
    RP_CHECK(rp_data_generate(RP_DATA_BLOBS, 8, 2, 2, 1, &d));
    RP_EXPECT(rp_data_save(&d, odd[k].path, 1), RP_EINVAL);
    rp_data_free(&d);
    struct stat sb;
    cr_assert_eq(lstat(odd[k].path, &sb), 0);
    cr_assert_eq(sb.st_mode & S_IFMT, odd[k].type, "%s changed kind",
                 odd[k].path);
  }
  cr_assert_eq(entries(dir_of_tmp()), 5, "a temporary file was left");
  close(s);
  th_tmpdir_remove();
}

/* The file standard output or error goes to is refused, named or through
 * /dev/stdout and /dev/stderr (replacing it would drop what the process
 * wrote there), and /dev/stdout on a pipe is a FIFO, not a dangling link
 * (its magic link names "pipe:[N]"). */
Test(outputs, the_files_behind_standard_output_and_error_are_refused) {
  tmpdir();
  const char *out = th_tmp_path("out.txt");
  for (int fd = 1; fd <= 2; fd++) {
    fflush(NULL);
    int saved = dup(fd);
    int f = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    cr_assert(saved >= 0 && f >= 0);
    cr_assert_eq(dup2(f, fd), fd);
    close(f);
    cr_assert_eq(write(fd, "kept\n", 5), 5);
    const char *names[] = {out, fd == 1 ? "/dev/stdout" : "/dev/stderr"};
    rp_status st[2];
    char detail[2][512];
    for (int k = 0; k < 2; k++) {
      rp_output *o;
      st[k] = rp_output_open(names[k], &o);
      snprintf(detail[k], sizeof detail[k], "%s", rp_error_detail());
    }
    cr_assert_eq(dup2(saved, fd), fd);
    close(saved);
    for (int k = 0; k < 2; k++) {
      cr_assert_eq(st[k], RP_EINVAL, "%s on fd %d: %s", names[k], fd,
                   rp_status_name(st[k]));
      cr_assert(has(detail[k], fd == 1 ? "standard output" : "standard error"),
                "%s", detail[k]);
    }
    size_t len;
    char *back = th_read_all(out, &len);
    cr_assert(len == 5 && !memcmp(back, "kept\n", 5), "the file changed");
    free(back);
  }
  int p[2];
  cr_assert_eq(pipe(p), 0);
  fflush(stdout);
  int saved = dup(1);
  cr_assert_eq(dup2(p[1], 1), 1);
  rp_output *o;
  rp_status st = rp_output_open("/dev/stdout", &o);
  char detail[512];
  snprintf(detail, sizeof detail, "%s", rp_error_detail());
  cr_assert_eq(dup2(saved, 1), 1);
  close(saved);
  close(p[0]);
  close(p[1]);
  cr_assert_eq(st, RP_EINVAL);
  cr_assert(has(detail, "a FIFO"), "%s", detail);
  cr_assert_eq(entries(dir_of_tmp()), 1, "a temporary file was left");
  th_tmpdir_remove();
}

/* The target turned into a FIFO between open and commit: the rename does
 * not replace it. */
Test(outputs, a_target_that_changes_kind_before_the_commit_is_kept) {
  tmpdir();
  const char *p = th_tmp_path("out");
  put(p, "old");
  rp_output *o;
  RP_CHECK(rp_output_open(p, &o));
  fputs("new", rp_output_file(o));
  cr_assert_eq(unlink(p), 0);
  cr_assert_eq(mkfifo(p, 0600), 0);
  RP_EXPECT(rp_output_commit(o), RP_EINVAL);
  cr_assert(has(rp_error_detail(), "a FIFO"), "%s", rp_error_detail());
  struct stat sb;
  cr_assert_eq(lstat(p, &sb), 0);
  cr_assert(S_ISFIFO(sb.st_mode), "the FIFO was replaced");
  cr_assert_eq(entries(dir_of_tmp()), 1, "a temporary file was left");
  th_tmpdir_remove();
}

/* A link to a regular file stays a link; the file it names is replaced,
 * with its permission bits. */
Test(outputs, links_stay_links_and_modes_are_kept) {
  tmpdir();
  const char *real = th_tmp_path("real");
  put(real, "old");
  cr_assert_eq(chmod(real, 0640), 0);
  const char *link = th_tmp_path("link");
  cr_assert_eq(symlink(real, link), 0);
  RP_CHECK(rp_file_write_atomic(link, "new", 3));
  struct stat sb;
  cr_assert_eq(lstat(link, &sb), 0);
  cr_assert(S_ISLNK(sb.st_mode), "the link was replaced by a file");
  char *t = th_read_all(real, NULL);
  cr_assert_str_eq(t, "new");
  free(t);
  cr_assert_eq(stat(real, &sb), 0);
  cr_assert_eq(sb.st_mode & 07777, 0640, "mode %o", sb.st_mode & 07777);
  /* a new file: 0666 less the umask */
  mode_t old = umask(022);
  const char *fresh = th_tmp_path("fresh");
  RP_CHECK(rp_file_write_atomic(fresh, "x", 1));
  umask(old);
  cr_assert_eq(stat(fresh, &sb), 0);
  cr_assert_eq(sb.st_mode & 07777, 0644, "mode %o", sb.st_mode & 07777);
  th_tmpdir_remove();
}

/* A replaced file keeps its owner and group where the caller may give
 * them: root replacing a user's file leaves it the user's (a 0600 file
 * the user could no longer read otherwise). Root only. */
Test(outputs, a_replaced_file_keeps_its_owner_and_group) {
  if (geteuid() != 0)
    cr_skip_test("giving a file to another user takes root");
  tmpdir();
  const char *p = th_tmp_path("theirs");
  put(p, "old");
  const char *lp = th_tmp_path("link");
  cr_assert_eq(symlink(p, lp), 0);
  cr_assert_eq(chown(p, 65534, 65534), 0, "%s", strerror(errno));
  cr_assert_eq(chmod(p, 0600), 0);
  RP_CHECK(rp_file_write_atomic(p, "new", 3));
  struct stat sb;
  cr_assert_eq(stat(p, &sb), 0);
  cr_assert(sb.st_uid == 65534 && sb.st_gid == 65534,
            "owner %u:%u, not the previous file's 65534:65534",
            (unsigned)sb.st_uid, (unsigned)sb.st_gid);
  cr_assert_eq(sb.st_mode & 07777, 0600, "mode %o", sb.st_mode & 07777);
  /* through a link, and through the library's own writers */
  RP_CHECK(rp_ckpt_save(lp, "mlp", 1, "x", 1));
  cr_assert_eq(stat(p, &sb), 0);
  cr_assert(sb.st_uid == 65534 && sb.st_gid == 65534, "owner %u:%u",
            (unsigned)sb.st_uid, (unsigned)sb.st_gid);
  /* a new file is the caller's */
  const char *q = th_tmp_path("mine");
  RP_CHECK(rp_file_write_atomic(q, "x", 1));
  cr_assert_eq(stat(q, &sb), 0);
  cr_assert(sb.st_uid == 0 && sb.st_gid == getegid(), "owner %u:%u",
            (unsigned)sb.st_uid, (unsigned)sb.st_gid);
  th_tmpdir_remove();
}

/* Another user's file in a directory with the sticky bit (as /tmp) is
 * refused at the open and by rp_output_check, before any work, although
 * the file is writable: the rename at the commit would fail (EPERM) after
 * the work. Root only (it takes a second user). */
Test(outputs, another_users_file_in_a_sticky_directory_is_refused_early) {
  if (geteuid() != 0)
    cr_skip_test("a second user takes root");
  tmpdir();
  char dir[256], p[272];
  snprintf(dir, sizeof dir, "%s", th_tmp_path("sticky"));
  snprintf(p, sizeof p, "%s/theirs", dir);
  cr_assert_eq(chmod(dir_of_tmp(), 0755), 0); /* for the second user */
  cr_assert_eq(mkdir(dir, 01777), 0);
  cr_assert_eq(chmod(dir, 01777), 0); /* past the umask */
  put(p, "old");
  cr_assert_eq(chmod(p, 0666), 0);
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) { /* as user 65534: 0 refused as said, 1 not refused, 2.. */
    if (setgid(65534) || setuid(65534))
      _exit(9);
    rp_status c = rp_output_check(p);
    int said = has(rp_error_detail(), "sticky") &&
               has(rp_error_detail(), "Operation not permitted");
    rp_status w = rp_file_write_atomic(p, "new", 3);
    _exit(c == RP_EIO && w == RP_EIO && said ? 0 : c == RP_OK ? 1 : 2);
  }
  int ws;
  cr_assert_eq(waitpid(pid, &ws, 0), pid);
  cr_assert(WIFEXITED(ws), "the child did not exit");
  cr_assert_eq(WEXITSTATUS(ws), 0,
               "exit %d (1: the check passed, 2: another error or message, "
               "9: setuid failed)",
               WEXITSTATUS(ws));
  char *t = th_read_all(p, NULL);
  cr_assert_str_eq(t, "old");
  free(t);
  DIR *d = opendir(dir);
  cr_assert_not_null(d);
  int n = 0;
  for (struct dirent *e; (e = readdir(d));)
    n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
  closedir(d);
  cr_assert_eq(n, 1, "a temporary file was left");
  /* its owner (root here) replaces it as before */
  RP_CHECK(rp_file_write_atomic(p, "mine", 4));
  th_tmpdir_remove();
}

#if defined(__SANITIZE_ADDRESS__)
#define OUT_LEAK_CHECK 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define OUT_LEAK_CHECK 1
#endif
#endif
#ifdef OUT_LEAK_CHECK
#include <sanitizer/lsan_interface.h>
#endif

/* From now on fchmod fails with EPERM in this process (a seccomp
 * filter): the stand-in for a file system that refuses it. 0 when set. */
static int fchmod_fails(void) {
#ifdef SYS_fchmod
  struct sock_filter f[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_fchmod, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
  struct sock_fprog prog = {sizeof f / sizeof *f, f};
  return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
         prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
#else
  return -1;
#endif
}

/* The refusals of rp_output_open a user who is not root meets (root may
 * write any file): an existing file the user may not write ("cannot
 * write"), and a replaced file whose permission bits cannot be set on the
 * new one ("cannot set the permissions", fchmod failing). Each RP_EIO with
 * its cause, through rp_output_check and rp_file_write_atomic, the file
 * as it was, no temporary file left, nothing leaked. As user 65534 in a
 * child where the test runs as root. */
Test(outputs, refusals_for_a_user_who_is_not_root) {
  tmpdir();
  char dir[256], ro[300], rw[300];
  snprintf(dir, sizeof dir, "%s", th_tmp_path("user"));
  snprintf(ro, sizeof ro, "%s/read-only", dir);
  snprintf(rw, sizeof rw, "%s/theirs", dir);
  cr_assert_eq(chmod(dir_of_tmp(), 0755), 0); /* for the second user */
  cr_assert_eq(mkdir(dir, 0777), 0);
  cr_assert_eq(chmod(dir, 0777), 0); /* past the umask */
  int msg[2];
  cr_assert_eq(pipe(msg), 0);
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) { /* exits with the failed step; its detail on the pipe */
    close(msg[0]);
    int step = 0;
    const char *detail = "";
#define STEP(ok)                                                               \
  do {                                                                         \
    step++;                                                                    \
    if (!(ok)) {                                                               \
      detail = rp_error_detail();                                              \
      goto out;                                                                \
    }                                                                          \
  } while (0)
    STEP(geteuid() != 0 || (setgid(65534) == 0 && setuid(65534) == 0));
    FILE *f = fopen(ro, "wb");
    STEP(f && fputs("old", f) >= 0 && fclose(f) == 0 && chmod(ro, 0444) == 0);
    STEP(rp_output_check(ro) == RP_EIO &&
         !strcmp(rp_error_detail(), "cannot write: Permission denied"));
    STEP(rp_file_write_atomic(ro, "new", 3) == RP_EIO &&
         !strcmp(rp_error_detail(), "cannot write: Permission denied"));
    f = fopen(rw, "wb");
    STEP(f && fputs("old", f) >= 0 && fclose(f) == 0 && chmod(rw, 0640) == 0);
    STEP(fchmod_fails() == 0);
    STEP(rp_output_check(rw) == RP_EIO &&
         !strcmp(rp_error_detail(),
                 "cannot set the permissions: Operation not permitted"));
    STEP(rp_file_write_atomic(rw, "new", 3) == RP_EIO &&
         !strcmp(rp_error_detail(),
                 "cannot set the permissions: Operation not permitted"));
#ifdef OUT_LEAK_CHECK
    STEP(__lsan_do_recoverable_leak_check() == 0);
#endif
    step = 0;
#undef STEP
  out:
    (void)!write(msg[1], detail, strlen(detail));
    _exit(step);
  }
  close(msg[1]);
  char detail[512];
  cli_slurp(msg[0], detail, sizeof detail);
  int ws;
  cr_assert_eq(waitpid(pid, &ws, 0), pid);
  cr_assert(WIFEXITED(ws), "the child did not exit");
  cr_assert_eq(WEXITSTATUS(ws), 0,
               "step %d failed (1: setuid, 2 and 5: writing the files, 3-4: "
               "'cannot write', 6: the seccomp filter, 7-8: 'cannot set the "
               "permissions', 9: a leak): %s",
               WEXITSTATUS(ws), detail);
  for (int i = 0; i < 2; i++) {
    char *t = th_read_all(i ? rw : ro, NULL);
    cr_assert_str_eq(t, "old");
    free(t);
  }
  cr_assert_eq(entries(dir), 2, "a temporary file was left");
  th_tmpdir_remove();
}

/* A file size limit of n bytes (a full disk's stand-in) in *lim, the
 * current one in *old, for fsize_set; a write past the limit fails with
 * EFBIG instead of raising SIGXFSZ. */
static void fsize_limits(rlim_t n, struct rlimit *old, struct rlimit *lim) {
  signal(SIGXFSZ, SIG_IGN);
  cr_assert_eq(getrlimit(RLIMIT_FSIZE, old), 0);
  *lim = *old;
  lim->rlim_cur = n;
}

static void fsize_set(const struct rlimit *r) {
  cr_assert_eq(setrlimit(RLIMIT_FSIZE, r), 0);
}

/* `reprise dump -o FILE` that cannot write its dump names FILE and the
 * cause, exits 1, and leaves the previous FILE and no temporary file. */
Test(outputs, a_dump_that_cannot_be_written_names_its_file) {
  tmpdir();
  char graph[256], out[256];
  snprintf(graph, sizeof graph, "%s", th_tmp_path("g.json"));
  snprintf(out, sizeof out, "%s", th_tmp_path("dump.txt"));
  cli_run r;
  RUN(&r, "train", "--backend", "cpu", "--procs", "2", "--batch", "32",
      "--hidden", "64,64", "--iters", "1", "--save-graph", graph);
  cr_assert_eq(r.status, 0, "%s", r.err);
  put(out, "the previous dump");
  struct rlimit old, lim;
  /* the dumps are larger, the messages smaller */
  fsize_limits(2048, &old, &lim);
  const char *const formats[] = {"text", "dot", "json"};
  for (int i = 0; i < 3; i++) {
    fsize_set(&lim);
    RUN(&r, "dump", graph, "--format", formats[i], "-o", out);
    fsize_set(&old);
    cr_assert_eq(r.status, 1, "%s: %s", formats[i], r.err);
    cr_assert(has(r.err, out) && has(r.err, "File too large"), "%s: %s",
              formats[i], r.err);
    char *t = th_read_all(out, NULL);
    cr_assert_str_eq(t, "the previous dump");
    free(t);
    cr_assert_eq(entries(dir_of_tmp()), 2, "a temporary file was left");
  }
  signal(SIGXFSZ, SIG_DFL);
  th_tmpdir_remove();
}

/* Write errors (a file size limit stands in for a full disk): every writer
 * fails with RP_EIO, and the previous file is untouched. */
Test(outputs, write_errors_leave_the_previous_file_whole) {
  tmpdir();
  const char *p = th_tmp_path("big");
  put(p, "the previous file");
  struct rlimit old, lim;
  fsize_limits(4096, &old, &lim);
  fsize_set(&lim);
  size_t n = 1 << 20;
  char *big = calloc(n, 1);
  cr_assert_not_null(big);
  rp_status st = rp_file_write_atomic(p, big, n);
  rp_status st2 = rp_ckpt_save(p, "mlp", 1, big, n);
  char why2[512]; /* the checkpoint's detail names the cause */
  snprintf(why2, sizeof why2, "%s", rp_error_detail());
  rp_dataset d; /* 4096 samples of 16 features: above the limit */
  rp_status st4 = rp_data_generate(RP_DATA_BLOBS, 4096, 16, 3, 1, &d);
  char why4[2][512];
  for (int csv = 0; !st4 && csv < 2; csv++) {
    rp_status s4 = rp_data_save(&d, p, csv);
    snprintf(why4[csv], sizeof why4[csv], "%s: %s", rp_status_name(s4),
             rp_error_detail());
  }
  if (!st4)
    rp_data_free(&d);
  rp_output *o;
  rp_status st3 = rp_output_open(p, &o);
  if (!st3) {
    fwrite(big, 1, n, rp_output_file(o)); /* fails; the commit says so */
    st3 = rp_output_commit(o);
  }
  fsize_set(&old);
  free(big);
  cr_assert_eq(st, RP_EIO, "%s: %s", rp_status_name(st), rp_error_detail());
  cr_assert_eq(st2, RP_EIO, "%s", rp_status_name(st2));
  cr_assert(strstr(why2, "File too large") && strstr(why2, "unchanged"), "%s",
            why2);
  cr_assert_eq(st3, RP_EIO, "%s", rp_status_name(st3));
  cr_assert_eq(st4, RP_OK, "%s", rp_status_name(st4));
  for (int csv = 0; csv < 2; csv++) /* rp_data_save names the cause too */
    cr_assert(has(why4[csv], "RP_EIO") && has(why4[csv], "File too large") &&
                  has(why4[csv], "unchanged"),
              "%s", why4[csv]);
  char *t = th_read_all(p, NULL);
  cr_assert_str_eq(t, "the previous file");
  free(t);
  cr_assert_eq(entries(dir_of_tmp()), 1, "a temporary file was left");
  th_tmpdir_remove();
}

/* A write that fails inside the stream's buffer (unchecked fprintf
 * calls, as a trace or a JSON summary makes) shows only at a later write
 * or at the commit's flush, errno long since overwritten: the commit's
 * detail still names the system's reason for it. */
Test(outputs, a_buffered_write_that_failed_names_its_cause_at_the_commit) {
  tmpdir();
  const char *p = th_tmp_path("buffered");
  put(p, "the previous file");
  struct rlimit old, lim;
  fsize_limits(4096, &old, &lim);
  rp_output *o;
  rp_status st = rp_output_open(p, &o);
  cr_assert_eq(st, RP_OK, "%s", rp_error_detail());
  fsize_set(&lim);
  for (int i = 0; i < 1000; i++)
    fprintf(rp_output_file(o), "line %d of a file above the size limit\n", i);
  cr_assert_eq(open("/nonexistent/rp_out", O_RDONLY), -1); /* errno: ENOENT */
  st = rp_output_commit(o);
  char why[512];
  snprintf(why, sizeof why, "%s", rp_error_detail());
  fsize_set(&old);
  signal(SIGXFSZ, SIG_DFL);
  cr_assert_eq(st, RP_EIO, "%s", rp_status_name(st));
  cr_assert(has(why, "File too large") && has(why, "unchanged"), "%s", why);
  char *t = th_read_all(p, NULL);
  cr_assert_str_eq(t, "the previous file");
  free(t);
  cr_assert_eq(entries(dir_of_tmp()), 1, "a temporary file was left");
  th_tmpdir_remove();
}

/* Data that fits the stream's buffer fails only when the commit flushes
 * it (a file size limit, as a full disk): RP_EIO saying so, the previous
 * file whole, no temporary file left. */
Test(outputs, a_write_failing_at_the_flush_leaves_the_previous_file_whole) {
  tmpdir();
  const char *p = th_tmp_path("small");
  put(p, "the previous file");
  struct rlimit old, lim;
  fsize_limits(100, &old, &lim);
  fsize_set(&lim);
  char data[1000];
  memset(data, 'x', sizeof data);
  rp_status st = rp_file_write_atomic(p, data, sizeof data);
  char why[512];
  snprintf(why, sizeof why, "%s", rp_error_detail());
  fsize_set(&old);
  cr_assert_eq(st, RP_EIO, "%s: %s", rp_status_name(st), why);
  cr_assert(has(why, "File too large") && has(why, "the target is unchanged"),
            "%s", why);
  char *t = th_read_all(p, NULL);
  cr_assert_str_eq(t, "the previous file");
  free(t);
  cr_assert_eq(entries(dir_of_tmp()), 1, "a temporary file was left");
  th_tmpdir_remove();
}

/* An output under a regular file (a/b with a a file) cannot be looked at:
 * RP_EIO saying why, nothing created. */
Test(outputs, an_output_under_a_regular_file_is_refused) {
  tmpdir();
  const char *f = th_tmp_path("file");
  put(f, "x");
  char p[600];
  snprintf(p, sizeof p, "%s/out.json", f);
  rp_output *o = (rp_output *)&o;
  RP_EXPECT(rp_output_open(p, &o), RP_EIO);
  cr_assert(has(rp_error_detail(), "Not a directory"), "%s", rp_error_detail());
  cr_assert_null(o, "*out is NULL on error (reprise.h)");
  RP_EXPECT(rp_output_check(p), RP_EIO);
  RP_EXPECT(rp_file_write_atomic(p, "x", 1), RP_EIO);
  cr_assert_eq(entries(dir_of_tmp()), 1, "something was created");
  th_tmpdir_remove();
}

/* ---- the bounded reader (the input side's argument checks) ---- */

Test(outputs, read_regular_checks_its_out_parameters) {
  tmpdir();
  const char *p = th_tmp_path("f");
  put(p, "abc");
  char *buf = NULL;
  size_t len = 0;
  RP_EXPECT(rp_file_read_regular(p, 100, NULL, &len), RP_EINVAL);
  RP_EXPECT(rp_file_read_regular(p, 100, &buf, NULL), RP_EINVAL);
  RP_EXPECT(rp_file_read_regular(NULL, 100, &buf, &len), RP_EINVAL);
  cr_assert_null(buf);
  RP_CHECK(rp_file_read_regular(p, 100, &buf, &len));
  cr_assert_eq(len, 3);
  free(buf);
  th_tmpdir_remove();
}

Test(outputs, open_regular_names_a_socket) {
  tmpdir();
  const char *sock = th_tmp_path("sock");
  int s = make_socket(sock);
  int fd;
  uint64_t size;
  RP_EXPECT(rp_file_open_regular(sock, &fd, &size), RP_EINVAL);
  cr_assert(has(rp_error_detail(), "a socket"), "%s", rp_error_detail());
  char *buf;
  size_t len;
  RP_EXPECT(rp_file_read_regular(sock, 100, &buf, &len), RP_EINVAL);
  cr_assert(has(rp_error_detail(), "a socket"), "%s", rp_error_detail());
  close(s);
  th_tmpdir_remove();
}

/* ---- the checkpoint container ---- */

/* A checkpoint read in pieces that shrinks after the open (its size
 * checked against the header) is refused at the read that meets the cut,
 * RP_EFORMAT naming the file and the byte it ends at, with and without
 * the open's checksum pass; one that grows, at the finish; one cut before
 * the open, at the open. Nothing leaks. */
Test(outputs, a_checkpoint_cut_or_grown_while_read_in_pieces_is_refused) {
  tmpdir();
  const char *p = th_tmp_path("c");
  size_t len = 3u << 20; /* the checksum pass reads it in 1 MiB pieces */
  unsigned char *pl = malloc(len), *buf = malloc(len);
  cr_assert(pl && buf);
  for (size_t i = 0; i < len; i++)
    pl[i] = (unsigned char)(i * 131 + 7);
  char want[512];
  for (int verify = 0; verify < 2; verify++) {
    RP_CHECK(rp_ckpt_save(p, "mlp", 1, pl, len));
    rp_ckpt_reader *r = NULL;
    uint32_t v;
    uint64_t n;
    RP_CHECK(rp_ckpt_reader_open(p, "mlp", 1ull << 32, verify, &v, &n, &r));
    cr_assert_eq(n, len);
    RP_CHECK(rp_ckpt_reader_read(r, buf, 1000));
    cr_assert_eq(truncate(p, RP_CKPT_HEAD + 5000), 0);
    RP_EXPECT(rp_ckpt_reader_read(r, buf, len - 1000), RP_EFORMAT);
    snprintf(want, sizeof want,
             "%s: truncated while it was read (it ends at byte %u)", p,
             RP_CKPT_HEAD + 5000);
    cr_assert_str_eq(rp_error_detail(), want);
    rp_ckpt_reader_close(r);
    /* cut before the open: refused there */
    RP_EXPECT(rp_ckpt_reader_open(p, "mlp", 1ull << 32, verify, &v, &n, &r),
              RP_EFORMAT);
    cr_assert(has(rp_error_detail(), p), "%s", rp_error_detail());
  }
  RP_CHECK(rp_ckpt_save(p, "mlp", 1, pl, len));
  rp_ckpt_reader *r = NULL;
  uint32_t v;
  uint64_t n;
  RP_CHECK(rp_ckpt_reader_open(p, "mlp", 1ull << 32, 0, &v, &n, &r));
  RP_CHECK(rp_ckpt_reader_read(r, buf, len));
  FILE *f = fopen(p, "ab");
  cr_assert(f && fputc('x', f) == 'x' && fclose(f) == 0);
  RP_EXPECT(rp_ckpt_reader_finish(r), RP_EFORMAT);
  snprintf(want, sizeof want,
           "%s: trailing bytes after the payload (the file grew while it "
           "was read)",
           p);
  cr_assert_str_eq(rp_error_detail(), want);
  rp_ckpt_reader_close(r);
  free(pl);
  free(buf);
#ifdef OUT_LEAK_CHECK
  cr_assert_eq(__lsan_do_recoverable_leak_check(), 0, "leaks (see above)");
#endif
  th_tmpdir_remove();
}

/* A saver refuses what its reader would: the container with the payload
 * must fit the reader's limit (rp_mlp_save_check and rp_gpt_save_check
 * put a model's checkpoint size through this before training). */
Test(outputs, a_checkpoint_larger_than_its_reader_takes_is_refused) {
  const uint64_t max = (uint64_t)1 << 31;
  RP_CHECK(rp_ckpt_size_check("m", max - RP_CKPT_HEAD, max));
  RP_EXPECT(rp_ckpt_size_check("m", max - RP_CKPT_HEAD + 1, max), RP_ERANGE);
  cr_assert(has(rp_error_detail(), "m: its checkpoint would be 2147483649 "
                                   "bytes, above the 2147483648 bytes"),
            "%s", rp_error_detail());
  RP_EXPECT(rp_ckpt_size_check("m", UINT64_MAX, max), RP_ERANGE);
  /* payload + header past a u64: no wrapped size */
  cr_assert(has(rp_error_detail(), "m: its checkpoint would be more than "
                                   "18446744073709551615 bytes, above the "
                                   "2147483648 bytes"),
            "%s", rp_error_detail());
  RP_EXPECT(rp_ckpt_size_check("m", UINT64_MAX - RP_CKPT_HEAD, max), RP_ERANGE);
  cr_assert(has(rp_error_detail(), "would be 18446744073709551615 bytes"), "%s",
            rp_error_detail());
  RP_EXPECT(rp_ckpt_size_check("m", UINT64_MAX - 8, UINT64_MAX), RP_ERANGE);
  RP_CHECK(rp_ckpt_size_check("m", 0, RP_CKPT_HEAD));
}

Test(outputs, checkpoints_refuse_every_torn_or_changed_file) {
  tmpdir();
  const char *p = th_tmp_path("ck");
  unsigned char payload[200];
  for (size_t i = 0; i < sizeof payload; i++)
    payload[i] = (unsigned char)(i * 7 + 1);
  RP_CHECK(rp_ckpt_save(p, "gpt", 3, payload, sizeof payload));
  size_t n;
  char *whole = th_read_all(p, &n);
  cr_assert_eq(n, RP_CKPT_HEAD + sizeof payload);
  void *back;
  size_t len;
  uint32_t version;
  RP_CHECK(rp_ckpt_load(p, "gpt", 1 << 20, &version, &back, &len));
  cr_assert_eq(version, 3);
  cr_assert_eq(len, sizeof payload);
  cr_assert(memcmp(back, payload, len) == 0);
  free(back);
  /* another model's checkpoint */
  RP_EXPECT(rp_ckpt_load(p, "mlp", 1 << 20, &version, &back, &len), RP_EFORMAT);
  cr_assert(has(rp_error_detail(), "a 'gpt' checkpoint, not a 'mlp' one"), "%s",
            rp_error_detail());
  rp_mlp_ckpt ck;
  RP_EXPECT(rp_mlp_ckpt_read(p, &ck), RP_EFORMAT);
  /* cut at every length: refused, naming the file */
  const unsigned char *b = (const unsigned char *)whole;
  for (size_t k = 0; k < n; k++) {
    size_t off;
    rp_status st = rp_ckpt_parse(p, "gpt", b, k, &version, &off, &len);
    cr_assert_eq(st, RP_EFORMAT, "%zu of %zu bytes: %s", k, n,
                 rp_status_name(st));
    cr_assert(has(rp_error_detail(),
                  k == 0 ? "an empty file, not a checkpoint" : "truncated"),
              "%zu: %s", k, rp_error_detail());
    cr_assert(has(rp_error_detail(), p), "%s", rp_error_detail());
  }
  /* any one bit changed: refused */
  unsigned char *mod = malloc(n);
  cr_assert_not_null(mod);
  for (size_t k = 0; k < n; k++) {
    memcpy(mod, b, n);
    mod[k] ^= 0x10;
    size_t off;
    rp_status st = rp_ckpt_parse(p, "gpt", mod, n, &version, &off, &len);
    cr_assert(st == RP_ECHECKSUM || st == RP_EFORMAT || st == RP_EVERSION,
              "byte %zu changed: %s", k, rp_status_name(st));
  }
  free(mod);
  /* a length field past the file: truncated, not an overread */
  RP_EXPECT(rp_ckpt_save(p, "", 1, payload, 1), RP_EINVAL);
  RP_EXPECT(rp_ckpt_save(p, "a kind far too long", 1, payload, 1), RP_EINVAL);
  RP_EXPECT(rp_ckpt_load(p, "gpt", 10, &version, &back, &len), RP_ERANGE);
  /* from the file: a cut one, at the lengths around the header's, says
   * what the buffer does */
  const char *cut = th_tmp_path("cut.ckpt");
  const size_t cuts[] = {0, 5, RP_CKPT_HEAD - 1, RP_CKPT_HEAD, n - 1};
  for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++) {
    FILE *f = fopen(cut, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(b, 1, cuts[i], f), cuts[i]);
    fclose(f);
    RP_EXPECT(rp_ckpt_load(cut, "gpt", 1 << 20, &version, &back, &len),
              RP_EFORMAT);
    cr_assert(
        has(rp_error_detail(), cuts[i] == 0 ? "an empty file" : "truncated"),
        "%zu: %s", cuts[i], rp_error_detail());
  }
  /* a valid header over 3 GiB (sparse): refused by its length before a
   * byte of the rest is read (not read whole: 3 GB of memory) */
  FILE *f = fopen(cut, "wb");
  cr_assert_not_null(f);
  cr_assert_eq(fwrite(b, 1, n, f), n);
  fclose(f);
  cr_assert_eq(truncate(cut, (off_t)3 << 30), 0);
  struct rusage ru0, ru1;
  getrusage(RUSAGE_SELF, &ru0);
  RP_EXPECT(rp_ckpt_load(cut, "gpt", (size_t)4 << 30, &version, &back, &len),
            RP_EFORMAT);
  getrusage(RUSAGE_SELF, &ru1);
  cr_assert(has(rp_error_detail(), "trailing bytes") &&
                has(rp_error_detail(), "the file has 3221225472"),
            "%s", rp_error_detail());
  cr_assert_lt(ru1.ru_maxrss - ru0.ru_maxrss, 256 * 1024,
               "the peak grew by %ld KiB", ru1.ru_maxrss - ru0.ru_maxrss);
  unlink(cut);
  free(whole);
  th_tmpdir_remove();
}

/* ---- the kill test ---- */

#define KILL_TRIES 100
#define TRAIN_BIG                                                              \
  "train", "--backend", "cpu", "--procs", "1", "--batch", "16", "--hidden",    \
      "512,512", "--samples", "64", "--log-every", "1000"

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_ns(uint64_t ns) {
  struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
    ;
}

/* Starts `reprise TRAIN_BIG --iters iters --save-weights path` with its
 * output sent to /dev/null. */
static pid_t start_train(const char *iters, const char *path) {
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(null, 2);
    execl(REPRISE_CLI_PATH, "reprise", TRAIN_BIG, "--iters", iters,
          "--save-weights", path, (char *)NULL);
    _exit(127);
  }
  return pid;
}

static int wait_status(pid_t pid) {
  int ws;
  while (waitpid(pid, &ws, 0) < 0)
    cr_assert_eq(errno, EINTR);
  return ws;
}

/* Waits (at most limit_ns) until the nth event of mask (IN_CREATE: a file
 * created, IN_MOVED_TO: renamed into place) for a name that starts with
 * prefix in the directory that inotify fd in watches: 1 when seen. */
static int wait_event(int in, uint32_t mask, const char *prefix, int nth,
                      uint64_t limit_ns) {
  uint64_t end = now_ns() + limit_ns;
  char buf[4096] __attribute__((aligned(8)));
  for (uint64_t t; (t = now_ns()) < end;) {
    struct pollfd pfd = {.fd = in, .events = POLLIN};
    if (poll(&pfd, 1, (int)((end - t) / 1000000u) + 1) <= 0)
      continue;
    ssize_t n = read(in, buf, sizeof buf);
    for (ssize_t off = 0; off < n;) {
      const struct inotify_event *e = (const void *)(buf + off);
      if ((e->mask & mask) && e->len &&
          !strncmp(e->name, prefix, strlen(prefix)) && --nth == 0)
        return 1;
      off += (ssize_t)(sizeof *e + e->len);
    }
  }
  return 0;
}

/* Removes the temporary files a killed writer left (".w.bin.tmp.*");
 * returns how many there were. */
static int remove_leftovers(const char *dir) {
  DIR *d = opendir(dir);
  cr_assert_not_null(d);
  int n = 0;
  struct dirent *e;
  char path[1024];
  while ((e = readdir(d)))
    if (!strncmp(e->d_name, ".w.bin.tmp.", 11)) {
      snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
      cr_assert_eq(unlink(path), 0);
      n++;
    }
  closedir(d);
  return n;
}

/* `reprise train --save-weights F` SIGKILLed at random moments, KILL_TRIES
 * times: F always holds, bitwise, either the checkpoint it held before or
 * the one the run writes, and loads. Half the kills fall anywhere in a
 * run, half in the save itself (after the writer's temporary file
 * appears, within 1.5x the time from there to the rename here). */
Test(outputs, sigkill_during_save_weights_leaves_the_old_or_the_new_file,
     .timeout = 600) {
  tmpdir();
  const char *dir = dir_of_tmp();
  const char *ref[2] = {th_tmp_path("a.bin"), th_tmp_path("b.bin")};
  const char *iters[2] = {"2", "3"};
  /* the two checkpoints (deterministic: same seed and data) */
  uint64_t run_ns = 0;
  for (int k = 0; k < 2; k++) {
    uint64_t t0 = now_ns();
    int ws = wait_status(start_train(iters[k], ref[k]));
    run_ns += now_ns() - t0;
    cr_assert(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "reference run %d", k);
  }
  size_t na, nb;
  char *want[2] = {th_read_all(ref[0], &na), th_read_all(ref[1], &nb)};
  cr_assert(na == nb && na > (1u << 20) && memcmp(want[0], want[1], na),
            "the two references must differ: %zu, %zu bytes", na, nb);
  run_ns /= 2;
  const char *f = th_tmp_path("w.bin");
  int in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  cr_assert_geq(in, 0, "inotify: %s", strerror(errno));
  cr_assert_geq(inotify_add_watch(in, dir, IN_CREATE | IN_MOVED_TO), 0);
  /* how long a save takes here: the temporary file's life. The first
   * temporary file is the output-path check's (created and removed before
   * any work), the second the save's. */
  uint64_t save_ns = 0; /* 0: no temporary file seen (a writer in place) */
  {
    pid_t pid = start_train(iters[0], f);
    uint64_t t0 = now_ns();
    int seen =
        wait_event(in, IN_CREATE, ".w.bin.tmp.", 2, 4 * run_ns + 1000000000ull);
    uint64_t t1 = now_ns();
    if (seen &&
        wait_event(in, IN_MOVED_TO, "w.bin", 1, 4 * run_ns + 1000000000ull))
      save_ns = now_ns() - t1 + 1; /* up to the rename */
    int ws = wait_status(pid);
    if (!seen)
      cr_log_warn("kill test: the save made no temporary file beside F "
                  "(%.0f ms waited): its kills aim at the run's end",
                  (double)(t1 - t0) / 1e6);
    cr_assert(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
  }
  srand((unsigned)now_ns());
  int held = 0; /* F holds want[held] */
  int finished = 0, mid_save = 0;
  for (int i = 0; i < KILL_TRIES; i++) {
    int next = 1 - held;
    char drain[4096];
    while (read(in, drain, sizeof drain) > 0)
      ; /* events of earlier tries */
    pid_t pid = start_train(iters[next], f);
    if (i % 2 == 0)
      sleep_ns((uint64_t)rand() % (run_ns + 1));
    else if (!save_ns) /* the save is the run's last part */
      sleep_ns(run_ns / 2 + (uint64_t)rand() % (run_ns * 3 / 4 + 1));
    else if (wait_event(in, IN_CREATE, ".w.bin.tmp.", 2,
                        4 * run_ns + 1000000000ull))
      sleep_ns((uint64_t)rand() % (save_ns * 3 / 2 + 1));
    kill(pid, SIGKILL);
    int ws = wait_status(pid);
    int done = WIFEXITED(ws) && WEXITSTATUS(ws) == 0;
    finished += done;
    mid_save += remove_leftovers(dir);
    size_t n;
    char *got = th_read_all(f, &n);
    int is_old = n == na && !memcmp(got, want[held], n);
    int is_new = n == na && !memcmp(got, want[next], n);
    free(got);
    cr_assert(is_old || is_new,
              "try %d: after SIGKILL F is neither the old nor the new "
              "checkpoint (%zu bytes)",
              i, n);
    cr_assert(!done || is_new, "try %d: the run finished, F is the old one", i);
    rp_mlp_ckpt ck;
    RP_CHECK(rp_mlp_ckpt_read(f, &ck));
    cr_assert_eq(ck.info.step, 2u + (unsigned)(is_new ? next : held));
    rp_mlp_ckpt_free(&ck);
    held = is_new ? next : held;
  }
  close(in);
  cr_log_info("kill test: %d tries, %d killed inside the save, %d finished "
              "first (a run %.0f ms, a save %.1f ms here)",
              KILL_TRIES, mid_save, finished, (double)run_ns / 1e6,
              (double)save_ns / 1e6);
  /* the test sees kills inside the save itself, or it shows nothing */
  cr_assert_gt(mid_save, 0, "no kill landed inside a save (%d finished)",
               finished);
  free(want[0]), free(want[1]);
  th_tmpdir_remove();
}
