/* capture/graph_io.h — the graph file format, shared by the writer
 * (graph_io.c) and the loader (graph_load.c); nothing else includes it.
 *
 * A graph file is JSON (through cJSON): human-readable, diffable, and
 * versioned by its header. The layout (docs/debugging.md "Graph files"):
 *
 *   {"format": "reprise-graph", "version": 1,
 *    "checksum": "fnv1a64:<16 hex digits>",
 *    "graph": {"instances": [...], "ops": [...], "edges": [[from, to], ...],
 *              "preconditions": [{"name": ..., "ops": [...]}, ...],
 *              "postconditions": [...]}}
 *
 * A graph with mirrors (copy insertion, capture.h) also has
 *   "mirrors": [{"id": k, "source": <instance index>, "mem": "gpu",
 *                "device": 0}, ...]
 * and its ops name mirror k as {"mirror": k} where an instance index
 * would stand (an access's "inst", a copy's "src" or "dst"); such a
 * reference uses its source in the instance table's first-use order. The
 * key is optional and written only for graphs with mirrors, so every other
 * graph's file is unchanged and version 1 stays the version: builds from
 * before copy insertion read those files, and refuse files with mirrors
 * (RP_EFORMAT, unknown key "mirrors").
 *
 * The checksum is FNV-1a 64 over the canonical text of the "graph" value
 * (see rp__graph_checksum), so whitespace and layout do not matter but any
 * changed value does. Integers of more than 15 digits are written as
 * decimal strings (RP_JSON_PRINT_EXACT); the loader takes either form. */
#ifndef RP_GRAPH_IO_H
#define RP_GRAPH_IO_H

#include "capture_impl.h"
#include "json_strict.h"

#define RP_GRAPH_FORMAT "reprise-graph"
#define RP_GRAPH_VERSION 1
#define RP_GRAPH_CHECKSUM_PREFIX "fnv1a64:"

/* Limits on what a file may ask for, so a hostile or corrupt file cannot
 * make the loader exhaust memory. Each is far above a real training step
 * (a large one has ~10^4 ops, ~10^3 instances, a few ports). */
/* bytes per file: RP_GRAPH_FILE_MAX (capture.h) */
/* JSON values per file: RP_GRAPH_MAX_VALUES (json_strict.h) */
#define RP_GRAPH_MAX_OPS (1u << 20)
#define RP_GRAPH_MAX_EDGES (4u << 20)
#define RP_GRAPH_MAX_INSTS (1u << 20)
/* Ports per direction. The builder checks each port's name against the
 * earlier ones, so this also bounds its quadratic work. */
#define RP_GRAPH_MAX_PORTS 4096u
#define RP_GRAPH_MAX_ACCESSES (1u << 16)  /* per task op */
#define RP_GRAPH_MAX_INTERPS (1u << 12)   /* per task op */
#define RP_GRAPH_MAX_SHARDS RP_MAX_SHARDS /* the builder's limit */
/* Ports: ops per port and bindings per file. The builder checks each
 * binding against the port's earlier ones, so these also bound its
 * quadratic work. */
#define RP_GRAPH_MAX_PORT_OPS 4096u
#define RP_GRAPH_MAX_BINDINGS (1u << 16)

/* The largest magnitude read as a JSON number: 2^53 - 1. From 2^53 on,
 * doubles skip integers (2^53 + 1 parses as 2^53), so such values must be
 * decimal strings. */
#define RP_JSON_EXACT_INT 9007199254740991.0
/* The largest magnitude the writer puts as a JSON number: cJSON prints a
 * number with 15 significant digits unless that reads back within its
 * relative epsilon, so 16 digits (9007199254739409 prints as
 * 9.00719925473941e+15) may come back one off: from 10^15 on, integers are
 * decimal strings (a fuzz finding). */
#define RP_JSON_PRINT_EXACT 999999999999999ull

#ifdef REPRISE_HAVE_CJSON
#include <cJSON.h>

/* FNV-1a 64 over the canonical text of v: compact JSON (no whitespace),
 * members in file order, strings with only '"', '\\' and bytes below 0x20
 * escaped (\", \\, \u00xx), integral numbers below 2^63 in magnitude as
 * plain decimal, other numbers as "%.17g". */
uint64_t rp__graph_checksum(const cJSON *v);
#endif

#endif
