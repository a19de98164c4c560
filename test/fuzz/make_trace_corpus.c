/* test/fuzz/make_trace_corpus.c — writes the seed traces of the trace fuzz
 * target (test/fuzz/corpus_trace/): a trace of 3 replays of the target's
 * graph (fuzz_trace_graph.h), as `reprise train --trace` writes them, and
 * variants: cut in half, an op of another graph, not a trace.
 * Usage: fuzz_make_trace_corpus DIR */
#include "fuzz_trace_graph.h"

#include <string.h>

static const char *dir;

static void put(const char *name, const char *text, size_t len) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(text, 1, len, f) != len || fclose(f)) {
    perror(path);
    exit(1);
  }
}

/* The variants of the trace at path. */
static void variants(const char *path) {
  FILE *f = fopen(path, "rb");
  static char t[1 << 20];
  size_t len = f ? fread(t, 1, sizeof t - 1, f) : 0;
  if (!f || !len || len == sizeof t - 1)
    exit(1);
  fclose(f);
  t[len] = 0;
  put("bad_half.json", t, len / 2);
  char *at = strstr(t, "layer.a.fwd");
  if (!at)
    exit(1);
  memcpy(at, "other.a.fwd", 11);
  put("bad_other_graph.json", t, len);
  const char *not_trace = "{\"traceEvents\": 1}";
  put("bad_not_trace.json", not_trace, strlen(not_trace));
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  dir = argv[1];
  rp_runtime *rt = fz_runtime();
  rp_inst inst[2];
  rp_graph *g = fz_trace_graph(rt, inst);
  rp_exec *ex = NULL;
  char path[1024];
  snprintf(path, sizeof path, "%s/replays3.json", argv[1]);
  rp_status st = rp_instantiate(g, NULL, &ex);
  if (!st)
    st = rp_exec_trace_start(ex, 3);
  for (int i = 0; i < 3 && !st; i++) {
    rp_event done;
    if (!(st = rp_replay(ex, NULL, &done))) {
      st = rp_event_wait(rt, done, -1);
      rp_event_release(rt, done);
    }
  }
  if (!st)
    st = rp_exec_trace_write(ex, path);
  if (st) {
    fprintf(stderr, "make_trace_corpus: %s: %s\n", rp_status_name(st),
            rp_error_detail());
    return 1;
  }
  variants(path);
  rp_exec_destroy(ex);
  rp_graph_destroy(g);
  rp_instance_free(rt, inst[0]);
  rp_instance_free(rt, inst[1]);
  rp_runtime_destroy(rt);
  return 0;
}
