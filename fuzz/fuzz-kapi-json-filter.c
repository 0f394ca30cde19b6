/* libFuzzer target for the streaming JSON filter (kapi/json-filter.c), what
 * every JSON devlet reads from a peer goes through.  The first input byte picks
 * a spec (none, a pod list's, a watch event's, an array's, "*"; some with
 * caps) and a piece size (1..32); the rest is the document.  Checks (abort
 * otherwise): the outcome (error, reason, what is kept) is the same fed whole
 * and fed in pieces; what is kept is within the budget, and is itself kept
 * unchanged by a keep-all filter (compact, grammatical JSON); with no spec, a
 * document jansson reads (within the depth and budget; without a NUL byte,
 * where jansson stops reading) is kept, and jansson reads the same value from
 * what is kept; a failure always says why.  Seeds:
 * fuzz/corpus/fuzz-kapi-json-filter/. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kapi/json-filter.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define VALUES_MAX 4096
#define BYTES_MAX (256u << 10)
#define DEPTH_MAX 64

static void check(bool ok, const char *what)
{
        if (!ok) {
                fprintf(stderr, "kapi-json-filter: %s\n", what);
                abort();
        }
}

static const char *const specs[] = {
        NULL,
        "{metadata{resourceVersion,continue},items[{metadata{name,namespace,uid,labels*3}}]}",
        "{type,object{metadata{name,resourceVersion,labels},code}}",
        "[{a*2,b[{c}]}]",
        "*",
};

struct result {
        int r;
        char *kept; /* or why */
        size_t len;
};

static const struct kapi_json_budget budget = {
        .max_values = VALUES_MAX, .max_bytes = BYTES_MAX, .max_depth = DEPTH_MAX
};

static struct result filter(const struct kapi_json_spec *spec, const char *in, size_t n,
                            size_t piece)
{
        struct kapi_json_filter *f = kapi_json_filter_new(spec, &budget);
        int r = 0;
        for (size_t at = 0; at < n && r == 0; at += piece)
                r = kapi_json_filter_feed(f, in + at, n - at < piece ? n - at : piece);
        const char *kept = NULL;
        size_t len = 0;
        if (r == 0)
                r = kapi_json_filter_finish(f, &kept, &len);
        struct result res = { .r = r };
        if (r == 0) {
                res.len = len;
                res.kept = malloc(len + 1);
                if (len)
                        memcpy(res.kept, kept, len);
                res.kept[len] = '\0';
        } else {
                const char *why = kapi_json_filter_why(f);
                check(why[0] != '\0', "a failure without its reason");
                check(r == -EBADMSG || r == -EMSGSIZE, "an error outside the contract");
                res.kept = strdup(why);
                res.len = strlen(why);
        }
        kapi_json_filter_free(f);
        return res;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (size < 1)
                return 0;
        const char *spec_text = specs[data[0] % (sizeof(specs) / sizeof(specs[0]))];
        size_t piece = 1 + (data[0] >> 3);
        const char *in = (const char *)data + 1;
        size_t n = size - 1;
        struct kapi_json_spec *spec = NULL;
        if (spec_text)
                check(kapi_json_spec_new(spec_text, &spec) == 0, "a spec of the table refused");

        struct result whole = filter(spec, in, n, n ? n : 1);
        struct result cut = filter(spec, in, n, piece);
        check(whole.r == cut.r && whole.len == cut.len &&
                      memcmp(whole.kept, cut.kept, whole.len) == 0,
              "fed whole and in pieces differ");

        if (whole.r == 0 && whole.len) {
                check(whole.len <= BYTES_MAX, "kept over the budget's bytes");
                /* what is kept is compact JSON a filter keeps as it is */
                struct result again = filter(NULL, whole.kept, whole.len, whole.len);
                check(again.r == 0 && again.len == whole.len &&
                              memcmp(again.kept, whole.kept, whole.len) == 0,
                      "what is kept is not kept unchanged by another filter");
                free(again.kept);
        }

        /* jansson takes a NUL byte for the end of its input */
        if (!spec_text && !memchr(in, '\0', n)) {
                json_error_t je;
                json_t *j = json_loadb(in, n, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
                if (j && whole.r != -EMSGSIZE) {
                        check(whole.r == 0, "jansson reads a document the filter refuses");
                        json_t *k = json_loadb(whole.kept, whole.len,
                                               JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
                        check(k && json_equal(j, k), "what is kept is not the same value");
                        json_decref(k);
                }
                json_decref(j);
        }
        free(whole.kept);
        free(cut.kept);
        kapi_json_spec_free(spec);
        return 0;
}
