/* comm/runtime.c — the public rp_runtime_create: a thin composition above
 * the engine. The engine builds the runtime (processors, memories,
 * backends; engine/runtime.c); then the layers that attach themselves at
 * creation do so, today the communication layer (the user's communicator,
 * duplicated: a collective call). The engine calls none of them, so the
 * folders keep their order (docs/architecture.md "Layers"). */
#include "comm.h"

rp_status rp_runtime_create(const rp_runtime_config *cfg, rp_runtime **out) {
  rp_status st = rp__runtime_create_engine(cfg, out);
  if (st)
    return st;
  /* last: once the runtime can allocate instances and register tasks; the
   * configuration with the environment applied (REPRISE_DIST_TIMEOUT_MS) */
  if ((st = rp__dist_attach(*out, rp__runtime_config(*out))) != RP_OK) {
    rp__runtime_discard(*out);
    *out = NULL;
  }
  return st;
}

rp_status rp_runtime_create_model(const rp_machine_desc *m, rp_runtime **out) {
  rp_status st = rp__runtime_create_model(m, out);
  if (st)
    return st;
  /* no communicator: the single rank's state, as every runtime has */
  if ((st = rp__dist_attach(*out, rp__runtime_config(*out))) != RP_OK) {
    rp_runtime_destroy(*out);
    *out = NULL;
  }
  return st;
}
