/* kernels/embed.c — the GPT embeddings on the CPU (contracts in
 * gpt_kernels.h): token + position lookup, its backward, and the one-token
 * lookup of decoding. Tokens are checked before anything is written. */
#include "gpt_kernels.h"

#include "engine/util.h"

#include <string.h>

/* RP_ERANGE for the first token outside [0, V), in (b, t) order. */
static rp_status tokens_ok(const char *fn, const int32_t *tokens, size_t n,
                           int V) {
  for (size_t i = 0; i < n; i++)
    if (tokens[i] < 0 || tokens[i] >= V)
      return rp__err(RP_ERANGE, "%s: token %d at row %zu outside [0, %d)", fn,
                     (int)tokens[i], i, V);
  return RP_OK;
}

rp_status rp_cpu_gpt_embed_fwd(const int32_t *tokens, const float *wte,
                               const float *wpe, float *out, int B, int T,
                               int C, int V) {
  size_t rows = (size_t)B * (size_t)T, c = (size_t)C;
  rp_status st = tokens_ok("gpt.embed_fwd", tokens, rows, V);
  if (st != RP_OK)
    return st;
  for (size_t r = 0; r < rows; r++) {
    const float *e = wte + (size_t)tokens[r] * c;
    const float *p = wpe + (r % (size_t)T) * c;
    float *o = out + r * c;
    for (size_t i = 0; i < c; i++)
      o[i] = e[i] + p[i];
  }
  return RP_OK;
}

rp_status rp_cpu_gpt_embed_bwd(const int32_t *tokens, const float *dout,
                               float *dwte, float *dwpe, int B, int T, int C,
                               int V) {
  size_t rows = (size_t)B * (size_t)T, c = (size_t)C;
  rp_status st = tokens_ok("gpt.embed_bwd", tokens, rows, V);
  if (st != RP_OK)
    return st;
  memset(dwpe, 0, (size_t)T * c * sizeof *dwpe);
  /* rows in increasing (b, t) order: each dwte row and each dwpe row sums
   * its contributions in that order */
  for (size_t r = 0; r < rows; r++) {
    const float *d = dout + r * c;
    float *e = dwte + (size_t)tokens[r] * c;
    float *p = dwpe + (r % (size_t)T) * c;
    for (size_t i = 0; i < c; i++) {
      e[i] += d[i];
      p[i] += d[i];
    }
  }
  return RP_OK;
}

rp_status rp_cpu_gpt_embed_token(const float *wte, const float *wpe, float *out,
                                 int pos, int token, int C, int V, int T) {
  if (pos < 0 || pos >= T || token < 0 || token >= V)
    return rp__err(RP_ERANGE,
                   "gpt.embed_token: pos %d (need [0, %d)), token %d (need "
                   "[0, %d))",
                   pos, T, token, V);
  const float *e = wte + (size_t)token * (size_t)C;
  const float *p = wpe + (size_t)pos * (size_t)C;
  for (int i = 0; i < C; i++)
    out[i] = e[i] + p[i];
  return RP_OK;
}
