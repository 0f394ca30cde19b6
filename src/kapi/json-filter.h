/* A streaming JSON filter: bytes go in as they arrive, split anywhere, and
 * what comes out is compact JSON holding only the paths a spec asks for,
 * within a budget of values, bytes and depth.  jansson then parses only
 * that small output, so what a peer sends can make devlet's JSON tree no
 * larger than the budget, however many values its bytes hold.
 *
 * A spec names what is kept, in a small grammar:
 *   spec   := '{' member (',' member)* '}'   the named members of an object
 *           | '[' spec ']'                   every item of an array, as spec
 *           | '*' [N]                        the whole value; with N (at most
 *                                            KAPI_JSON_VALUES_DEFAULT), only
 *                                            its first N members or items
 *   member := name [spec]                    name alone: its whole value
 * e.g. "{metadata{resourceVersion},items[{metadata{name,labels*64}}]}".
 * Whitespace in a spec is ignored; a name is printable ASCII but {}[],*
 * and the quote and backslash (a key matches it once its escapes are
 * decoded).  A value whose type is not the spec's (an array where an
 * object is named) is kept empty ([] or {}), a scalar whole; the reader
 * checks types as it always does.  Duplicate keys are kept in order
 * (jansson takes the last, as it would have).
 *
 * The filter checks the JSON grammar enough to stay in sync (strings and
 * their escapes, numbers, literals, brackets); UTF-8 inside strings is
 * left to jansson, which sees what is kept.  Linear time, memory bounded
 * by the budget (the output) and the depth (the stack).  Pure: no I/O, no
 * threads, no blocking, never logs; a caller on an event loop can feed it
 * the same way.  Knows nothing of HTTP or Kubernetes. */
#ifndef DEVLET_KAPI_JSON_FILTER_H
#define DEVLET_KAPI_JSON_FILTER_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "base/diag.h"

/* Default budget: a tree of 32768 jansson values stays within about
 * 7 MiB (an empty object, the costliest value, is ~224 bytes of heap, an
 * empty array ~128), and compact JSON of 4 MiB (an API object is at most
 * 1.5 MiB, etcd's limit). */
#define KAPI_JSON_VALUES_DEFAULT 32768u
#define KAPI_JSON_BYTES_DEFAULT (4u << 20)
#define KAPI_JSON_DEPTH_DEFAULT 128u
#define KAPI_JSON_DEPTH_MAX 1024u

struct kapi_json_spec;

/* Compiles a spec.  Returns 0 and *out, or -EINVAL for a text that is not
 * the grammar's. */
int kapi_json_spec_new(const char *text, struct kapi_json_spec **out);
void kapi_json_spec_free(struct kapi_json_spec *s);

/* What one document may keep (0: the default).  Values count every kept
 * scalar, array, object and key. */
struct kapi_json_budget {
        size_t max_values;
        size_t max_bytes;  /* of the kept, compact JSON */
        unsigned max_depth; /* of the document, kept or not; at most KAPI_JSON_DEPTH_MAX */
};

struct kapi_json_filter;

/* A filter for one document (spec NULL: keep it all, within the budget).
 * spec is borrowed and must outlive the filter. */
struct kapi_json_filter *kapi_json_filter_new(const struct kapi_json_spec *spec,
                                              const struct kapi_json_budget *budget);
void kapi_json_filter_free(struct kapi_json_filter *f);
/* Ready for another document; the same spec and budget. */
void kapi_json_filter_reset(struct kapi_json_filter *f);

/* Feeds the next bytes of the document.  Returns 0, or once and for all
 * (later calls return the same) with kapi_json_filter_why():
 *   -EBADMSG   not JSON (what and at which byte), or bytes after the
 *              document that are not whitespace
 *   -EMSGSIZE  over the budget: "over N values", "over N bytes kept",
 *              "nested deeper than N" */
int kapi_json_filter_feed(struct kapi_json_filter *f, const char *data, size_t len);
/* The input ended.  Returns 0 and the kept JSON in *out and *len
 * (borrowed: valid until the next call on f; *out NULL and *len 0 when
 * the input was only whitespace), or -EBADMSG (the document is cut
 * short) or feed's error. */
int kapi_json_filter_finish(struct kapi_json_filter *f, const char **out, size_t *len);
/* Why the filter failed, "" before. */
const char *kapi_json_filter_why(const struct kapi_json_filter *f);

/* One buffer through a filter, then jansson (flags: json_loadb's).
 * spec may be NULL.  Returns 0 and *out (NULL for a buffer of only
 * whitespace), or -EBADMSG/-EMSGSIZE with diag. */
int kapi_json_load(const char *data, size_t len, const struct kapi_json_spec *spec,
                   const struct kapi_json_budget *budget, size_t flags, json_t **out,
                   struct diag *diag);

#endif
