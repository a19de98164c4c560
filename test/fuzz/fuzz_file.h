/* test/fuzz/fuzz_file.h — what the fuzz targets of the file readers share:
 * the file a target hands a reader that takes a path, and the trap that
 * makes libFuzzer keep an input breaking a reader's promise.
 *
 * The file is anonymous and in memory (memfd_create; else a temporary file
 * under /dev/shm or /tmp, unlinked as soon as it is made), named by its
 * descriptor (/proc/self/fd/N): the readers open it as a regular file,
 * nothing is left on any file system, even when the target crashes, and
 * no other process can see it. */
#ifndef RP_FUZZ_FILE_H
#define RP_FUZZ_FILE_H

#include "reprise.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

typedef struct fz_file {
  int fd;
  char path[64]; /* /proc/self/fd/N */
} fz_file;

static inline void fz_fail(const char *what) {
  fprintf(stderr, "fuzz: %s: %s\n", what, rp_error_detail());
  __builtin_trap();
}

static inline void fz_file_open(fz_file *f, const char *name) {
  f->fd = memfd_create(name, MFD_CLOEXEC);
  if (f->fd < 0) {
    const char *dirs[] = {"/dev/shm", "/tmp"};
    for (int i = 0; i < 2 && f->fd < 0; i++) {
      char tmpl[64];
      snprintf(tmpl, sizeof tmpl, "%s/reprise-fuzz-XXXXXX", dirs[i]);
      f->fd = mkstemp(tmpl);
      if (f->fd >= 0)
        unlink(tmpl);
    }
  }
  if (f->fd < 0) {
    perror("fuzz: a temporary file");
    abort();
  }
  snprintf(f->path, sizeof f->path, "/proc/self/fd/%d", f->fd);
}

/* The file now holds exactly the n bytes b. */
static inline void fz_file_set(fz_file *f, const void *b, size_t n) {
  if (ftruncate(f->fd, 0) != 0) {
    perror("fuzz: ftruncate");
    abort();
  }
  for (size_t done = 0; done < n;) {
    ssize_t k = pwrite(f->fd, (const char *)b + done, n - done, (off_t)done);
    if (k <= 0) {
      perror("fuzz: pwrite");
      abort();
    }
    done += (size_t)k;
  }
}

#endif
