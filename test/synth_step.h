/* test/synth_step.h — a synthetic transformer-shaped step for the dump
 * views' tests and benchmark: L layers of dotted-name ops
 * (h{l}.ln1, h{l}.attn.qkv, ..., h{l}.mlp.proj, forward then backward),
 * an embedding, a head and the loss, on 2 CPU processors, with the copies
 * between them. Built with the graph builder (explicit edges), saved with
 * rp_graph_save, so `reprise dump` loads it like a recorded step. */
#ifndef RP_TEST_SYNTH_STEP_H
#define RP_TEST_SYNTH_STEP_H

#include "reprise.h"

#include <stdint.h>

/* Ops per layer (forward and backward, copies included). */
#define SYNTH_OPS_PER_LAYER 22u
/* Ops outside the layers (embed, head, loss). */
#define SYNTH_OPS_FIXED 4u

/* The layers that make about `ops` ops (at least 1). */
uint32_t synth_layers_for(uint32_t ops);

/* Builds the step of `layers` layers into a new graph on rt (a CPU runtime
 * with at least 2 workers), its instances created on rt (freed by
 * synth_free). The kernels must be registered (rp_kernels_register). */
rp_status synth_step_build(rp_runtime *rt, uint32_t layers, rp_graph **out);

/* Destroys the graph and frees its instances. */
void synth_free(rp_runtime *rt, rp_graph *g);

/* Builds a step of about `ops` ops on a 2-worker CPU runtime and saves it
 * to path; `variant` 1 renames one op and drops one edge (for --diff).
 * RP_OK or the failing status (rp_error_detail says why). */
rp_status synth_step_save(uint32_t ops, int variant, const char *path);

#endif
