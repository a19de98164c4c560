/* train/data.h — classification data sets for `reprise train`: synthetic
 * ones generated deterministically from a seed, and files in the two formats
 * below. Host memory only; train/mlp.c copies a data set into instances.
 *
 * A data set is n samples of `features` f32 values (row-major: sample i's
 * values are x[i*features .. (i+1)*features)) and an int32 label in
 * [0, classes) each.
 *
 * File formats (docs/training.md "Data files"), told apart by their first
 * bytes:
 *
 * CSV (text). The first line that is not a comment (a line whose first
 * character is '#') is the header: `label` followed by one name per
 * feature column, comma separated (names are free text). Every following
 * line is one sample: an integer label in [0, 65535] and exactly as many
 * numbers as the header has feature columns (anything strtof reads that is
 * finite). Blanks around fields, a '\r' before the newline, blank lines and
 * comment lines are accepted. classes = largest label + 1 (at least 2).
 *
 * Binary (little-endian):
 *   bytes 0..7    magic "RPRSDATA"
 *   bytes 8..11   u32 version, 1
 *   bytes 12..15  u32 n         (samples, >= 1)
 *   bytes 16..19  u32 features  (>= 1)
 *   bytes 20..23  u32 classes   (2..65536)
 *   then n*features f32 (sample-major), then n i32 labels in [0, classes);
 *   the file ends right there.
 *
 * Errors (rp_data_load): RP_ENOENT / RP_EIO when the file cannot be opened
 * or read; RP_EFORMAT for a malformed file, the detail naming the file and
 * the line (CSV) or the byte offset / sample (binary): a wrong header, a
 * wrong column count, a bad label, a bad number, no samples, a truncated or
 * overlong binary file; RP_EVERSION for a binary version other than 1;
 * RP_ERANGE for a data set above RP_DATA_MAX_BYTES, a file above its size
 * limit or a CSV line above RP_DATA_MAX_LINE; RP_EINVAL for a path that is
 * not a regular file; RP_ENOMEM. */
#ifndef RP_TRAIN_DATA_H
#define RP_TRAIN_DATA_H

#include "reprise.h"

#include <stddef.h>
#include <stdint.h>

/* Largest data set a file may hold: features and labels together. */
#define RP_DATA_MAX_BYTES ((uint64_t)1 << 30)
/* Input bounds (docs/training.md "Data files"): a data file must be a regular
 * file (FIFOs, devices and directories are refused: RP_EINVAL) of at most
 * RP_DATA_FILE_MAX bytes unless the caller sets another limit
 * (rp_data_load_max; `reprise train --max-bytes`), and a CSV line may have
 * at most RP_DATA_MAX_LINE bytes (RP_ERANGE naming the line). */
#define RP_DATA_FILE_MAX ((uint64_t)4 << 30)
#define RP_DATA_MAX_LINE (1u << 20)
#define RP_DATA_MAX_CLASSES 65536u

typedef struct rp_dataset {
  uint32_t n, features, classes;
  float *x;   /* n * features, owned */
  int32_t *y; /* n, owned */
} rp_dataset;

typedef enum rp_data_kind {
  /* `classes` interleaved spiral arms in the plane (features must be 2):
   * arm k is r = t, angle = 2 pi k / classes + 4 t + noise, t ~ U(0, 1).
   * Learnable by a small MLP, not by a linear model. */
  RP_DATA_SPIRALS = 0,
  /* Gaussian clusters: class k centred at c_k ~ N(0, (9 / features) I) in
   * `features` dimensions (centres about 4.2 apart in any dimension),
   * samples c_k + N(0, I). Any feature count. */
  RP_DATA_BLOBS = 1,
} rp_data_kind;

/* A deterministic pseudo-random stream (splitmix64): the same seed gives
 * the same data set and the same initial weights on every run. */
typedef struct rp_rng {
  uint64_t s;
} rp_rng;
void rp_rng_seed(rp_rng *r, uint64_t seed);
uint64_t rp_rng_next(rp_rng *r);
/* Uniform in [0, 1) (24 random bits). */
float rp_rng_uniform(rp_rng *r);
/* Standard normal (Box-Muller). */
float rp_rng_normal(rp_rng *r);

/* Generates n samples of the given kind; labels are drawn uniformly. *out
 * is owned by the caller (rp_data_free). RP_EINVAL for n == 0, classes < 2
 * or > RP_DATA_MAX_CLASSES, features == 0, spirals with features != 2, or
 * an unknown kind; RP_ERANGE above RP_DATA_MAX_BYTES; RP_ENOMEM. */
rp_status rp_data_generate(rp_data_kind kind, uint32_t n, uint32_t features,
                           uint32_t classes, uint64_t seed, rp_dataset *out);

/* Reads a data file (CSV or binary, see above) into *out (owned by the
 * caller). On error *out is untouched and nothing is leaked. */
rp_status rp_data_load(const char *path, rp_dataset *out);
/* rp_data_load with a file size limit of max_bytes (0: RP_DATA_FILE_MAX):
 * RP_ERANGE for a larger file. */
rp_status rp_data_load_max(const char *path, uint64_t max_bytes,
                           rp_dataset *out);
/* rp_data_load_max with a data set limit of max_data bytes (samples x
 * (features + 1) x 4) below RP_DATA_MAX_BYTES (0 or more: that limit):
 * RP_ERANGE for a larger data set, a CSV file's naming the line whose
 * row would pass it. */
rp_status rp_data_load_limits(const char *path, uint64_t max_bytes,
                              uint64_t max_data, rp_dataset *out);

/* Reads an IDX (MNIST-style) pair: `images`, an idx3 file of unsigned
 * bytes (any 2..8 dimensions: the first counts samples, the others are
 * flattened into features; each byte v becomes v / 255.0f), and `labels`,
 * an idx1 file of unsigned bytes with as many entries; classes = largest
 * label + 1 (at least 2). Both must be regular files of at most max_bytes
 * (0: RP_DATA_FILE_MAX). RP_EFORMAT, naming the file, for a bad magic, an
 * element type other than 0x08, the wrong number of dimensions, a zero
 * size, a truncated file, trailing bytes, or sample and label counts that
 * differ; RP_ERANGE above the limits; errors of rp_data_load otherwise. On
 * error *out is untouched. rp_data_load refuses an IDX file (it needs its
 * labels) with RP_EFORMAT. */
rp_status rp_data_load_idx(const char *images, const char *labels,
                           uint64_t max_bytes, rp_dataset *out);

/* A seeded permutation of 0..n-1 into perm (n entries; Fisher-Yates from
 * rp_rng): the same seed gives the same permutation everywhere. */
void rp_data_permutation(uint32_t n, uint64_t seed, uint32_t *perm);

/* Holds out nval samples (1..n-1), chosen by a permutation seeded from
 * `seed`, into *val; *all keeps the others. Both keep the samples' relative
 * order and the data set's classes. On error both are untouched. */
rp_status rp_data_split(rp_dataset *all, uint32_t nval, uint64_t seed,
                        rp_dataset *val);

/* Writes d to path as CSV (csv = 1; "%.9g" numbers, so it reads back
 * bitwise) or binary. RP_EIO when writing fails. */
rp_status rp_data_save(const rp_dataset *d, const char *path, int csv);

/* Frees the arrays and zeroes *d. NULL is a no-op. */
void rp_data_free(rp_dataset *d);

/* "spirals" / "blobs" -> kind; 0 ok, -1 unknown. */
int rp_data_kind_parse(const char *s, rp_data_kind *out);
const char *rp_data_kind_name(rp_data_kind k);

#endif
