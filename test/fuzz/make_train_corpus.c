/* test/fuzz/make_train_corpus.c — writes the seed corpora of the file
 * readers' fuzz targets (DIR/corpus_<target>/): small valid files of every
 * format, written by the library's own writers where it has one (data
 * sets, the checkpoint container) and checked by the reader they seed,
 * and a few refused variants. Usage: fuzz_make_train_corpus DIR (the
 * checked-in corpora are those of test/fuzz). */
#include "fuzz_ckpt.h"
#include "train/data.h"
#include "train/gpt.h"
#include "train/mlp.h"

#include <errno.h>
#include <sys/stat.h>

static const char *root;
static char sub[512];

static void die(const char *what) {
  fprintf(stderr, "make_train_corpus: %s: %s\n", what, rp_error_detail());
  exit(1);
}

static void check(rp_status st, const char *what) {
  if (st)
    die(what);
}

static const char *path_of(const char *name) {
  static char buf[1024];
  snprintf(buf, sizeof buf, "%s/%s", sub, name);
  return buf;
}

static void into(const char *target) {
  snprintf(sub, sizeof sub, "%s/corpus_%s", root, target);
  if (mkdir(sub, 0777) != 0 && errno != EEXIST)
    die(sub);
}

static void spit(const char *name, const void *b, size_t n) {
  FILE *f = fopen(path_of(name), "wb");
  if (!f || fwrite(b, 1, n, f) != n || fclose(f) != 0)
    die(name);
}

static unsigned char *slurp(const char *name, size_t *n) {
  char *b;
  check(rp_file_read_regular(path_of(name), 1 << 20, &b, n), name);
  return (unsigned char *)b;
}

static void spit_str(const char *name, const char *s) {
  spit(name, s, strlen(s));
}

/* ---- data files ---- */

static void data_load(void) {
  into("data_load");
  rp_dataset d;
  check(rp_data_generate(RP_DATA_BLOBS, 5, 3, 3, 7, &d), "blobs");
  check(rp_data_save(&d, path_of("blobs.bin"), 0), "blobs.bin");
  check(rp_data_save(&d, path_of("blobs.csv"), 1), "blobs.csv");
  rp_data_free(&d);
  check(rp_data_generate(RP_DATA_SPIRALS, 3, 2, 2, 1, &d), "spirals");
  check(rp_data_save(&d, path_of("spirals.bin"), 0), "spirals.bin");
  rp_data_free(&d);
  /* every CSV feature the reader accepts: a byte order mark, comments,
   * blank lines, CRLF, blanks around fields, exponents */
  spit_str("features.csv", "\xef\xbb\xbf# a comment\r\n\r\nlabel, a ,b,c\r\n"
                           " 1 , 1e-3 , -2.5E+1 , .5\r\n  # another\n"
                           "0,+1,2,3\n\n2,0,0,0");
  spit_str("docs.csv", "label,x0,x1\n2,0.513,-1.25\n0,0.02,0.7\n");
  /* refused */
  spit_str("bad_columns.csv", "label,x0,x1\n1,2\n");
  spit_str("bad_label.csv", "label,x\ncat,1\n");
  spit_str("bad_hex.csv", "label,x\n1,0x10\n0,1\n");
  spit_str("bad_inf.csv", "label,x\n1,inf\n0,nan\n");
  spit_str("bad_one_class.csv", "label,x\n0,1\n0,2\n");
  size_t n;
  unsigned char *b = slurp("blobs.bin", &n);
  spit("bad_truncated.bin", b, n - 5);
  b[8] = 2; /* version 2 */
  spit("bad_version.bin", b, n);
  free(b);
  const unsigned char idx[] = {0, 0, 8, 1, 0, 0, 0, 2, 0, 1};
  spit("bad_idx.bin", idx, sizeof idx);
}

/* An IDX pair as the target takes it: the images' length (2 bytes,
 * big-endian), the images, the labels. */
static void idx_pair(const char *name, const unsigned char *img, size_t ni,
                     const unsigned char *lab, size_t nl) {
  unsigned char b[512];
  if (ni > 0xffff || 2 + ni + nl > sizeof b)
    die(name);
  b[0] = (unsigned char)(ni >> 8);
  b[1] = (unsigned char)ni;
  memcpy(b + 2, img, ni);
  memcpy(b + 2 + ni, lab, nl);
  spit(name, b, 2 + ni + nl);
}

