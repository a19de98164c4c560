/* engine/output.c — the one writer of every file reprise writes: a
 * temporary file next to the target, fsync, rename over the target, fsync
 * of the directory (contract in reprise.h, "Output files"). */
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct temp_slot;

struct rp_output {
  FILE *f;                  /* a stream of its own over fd (out_write) */
  int fd;                   /* the temporary file */
  int err;                  /* errno of the first write that failed, or 0 */
  char *target;             /* the file the rename replaces (a link resolved) */
  char *tmp;                /* the temporary file next to it */
  char *dir;                /* their directory, synced after the rename */
  struct temp_slot *listed; /* its slot in `temps`, or NULL */
};

/* The temporary files of the outputs open now, for rp_output_discard_all
 * (called from signal handlers): each slot's path is guarded by a
 * sequence number, odd while it changes, so that a handler removes a whole
 * path or nothing. The slots come in chunks: the first static, more
 * allocated when every slot is taken and never freed (a handler may be
 * walking them), so that every open output is listed. TEMP_PATH holds any
 * path that open() accepted (PATH_MAX, its NUL included). */
#define TEMP_SLOTS 32
#define TEMP_PATH 4096
_Static_assert(ATOMIC_CHAR_LOCK_FREE == 2, "a signal handler reads the paths");
struct temp_slot {
  _Atomic int used;
  _Atomic unsigned seq;
  _Atomic char path[TEMP_PATH]; /* stored release, loaded relaxed */
};
struct temp_chunk {
  struct temp_slot slot[TEMP_SLOTS];
  struct temp_chunk *_Atomic next;
};
static struct temp_chunk temps;

/* A slot of this output's own, its path empty, or NULL: out of memory. */
static struct temp_slot *temp_claim(void) {
  for (struct temp_chunk *c = &temps; c;) {
    for (int i = 0; i < TEMP_SLOTS; i++) {
      struct temp_slot *s = &c->slot[i];
      if (!atomic_exchange(&s->used, 1))
        return s;
    }
    struct temp_chunk *next = atomic_load(&c->next);
    if (!next) { /* every slot taken: one more chunk, kept for good */
      struct temp_chunk *fresh = calloc(1, sizeof *fresh);
      if (!fresh)
        return NULL;
      if (atomic_compare_exchange_strong(&c->next, &next, fresh))
        next = fresh;
      else
        free(fresh); /* another thread's came first: next is it */
    }
    c = next;
  }
  return NULL;
}

/* s's path becomes tmp (empty when tmp is too long for any path open()
 * takes: its open fails). */
static void temp_set(struct temp_slot *s, const char *tmp) {
  size_t n = strlen(tmp);
  if (n >= TEMP_PATH)
    n = 0, tmp = "";
  atomic_fetch_add(&s->seq, 1); /* odd: changing */
  /* release stores: a reader that sees a byte sees the odd seq */
  for (size_t k = 0; k <= n; k++)
    atomic_store_explicit(&s->path[k], tmp[k], memory_order_release);
  atomic_fetch_add(&s->seq, 1); /* even: whole */
}

static void temp_unlist(struct temp_slot *s) {
  if (!s)
    return;
  atomic_fetch_add(&s->seq, 1);
  atomic_store_explicit(&s->path[0], '\0', memory_order_release);
  atomic_fetch_add(&s->seq, 1);
  atomic_store(&s->used, 0);
}

void rp_output_discard_all(void) {
  char buf[TEMP_PATH];
  for (struct temp_chunk *c = &temps; c; c = atomic_load(&c->next))
    for (int i = 0; i < TEMP_SLOTS; i++) {
      struct temp_slot *s = &c->slot[i];
      unsigned a = atomic_load(&s->seq);
      if ((a & 1) || !atomic_load(&s->used))
        continue;
      /* a seqlock's read: the copy may tear, the seq check below tells */
      for (size_t k = 0; k < TEMP_PATH; k++)
        if (!(buf[k] = atomic_load_explicit(&s->path[k], memory_order_relaxed)))
          break;
      buf[TEMP_PATH - 1] = '\0';
      atomic_thread_fence(memory_order_acquire);
      if (atomic_load(&s->seq) == a && buf[0])
        unlink(buf);
    }
}

