/* capture/json_strict.h — one JSON document, strictly: the parse behind
 * graph files, traces and the command line's JSON inputs. */
#ifndef RP_JSON_STRICT_H
#define RP_JSON_STRICT_H

#include "reprise.h"

#include <stddef.h>
#include <stdint.h>

/* JSON values per graph file: cJSON spends ~64 bytes per value, so this
 * bounds the parse tree at ~256 MiB even for a file of nothing but
 * "[0,0,0,...". */
#define RP_GRAPH_MAX_VALUES (4u << 20)

#ifdef REPRISE_HAVE_CJSON
#include <cJSON.h>

/* Parses text[0, len) (not necessarily NUL-terminated) as exactly one JSON
 * document into *out (the caller frees it with cJSON_Delete); a UTF-8
 * byte order mark before it is skipped. RP_EFORMAT, naming the byte, when
 * it is empty, is not JSON (a syntax error, a number not of JSON's form, a
 * \u escape of other than 4 hex digits, or text that ends early: inside a
 * string, a literal, a number or between tokens), holds a NUL byte or a
 * \u0000 escape (either would cut a string short), has a byte below 0x20
 * other than tab, LF or CR outside strings,
 * or has more than white space after the document; RP_ERANGE, before any
 * parse, when it holds more than max_values values or nests deeper than
 * CJSON_NESTING_LIMIT (1000) levels; RP_ENOMEM. *out is written only on
 * success. Thread-safe. */
rp_status rp__json_parse_strict(const char *text, size_t len,
                                uint64_t max_values, cJSON **out);
#endif

#endif
