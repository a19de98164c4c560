/* OpenBLAS's server threads are stopped when reprise loads
 * (kernels/cpu_kernels.c): the pthreads build starts one per core at load,
 * and each would poll with sched_yield for ~0.1 s. A plain program, not a
 * Criterion test: Criterion runs each test in a forked child, which has one
 * thread whatever the parent had. Exit 0 when main starts with no thread
 * but its own, OpenBLAS reports one thread, and a GEMM through it is
 * right. */
#include "kernels/cpu_kernels.h"

#include <cblas.h>
#include <dirent.h>
#include <stdio.h>

static int threads(void) {
  DIR *d = opendir("/proc/self/task");
  if (!d)
    return -1;
  int n = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;)
    n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

/* ThreadSanitizer's runtime keeps a background thread of its own. */
#ifdef __SANITIZE_THREAD__
#define OWN_THREADS 2
#else
#define OWN_THREADS 1
#endif

int main(void) {
  int n = threads(), blas = openblas_get_num_threads();
  const float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8};
  float c[4] = {0};
  rp_cpu_gemm(0, 0, 2, 2, 2, 1.0f, a, b, 0.0f, c);
  int gemm_ok = c[0] == 19 && c[1] == 22 && c[2] == 43 && c[3] == 50;
  int after = threads();
  printf("threads at main: %d (want %d); OpenBLAS threads: %d (want 1); "
         "GEMM %s; threads after it: %d (want %d)\n",
         n, OWN_THREADS, blas, gemm_ok ? "right" : "WRONG", after, OWN_THREADS);
  return n == OWN_THREADS && blas == 1 && gemm_ok && after == OWN_THREADS ? 0
                                                                          : 1;
}