/* The kind of an existing path that an output refuses; NULL for a
 * regular file. */
static const char *refused_kind(mode_t m) {
  return S_ISREG(m) ? NULL : rp__file_kind(m);
}

static rp_status not_regular(mode_t m) {
  if (S_ISDIR(m)) /* a directory is no file to replace at all */
    return rp__err(RP_EINVAL, "a directory, not a regular file: an output "
                              "writes a file (name one inside it)");
  return rp__err(RP_EINVAL,
                 "%s, not a regular file: an output only ever replaces a "
                 "regular file (renaming over a device, a FIFO or a socket "
                 "would turn it into a file)",
                 refused_kind(m));
}

/* The file an output to path replaces: path itself, or what a symbolic
 * link resolves to (the link stays a link). *exists and *sb say whether
 * it exists and what it is; an existing one that is not a regular file is
 * refused. */
static rp_status resolve(const char *path, char **target, int *exists,
                         struct stat *sb) {
  *exists = 0;
  if (lstat(path, sb) != 0) {
    if (errno != ENOENT)
      return rp__err(RP_EIO, "cannot stat: %s", strerror(errno));
    *target = rp__strdup(path); /* a new file (its directory checked later) */
  } else if (S_ISLNK(sb->st_mode)) {
    char *real = realpath(path, NULL);
    if (!real && errno == ENOENT && stat(path, sb) == 0 &&
        refused_kind(sb->st_mode))
      return not_regular(sb->st_mode); /* /dev/stdout on a pipe: pipe:[N] */
    if (!real)
      return errno == ENOENT
                 ? rp__err(RP_EINVAL, "a symbolic link to nothing (a dangling "
                                      "link): an output does not create "
                                      "its target")
                 : rp__err(rp__errno_status(errno),
                           "cannot resolve the symbolic link: %s",
                           strerror(errno));
    if (stat(real, sb) != 0) {
      int e = errno;
      free(real);
      return rp__err(RP_EIO, "cannot stat the link's target: %s", strerror(e));
    }
    *target = real;
    *exists = 1;
  } else {
    *target = rp__strdup(path);
    *exists = 1;
  }
  if (!*target)
    return rp__err(RP_ENOMEM, "out of memory");
  if (*exists && refused_kind(sb->st_mode)) {
    free(*target);
    *target = NULL;
    return not_regular(sb->st_mode);
  }
  /* the file this process's standard output or error goes to (--json
   * /dev/stdout > f): replacing it would drop what was written there */
  for (int fd = 1; fd <= 2 && *exists; fd++) {
    struct stat o;
    if (fstat(fd, &o) == 0 && S_ISREG(o.st_mode) && o.st_dev == sb->st_dev &&
        o.st_ino == sb->st_ino) {
      free(*target);
      *target = NULL;
      return rp__err(RP_EINVAL,
                     "the file this process's standard %s goes to: an "
                     "output replaces its file whole, which would drop "
                     "what was written there (name a file of its own)",
                     fd == 1 ? "output" : "error");
    }
  }
  return RP_OK;
}

/* "dir" of "dir/name" ("." without a slash, "/" for "/name"). */
static char *dir_of(const char *path) {
  const char *slash = strrchr(path, '/');
  if (!slash)
    return rp__strdup(".");
  size_t n = slash == path ? 1 : (size_t)(slash - path);
  char *d = malloc(n + 1);
  if (d) {
    memcpy(d, path, n);
    d[n] = 0;
  }
  return d;
}

/* Creates "dir/.name.tmp.PID.N" exclusively (0666 less the umask, as
 * fopen would create the target itself; mkstemp's 0600 would survive the
 * rename). The name part is cut so the whole stays within NAME_MAX. Each
 * name is listed in *slot (claimed here) before the open() that may
 * create it: a signal handler's rp_output_discard_all that runs once the
 * file exists finds it (listed after the open, a signal between the two
 * left the file behind). */
