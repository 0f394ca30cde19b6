/* What decoding a request would cost, read from its wire bytes before
 * protobuf-c decodes it.
 *
 * protobuf-c allocates per field on the wire (a scanned-member record for
 * each, a struct or a string for each entry of a repeated field, a copy of
 * each unknown field), so a 4 MiB request of 2-byte empty entries costs it
 * over 200 MiB.  grpc_pb_check walks the message by its descriptor
 * instead: tags and varints read strictly, length-delimited fields skipped
 * (descended into where the schema says they are messages), every field
 * and every entry of each repeated field counted, and stops at the first
 * limit passed.  It allocates nothing and recurses at most PB_DEPTH_MAX
 * deep.  Pure: unit-tested (tests/unit/test-grpc-pbwire.c) and fuzzed. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "base/diag.h"
#include "grpc/grpc.h"

#define PB_DEPTH_MAX 32
#define PB_SLOTS 16 /* distinct repeated fields counted apart; more share the last */

struct pb_walk {
        const struct grpc_pb_limits *lim;
        const ProtobufCMessageDescriptor *top;
        struct diag *diag;
        size_t fields;
        struct {
                const ProtobufCFieldDescriptor *field;
                size_t n;
        } slot[PB_SLOTS];
        size_t n_slots;
};

/* A varint of at most max bytes at *at, within len.  -EBADMSG when it is
 * cut short or longer than max. */
static int read_varint(const uint8_t *p, size_t len, size_t *at, unsigned max, uint64_t *out)
{
        uint64_t v = 0;
        for (unsigned i = 0; i < max; i++) {
                if (*at >= len)
                        return -EBADMSG;
                uint8_t b = p[(*at)++];
                v |= (uint64_t)(b & 0x7f) << (7 * i);
                if (!(b & 0x80)) {
                        *out = v;
                        return 0;
                }
        }
        return -EBADMSG;
}

/* Entries in a packed run of a repeated scalar field. */
static size_t packed_count(ProtobufCType type, const uint8_t *p, size_t len)
{
        switch (type) {
        case PROTOBUF_C_TYPE_FIXED32:
        case PROTOBUF_C_TYPE_SFIXED32:
        case PROTOBUF_C_TYPE_FLOAT:
                return len / 4;
        case PROTOBUF_C_TYPE_FIXED64:
        case PROTOBUF_C_TYPE_SFIXED64:
        case PROTOBUF_C_TYPE_DOUBLE:
                return len / 8;
        case PROTOBUF_C_TYPE_STRING:
        case PROTOBUF_C_TYPE_BYTES:
        case PROTOBUF_C_TYPE_MESSAGE:
                return 1;
        default: { /* varints: each ends with a byte below 0x80 */
                size_t n = 0;
                for (size_t i = 0; i < len; i++)
                        n += p[i] < 0x80;
                return n;
        }
        }
}

static int count_entries(struct pb_walk *w, const ProtobufCMessageDescriptor *d,
                         const ProtobufCFieldDescriptor *f, size_t n)
{
        size_t i = 0;
        while (i < w->n_slots && w->slot[i].field != f)
                i++;
        if (i == w->n_slots) {
                if (w->n_slots < PB_SLOTS)
                        w->slot[w->n_slots++].field = f;
                else
                        i = PB_SLOTS - 1;
        }
        w->slot[i].n += n;
        if (w->slot[i].n > w->lim->max_entries)
                return diag_set(w->diag, -E2BIG, "%s.%s: more than %zu entries", d->short_name,
                                f->name, w->lim->max_entries);
        return 0;
}

static int walk(struct pb_walk *w, const ProtobufCMessageDescriptor *d, const uint8_t *p,
                size_t len, unsigned depth)
{
        size_t at = 0;
        while (at < len) {
                uint64_t tag, v;
                if (read_varint(p, len, &at, 5, &tag) < 0)
                        return diag_set(w->diag, -EBADMSG,
                                        "a tag cut short or over-long at byte %zu", at);
                uint64_t number = tag >> 3;
                unsigned wire = (unsigned)(tag & 7);
                if (number == 0 || number > 0x1fffffff)
                        return diag_set(w->diag, -EBADMSG, "field number %llu",
                                        (unsigned long long)number);
                if (++w->fields > w->lim->max_fields)
                        return diag_set(w->diag, -E2BIG, "%s: more than %zu fields",
                                        w->top->short_name, w->lim->max_fields);
                const uint8_t *body = NULL;
                size_t body_len = 0;
                switch (wire) {
                case 0:
                        if (read_varint(p, len, &at, 10, &v) < 0)
                                return diag_set(w->diag, -EBADMSG,
                                                "a varint cut short or over-long at byte %zu", at);
                        break;
                case 1:
                case 5:
                        body_len = wire == 1 ? 8 : 4;
                        if (len - at < body_len)
                                return diag_set(w->diag, -EBADMSG, "field %llu cut short",
                                                (unsigned long long)number);
                        at += body_len;
                        break;
                case 2:
                        if (read_varint(p, len, &at, 10, &v) < 0)
                                return diag_set(w->diag, -EBADMSG,
                                                "a length cut short or over-long at byte %zu", at);
                        if (v > len - at)
                                return diag_set(w->diag, -EBADMSG,
                                                "field %llu: %llu bytes, past the end",
                                                (unsigned long long)number, (unsigned long long)v);
                        body = p + at;
                        body_len = (size_t)v;
                        at += body_len;
                        break;
                default: /* 3 and 4: groups, which proto3 has not; 6 and 7: none */
                        return diag_set(w->diag, -EBADMSG, "field %llu: wire type %u",
                                        (unsigned long long)number, wire);
                }
                const ProtobufCFieldDescriptor *f =
                        protobuf_c_message_descriptor_get_field(d, (unsigned)number);
                if (!f)
                        continue; /* unknown: counted as a field, kept as bytes */
                if (f->type == PROTOBUF_C_TYPE_MESSAGE && wire != 2)
                        return diag_set(w->diag, -EBADMSG, "%s.%s: not length-delimited",
                                        d->short_name, f->name);
                if (f->label == PROTOBUF_C_LABEL_REPEATED) {
                        size_t n = wire == 2 ? packed_count(f->type, body, body_len) : 1;
                        int r = count_entries(w, d, f, n);
                        if (r < 0)
                                return r;
                }
                if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
                        if (depth + 1 >= PB_DEPTH_MAX)
                                return diag_set(w->diag, -EBADMSG, "nested deeper than %d",
                                                PB_DEPTH_MAX);
                        int r = walk(w, f->descriptor, body, body_len, depth + 1);
                        if (r < 0)
                                return r;
                }
        }
        return 0;
}

int grpc_pb_check(const ProtobufCMessageDescriptor *d, const uint8_t *msg, size_t len,
                  const struct grpc_pb_limits *lim, struct diag *diag)
{
        struct pb_walk w = { .lim = lim, .top = d, .diag = diag };
        return walk(&w, d, msg, len, 0);
}