static void data_idx(void) {
  into("data_idx");
  /* 4 images of 2 x 2, 4 labels */
  const unsigned char img3[] = {
      0, 0,  8,  3,  0,  0,  0,   4,   0,   0,   0,   2,   0,   0,   0,   2,
      0, 17, 34, 51, 68, 85, 102, 119, 136, 153, 170, 187, 204, 221, 238, 255};
  const unsigned char lab4[] = {0, 0, 8, 1, 0, 0, 0, 4, 0, 1, 2, 1};
  idx_pair("mnist_like.idx", img3, sizeof img3, lab4, sizeof lab4);
  /* 3 samples of 5 features (2 dimensions) */
  const unsigned char img2[] = {0, 0, 8, 2, 0, 0, 0, 3,  0,  0,  0,  5,  1, 2,
                                3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  const unsigned char lab3[] = {0, 0, 8, 1, 0, 0, 0, 3, 2, 0, 1};
  idx_pair("flat.idx", img2, sizeof img2, lab3, sizeof lab3);
  /* refused: counts that differ, another element type, trailing bytes */
  idx_pair("bad_counts.idx", img3, sizeof img3, lab3, sizeof lab3);
  unsigned char f32[sizeof img2];
  memcpy(f32, img2, sizeof img2);
  f32[2] = 0x0d;
  idx_pair("bad_type.idx", f32, sizeof f32, lab3, sizeof lab3);
  const unsigned char lab3x[] = {0, 0, 8, 1, 0, 0, 0, 3, 2, 0, 1, 9};
  idx_pair("bad_trailing.idx", img2, sizeof img2, lab3x, sizeof lab3x);
}

/* ---- checkpoints ---- */

/* A container of kind around payload, as rp_ckpt_save writes it. */
static unsigned char *container(const char *kind, uint32_t version,
                                const void *payload, size_t len, size_t *n) {
  check(rp_ckpt_save(path_of(".container"), kind, version, payload, len),
        "rp_ckpt_save");
  unsigned char *b = slurp(".container", n);
  if (remove(path_of(".container")) != 0)
    die("remove");
  return b;
}

/* A seed: the mode byte, then the file's n bytes. */
static void seed(const char *name, unsigned mode, const void *b, size_t n) {
  unsigned char *s = malloc(n + 1);
  if (!s)
    die("memory");
  s[0] = (unsigned char)mode;
  memcpy(s + 1, b, n);
  spit(name, s, n + 1);
  free(s);
}

/* A GPT payload (gpt.h "checkpoints") of 1 layer, `heads` heads, width 2,
 * context 2, vocabulary "abc"; version 2 has no text digest, version 1 no
 * layout fields either. */
static unsigned char *gpt_payload(uint32_t version, uint32_t heads, size_t *n) {
  const uint32_t L = 1, C = 2, T = 2, V = 3;
  size_t block = 12 * C * C + 13 * C;
  size_t floats = 3 * (V * C + T * C + L * block + 2 * C);
  size_t head = version == 1 ? 48 : version == 2 ? 60 : 68;
  *n = head + V + 4 * floats;
  unsigned char *b = calloc(*n, 1);
  if (!b)
    die("memory");
  uint32_t h[] = {L, heads, C, T, V, 4, 5 /* step */};
  for (int i = 0; i < 7; i++)
    rp_le_put32(b + 4 * i, h[i]);
  rp_le_putf(b + 28, 0.01f); /* lr */
  rp_le_put32(b + 32, 1);    /* warmup */
  rp_le_put32(b + 36, 10);   /* iters */
  rp_le_put64(b + 40, 7);    /* seed */
  if (version != 1) {
    rp_le_put32(b + 48, 1); /* procs, tp, ranks */
    rp_le_put32(b + 52, 1);
    rp_le_put32(b + 56, 1);
  }
  if (version > 2)
    rp_le_put64(b + 60, 0x5d3b1f0e2a4c6978ull); /* the text digest */
  memcpy(b + head, "abc", V);
  for (size_t i = 0; i < floats; i++) /* second moments >= 0 too */
    rp_le_putf(b + head + V + 4 * i, 0.125f * (float)(i % 9));
  return b;
}

static void gpt_seed(const char *name, unsigned mode, uint32_t version,
                     uint32_t heads, int must_load) {
  size_t pn, n;
  unsigned char *p = gpt_payload(version, heads, &pn);
  unsigned char *b = container("gpt", version, p, pn, &n);
  spit(name, b, n); /* the reader's own check, then the seed */
  rp_gpt_ckpt c;
  rp_status st = rp_gpt_ckpt_read(path_of(name), &c);
  if (must_load) {
    check(st, name);
    rp_gpt_ckpt_free(&c);
  }
  seed(name, mode, b, n);
  free(p);
  free(b);
}

static void gpt_ckpt(void) {
  into("gpt_ckpt");
  gpt_seed("v3.ckpt", 0, 3, 1, 1);
  gpt_seed("v3_reseal.ckpt", FZ_RESEAL, 3, 1, 1);
  gpt_seed("v2.ckpt", 0, 2, 1, 1);
  gpt_seed("v2_reseal.ckpt", FZ_RESEAL, 2, 1, 1);
  gpt_seed("v1_reseal.ckpt", FZ_RESEAL, 1, 1, 1);
  gpt_seed("two_heads_reseal.ckpt", FZ_RESEAL, 3, 2, 1);
  size_t pn, n;
  unsigned char *p = gpt_payload(3, 1, &pn);
  unsigned char *b = container("gpt", 3, p, pn, &n);
  b[n / 2] ^= 1; /* one bit: the checksum refuses it */
  seed("bad_checksum.ckpt", 0, b, n);
  seed("bad_torn.ckpt", 0, b, n - 7);
  free(b);
  b = container("mlp", 1, p, pn, &n);
  seed("bad_kind.ckpt", FZ_RESEAL, b, n);
  free(b);
  free(p);
}

/* An MLP weights record (mlp.h "Checkpoints") of widths w[0..layers]. */
static unsigned char *mlp_record(const uint32_t *w, uint32_t layers,
                                 size_t *n) {
  size_t floats = 0;
  for (uint32_t l = 0; l < layers; l++)
    floats += 2 * ((size_t)w[l] * w[l + 1] + w[l + 1]);
  size_t head = 48 + 4 * ((size_t)layers + 1);
  *n = head + 4 * floats + 8;
  unsigned char *b = calloc(*n, 1);
  if (!b)
    die("memory");
  memcpy(b, "RPRSWGHT", 8);
  rp_le_put32(b + 8, 1);
  rp_le_put32(b + 12, layers);
  rp_le_put32(b + 16, 3);    /* step */
  rp_le_putf(b + 20, 0.1f);  /* lr */
  rp_le_putf(b + 24, 0.01f); /* lr decay */
  rp_le_putf(b + 28, 0.9f);  /* momentum */
  rp_le_put32(b + 32, 4);    /* batch */
  rp_le_put32(b + 36, 1);    /* shuffled */
  rp_le_put64(b + 40, 9);    /* seed */
  for (uint32_t i = 0; i <= layers; i++)
    rp_le_put32(b + 48 + 4 * i, w[i]);
  for (size_t i = 0; i < floats; i++)
    rp_le_putf(b + head + 4 * i, 0.25f * (float)(i % 5) - 0.5f);
  fz_ckpt_reseal(b, *n, 1); /* the record's own checksum */
  return b;
}

static void mlp_seed(const char *name, unsigned mode, const unsigned char *b,
                     size_t n) {
  spit(name, b, n);
  rp_mlp_ckpt c;
  check(rp_mlp_ckpt_read(path_of(name), &c), name);
  rp_mlp_ckpt_free(&c);
  seed(name, mode, b, n);
}

static void mlp_ckpt(void) {
  into("mlp_ckpt");
  const uint32_t w[] = {2, 4, 3}, w1[] = {2, 3};
  size_t rn, n;
  unsigned char *r = mlp_record(w, 2, &rn);
  unsigned char *b = container("mlp", 1, r, rn, &n);
  mlp_seed("container.ckpt", 0, b, n);
  mlp_seed("container_reseal.ckpt", FZ_RESEAL, b, n);
  mlp_seed("bare.ckpt", 0, r, rn);
  mlp_seed("bare_reseal.ckpt", FZ_RESEAL, r, rn);
  b[n / 2] ^= 1;
  seed("bad_checksum.ckpt", 0, b, n);
  seed("bad_torn.ckpt", 0, b, n - 9);
  free(b);
  free(r);
  r = mlp_record(w1, 1, &rn);
  b = container("mlp", 1, r, rn, &n);
  mlp_seed("linear_reseal.ckpt", FZ_RESEAL, b, n);
  free(b);
  b = container("gpt", 2, r, rn, &n);
  seed("bad_kind.ckpt", FZ_RESEAL, b, n);
  free(b);
  free(r);
}

/* ---- text ---- */

static void text(void) {
  into("text");
  spit_str("prose.txt",
           "It was the best of times, it was the worst of times, it was the "
           "age of wisdom, it was the age of foolishness, it was the epoch "
           "of belief, it was the epoch of incredulity.\n");
  spit_str("two_bytes.txt", "abababababbababaabababababbabababaabababababba"
                            "babababababababbababaabababababbababab");
  unsigned char all[256];
  for (int i = 0; i < 256; i++)
    all[i] = (unsigned char)(255 - i);
  spit("every_byte.bin", all, sizeof all);
  spit_str("bad_one_byte.txt", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
                               "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
  spit_str("bad_short.txt", "abcdefghijklmnopqrstuvwxyz");
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  root = argv[1];
  data_load();
  data_idx();
  gpt_ckpt();
  mlp_ckpt();
  text();
  return 0;
}