static int temp_create(const char *dir, const char *target, char **tmp,
                       struct temp_slot **slot) {
  static _Atomic unsigned serial;
  const char *slash = strrchr(target, '/');
  const char *name = slash ? slash + 1 : target;
  size_t n = strlen(dir) + strlen(name) + 64;
  if (!(*tmp = malloc(n)) || !(*slot = temp_claim())) {
    errno = ENOMEM;
    return -1;
  }
  for (int tries = 0; tries < 100; tries++) {
    snprintf(*tmp, n, "%s/.%.200s.tmp.%ld.%u", dir, name, (long)getpid(),
             atomic_fetch_add(&serial, 1));
    temp_set(*slot, *tmp);
    int fd =
        open(*tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOCTTY, 0666);
    if (fd >= 0 || errno != EEXIST)
      return fd;
  }
  return -1;
}

/* The stream's writes: all of n bytes to the file, or the errno of the
 * first failure kept for rp_output_commit's message (a buffered write
 * fails at some later fprintf or at the flush, where errno is long gone
 * by the time the commit looks). A short count marks the stream in error
 * (ferror). */
static ssize_t out_write(void *cookie, const char *buf, size_t n) {
  rp_output *o = cookie;
  size_t done = 0;
  while (done < n) {
    ssize_t w = write(o->fd, buf + done, n - done);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0) {
      if (!o->err)
        o->err = w < 0 ? errno : EIO;
      errno = o->err; /* for a caller that reads it after its fwrite */
      break;
    }
    done += (size_t)w;
  }
  return (ssize_t)done;
}

static int out_seek(void *cookie, off64_t *pos, int whence) {
  rp_output *o = cookie;
  off_t at = lseek(o->fd, (off_t)*pos, whence);
  if (at < 0)
    return -1;
  *pos = at;
  return 0;
}

static void output_free(rp_output *o) {
  temp_unlist(o->listed);
  free(o->target);
  free(o->tmp);
  free(o->dir);
  free(o);
}

rp_status rp_output_open(const char *path, rp_output **out) {
  if (out)
    *out = NULL;
  if (!path || !out)
    return rp__err(RP_EINVAL, "NULL argument");
  if (!*path)
    return rp__err(RP_EINVAL, "an empty file name");
  rp_output *o = calloc(1, sizeof *o);
  if (!o)
    return rp__err(RP_ENOMEM, "out of memory");
  int exists;
  struct stat sb;
  rp_status st = resolve(path, &o->target, &exists, &sb);
  if (!st && !(o->dir = dir_of(o->target)))
    st = rp__err(RP_ENOMEM, "out of memory");
  /* an existing file we may not write stays protected: the rename would
   * replace it whatever its permissions */
  if (!st && exists && access(o->target, W_OK) != 0 && errno != ENOENT)
    st = rp__err(RP_EIO, "cannot write: %s", strerror(errno));
  /* nor can the rename replace another user's file in a directory with
   * the sticky bit (/tmp) unless the caller owns the directory or is root:
   * said now, not after the work (rp_output_check) */
  struct stat ds;
  if (!st && exists && geteuid() != 0 && sb.st_uid != geteuid() &&
      stat(o->dir, &ds) == 0 && (ds.st_mode & S_ISVTX) &&
      ds.st_uid != geteuid())
    st = rp__err(RP_EIO,
                 "cannot replace: %s (the file is another user's, in a "
                 "directory with the sticky bit, as /tmp: only its owner "
                 "may rename over it; name a file of your own)",
                 strerror(EPERM));
  int fd = -1;
  /* listed at once: rp_output_discard_all removes it from now on */
  if (!st && (fd = temp_create(o->dir, o->target, &o->tmp, &o->listed)) < 0)
    st = rp__err(rp__errno_status(errno), "cannot create a file in '%s': %s",
                 o->dir, strerror(errno));
  /* a replaced file keeps its owner and group where the caller may give
   * them (root; a group of the caller's), else they are the caller's, as
   * for a new file; then its permission bits (after: a chown clears the
   * set-user-ID bit) */
  if (!st && exists && (sb.st_uid != geteuid() || sb.st_gid != getegid()) &&
      fchown(fd, sb.st_uid, sb.st_gid) != 0)
    (void)!fchown(fd, (uid_t)-1, sb.st_gid);
  if (!st && exists && fchmod(fd, sb.st_mode & 07777) != 0)
    st = rp__err(RP_EIO, "cannot set the permissions: %s", strerror(errno));
  o->fd = fd;
  if (!st && !(o->f = fopencookie(o, "wb",
                                  (cookie_io_functions_t){.write = out_write,
                                                          .seek = out_seek})))
    st = rp__err(rp__errno_status(errno), "fopencookie: %s", strerror(errno));
  if (st) {
    if (fd >= 0) {
      close(fd);
      unlink(o->tmp);
    }
    output_free(o);
    return st;
  }
  *out = o;
  return RP_OK;
}

