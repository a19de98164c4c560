/* test/json_ref.h — a reference JSON validator for differential checks of
 * rp__json_parse_strict (test_json_strict, test/fuzz/fuzz_json.c).
 *
 * Written from RFC 8259's grammar and nothing else, recursively, so that it
 * shares no code or structure with the library's scan and json_valid. It
 * reads what rp__json_parse_strict documents as JSON: RFC 8259, nested at
 * most 1000 levels, where a \u escape of half a surrogate pair (which cJSON
 * refuses) is no character, a byte below 0x20 inside a string (which cJSON
 * copies) is one, as is any byte of 0x80 and above (UTF-8 is not checked),
 * and a UTF-8 byte order mark may open the text (RFC 8259 8.1: a parser
 * may ignore it). A NUL byte is no character anywhere. */
#ifndef RP_TEST_JSON_REF_H
#define RP_TEST_JSON_REF_H

#include <stddef.h>
#include <string.h>

typedef struct jr_text {
  const unsigned char *s;
  size_t n, i;
  int depth;
} jr_text;

#define JR_MAX_DEPTH 1000

static int jr_value(jr_text *t);

static void jr_ws(jr_text *t) {
  while (t->i < t->n && (t->s[t->i] == ' ' || t->s[t->i] == '\t' ||
                         t->s[t->i] == '\n' || t->s[t->i] == '\r'))
    t->i++;
}

static int jr_is_digit(jr_text *t) {
  return t->i < t->n && t->s[t->i] >= '0' && t->s[t->i] <= '9';
}

/* 4 hex digits at t->i into *u. */
static int jr_hex4(jr_text *t, unsigned *u) {
  *u = 0;
  for (int k = 0; k < 4; k++, t->i++) {
    if (t->i >= t->n)
      return 0;
    unsigned char c = t->s[t->i];
    unsigned d;
    if (c >= '0' && c <= '9')
      d = c - '0';
    else if (c >= 'a' && c <= 'f')
      d = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F')
      d = c - 'A' + 10;
    else
      return 0;
    *u = *u * 16 + d;
  }
  return 1;
}

static int jr_string(jr_text *t) {
  t->i++; /* the opening quote */
  for (;;) {
    if (t->i >= t->n)
      return 0;
    unsigned char c = t->s[t->i++];
    if (c == '"')
      return 1;
    if (c == 0)
      return 0;
    if (c != '\\')
      continue;
    if (t->i >= t->n)
      return 0;
    c = t->s[t->i++];
    if (c == 'u') {
      unsigned u, v;
      if (!jr_hex4(t, &u) || (u >= 0xdc00 && u <= 0xdfff))
        return 0;
      if (u >= 0xd800 && u <= 0xdbff) {
        if (t->i + 2 > t->n || t->s[t->i] != '\\' || t->s[t->i + 1] != 'u')
          return 0;
        t->i += 2;
        if (!jr_hex4(t, &v) || v < 0xdc00 || v > 0xdfff)
          return 0;
      }
    } else if (c != '"' && c != '\\' && c != '/' && c != 'b' && c != 'f' &&
               c != 'n' && c != 'r' && c != 't') {
      return 0;
    }
  }
}

static int jr_number(jr_text *t) {
  if (t->i < t->n && t->s[t->i] == '-')
    t->i++;
  if (!jr_is_digit(t))
    return 0;
  if (t->s[t->i++] != '0')
    while (jr_is_digit(t))
      t->i++;
  if (t->i < t->n && t->s[t->i] == '.') {
    t->i++;
    if (!jr_is_digit(t))
      return 0;
    while (jr_is_digit(t))
      t->i++;
  }
  if (t->i < t->n && (t->s[t->i] == 'e' || t->s[t->i] == 'E')) {
    t->i++;
    if (t->i < t->n && (t->s[t->i] == '+' || t->s[t->i] == '-'))
      t->i++;
    if (!jr_is_digit(t))
      return 0;
    while (jr_is_digit(t))
      t->i++;
  }
  return 1;
}

static int jr_literal(jr_text *t, const char *lit) {
  size_t k = strlen(lit);
  if (t->n - t->i < k || memcmp(t->s + t->i, lit, k))
    return 0;
  t->i += k;
  return 1;
}

/* '[' or '{' at t->i: the elements (members), then the closing bracket. */
static int jr_container(jr_text *t) {
  int object = t->s[t->i] == '{';
  char close = object ? '}' : ']';
  if (++t->depth > JR_MAX_DEPTH)
    return 0;
  t->i++;
  jr_ws(t);
  if (t->i < t->n && t->s[t->i] == close) {
    t->i++;
    t->depth--;
    return 1;
  }
  for (;;) {
    if (object) {
      if (t->i >= t->n || t->s[t->i] != '"' || !jr_string(t))
        return 0;
      jr_ws(t);
      if (t->i >= t->n || t->s[t->i] != ':')
        return 0;
      t->i++;
      jr_ws(t);
    }
    if (!jr_value(t))
      return 0;
    jr_ws(t);
    if (t->i >= t->n)
      return 0;
    if (t->s[t->i] == close) {
      t->i++;
      t->depth--;
      return 1;
    }
    if (t->s[t->i] != ',')
      return 0;
    t->i++;
    jr_ws(t);
  }
}

static int jr_value(jr_text *t) {
  if (t->i >= t->n)
    return 0;
  switch (t->s[t->i]) {
  case '[':
  case '{':
    return jr_container(t);
  case '"':
    return jr_string(t);
  case 't':
    return jr_literal(t, "true");
  case 'f':
    return jr_literal(t, "false");
  case 'n':
    return jr_literal(t, "null");
  default:
    return jr_number(t);
  }
}

/* 1 when s[0, n) is one JSON document as described above; else 0, and
 * *stop (unless NULL) is where the reading stopped. */
static inline int jr_valid_at(const void *s, size_t n, size_t *stop) {
  jr_text t = {s, n, 0, 0};
  if (n >= 3 && !memcmp(s, "\xef\xbb\xbf", 3))
    t.i = 3;
  jr_ws(&t);
  int ok = jr_value(&t);
  if (ok)
    jr_ws(&t);
  if (stop)
    *stop = t.i;
  return ok && t.i == n;
}

static inline int jr_valid(const void *s, size_t n) {
  return jr_valid_at(s, n, NULL);
}

/* 1 when s[0, n) holds what rp__json_parse_strict refuses in a valid
 * document: a NUL byte, or a \u0000 escape (either would cut a string). */
static inline int jr_has_nul(const void *s, size_t n) {
  const unsigned char *b = s;
  if (memchr(b, 0, n))
    return 1;
  for (size_t i = 0; i + 6 <= n; i++) /* "\\u0000" is no escape of one */
    if (b[i] == '\\') {
      if (b[i + 1] == 'u' && !memcmp(b + i + 2, "0000", 4))
        return 1;
      i++;
    }
  return 0;
}

#endif