FILE *rp_output_file(const rp_output *o) {
  return o ? o->f : NULL;
}

/* fsync of the directory makes the rename itself durable. File systems
 * that cannot sync a directory (EINVAL) have nothing to sync. */
static rp_status sync_dir(const char *dir) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return rp__err(RP_EIO,
                   "the file is in place, but its directory cannot be "
                   "opened to sync the rename: %s",
                   strerror(errno));
  int bad = fsync(fd) != 0 && errno != EINVAL && errno != EROFS;
  int e = errno;
  close(fd);
  return bad ? rp__err(RP_EIO,
                       "the file is in place, but syncing its directory "
                       "failed: %s",
                       strerror(e))
             : RP_OK;
}

rp_status rp_output_commit(rp_output *o) {
  if (!o)
    return rp__err(RP_EINVAL, "NULL argument");
  rp_status st = RP_OK;
  /* a write that failed before (ferror) or at this flush: its own errno */
  if (ferror(o->f) || fflush(o->f) != 0)
    st = rp__err(RP_EIO, "writing failed: %s: the target is unchanged",
                 strerror(o->err ? o->err : EIO));
  else if (fsync(o->fd) != 0)
    st = rp__err(RP_EIO, "writing failed: %s: the target is unchanged",
                 strerror(errno));
  fclose(o->f); /* the stream only: its writes were flushed above */
  if (close(o->fd) != 0 && !st)
    st = rp__err(RP_EIO, "closing failed: %s: the target is unchanged",
                 strerror(errno));
  o->f = NULL;
  /* the target may have become something else since the open: check its
   * kind again right before the rename replaces it */
  struct stat sb;
  if (!st && lstat(o->target, &sb) == 0 && !S_ISLNK(sb.st_mode) &&
      refused_kind(sb.st_mode))
    st = not_regular(sb.st_mode);
  if (!st && rename(o->tmp, o->target) != 0)
    st = rp__err(RP_EIO, "renaming the new file into place failed: %s",
                 strerror(errno));
  if (st)
    unlink(o->tmp);
  else
    st = sync_dir(o->dir);
  output_free(o);
  return st;
}

void rp_output_abort(rp_output *o) {
  if (!o)
    return;
  fclose(o->f);
  close(o->fd);
  unlink(o->tmp);
  output_free(o);
}

rp_status rp_output_check(const char *path) {
  rp_output *o;
  rp_status st = rp_output_open(path, &o);
  rp_output_abort(o);
  return st;
}

rp_status rp_file_write_atomic(const char *path, const void *data, size_t n) {
  if (!data && n)
    return rp__err(RP_EINVAL, "NULL data");
  rp_output *o;
  rp_status st = rp_output_open(path, &o);
  if (st)
    return st;
  if (n && fwrite(data, 1, n, o->f) != n) {
    int e = errno;
    rp_output_abort(o);
    return rp__err(RP_EIO, "writing failed: %s: the target is unchanged",
                   strerror(e));
  }
  return rp_output_commit(o);
}
