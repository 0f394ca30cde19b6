/* Unit tests for src/grpc/pbwire.c: counting a request's entries and fields
 * on its wire bytes (the limits, summed over nested messages), and the
 * strict reading of the wire format (tags, varints and lengths cut short or
 * over-long, lengths past the end of their message, groups and reserved
 * wire types, field number 0); and that what protobuf-c decodes, the
 * check accepts. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/diag.h"
#include "base/xalloc.h"
#include "deviceplugin.pb-c.h"
#include "dra.pb-c.h"
#include "grpc/grpc.h"

static const struct grpc_pb_limits roomy = { .max_entries = 1u << 20, .max_fields = 1u << 20 };
static const struct grpc_pb_limits dra_limits = { .max_entries = 1024, .max_fields = 8192 };

static int check_prepare(const void *msg, size_t len, const struct grpc_pb_limits *lim,
                         struct diag *d)
{
        memset(d, 0, sizeof(*d));
        return grpc_pb_check(&dra__v1__node_prepare_resources_request__descriptor, msg, len, lim,
                             d);
}

/* n copies of the 2-byte empty claim (field 1, length 0). */
static uint8_t *empty_claims(size_t n)
{
        uint8_t *b = xmalloc(2 * n + 1);
        for (size_t i = 0; i < n; i++) {
                b[2 * i] = 0x0a;
                b[2 * i + 1] = 0x00;
        }
        return b;
}

static void test_counts_claims(void **state)
{
        struct diag d;
        uint8_t *b = empty_claims(4u << 20 >> 1); /* 4 MiB of them */
        assert_int_equal(check_prepare(b, 1024 * 2, &dra_limits, &d), 0);
        assert_int_equal(check_prepare(b, 1025 * 2, &dra_limits, &d), -E2BIG);
        assert_string_equal(d.message,
                            "NodePrepareResourcesRequest.claims: more than 1024 entries");
        assert_int_equal(check_prepare(b, 4u << 20, &dra_limits, &d), -E2BIG);
        free(b);

        /* a real request, packed by protobuf-c, passes */
        Dra__V1__Claim c[3];
        Dra__V1__Claim *cp[3];
        char ns[] = "default", uid[] = "0b6c3f2e-1", name[] = "gpu";
        for (int i = 0; i < 3; i++) {
                dra__v1__claim__init(&c[i]);
                c[i].namespace_ = ns;
                c[i].uid = uid;
                c[i].name = name;
                cp[i] = &c[i];
        }
        Dra__V1__NodePrepareResourcesRequest req = DRA__V1__NODE_PREPARE_RESOURCES_REQUEST__INIT;
        req.n_claims = 3;
        req.claims = cp;
        uint8_t buf[256];
        size_t len = dra__v1__node_prepare_resources_request__pack(&req, buf);
        assert_int_equal(check_prepare(buf, len, &dra_limits, &d), 0);
        assert_int_equal(check_prepare(buf, 0, &dra_limits, &d), 0); /* no claims */
        /* the fields inside the claims count too: 3 claims of 3 fields */
        struct grpc_pb_limits few = { .max_entries = 1024, .max_fields = 11 };
        assert_int_equal(check_prepare(buf, len, &few, &d), -E2BIG);
        assert_string_equal(d.message, "NodePrepareResourcesRequest: more than 11 fields");
        few.max_fields = 12;
        assert_int_equal(check_prepare(buf, len, &few, &d), 0);
}

static void test_unknown_fields_count(void **state)
{
        struct diag d;
        uint8_t b[200];
        for (size_t i = 0; i < 100; i++) {
                b[2 * i] = 0x78; /* field 15, varint */
                b[2 * i + 1] = 0x00;
        }
        struct grpc_pb_limits lim = { .max_entries = 1024, .max_fields = 100 };
        assert_int_equal(check_prepare(b, sizeof(b), &lim, &d), 0);
        lim.max_fields = 99;
        assert_int_equal(check_prepare(b, sizeof(b), &lim, &d), -E2BIG);
        assert_string_equal(d.message, "NodePrepareResourcesRequest: more than 99 fields");
        /* an unknown length-delimited field is skipped whole, not descended into */
        static const uint8_t blob[] = { 0x7a, 0x04, 0xff, 0xff, 0xff, 0xff, 0x0a, 0x00 };
        assert_int_equal(check_prepare(blob, sizeof(blob), &dra_limits, &d), 0);
}

static void test_nested_counts_are_summed(void **state)
{
        /* two containers of 3 device IDs each */
        char id[] = "gpu-0";
        char *ids[3] = { id, id, id };
        V1beta1__ContainerAllocateRequest c[2];
        V1beta1__ContainerAllocateRequest *cp[2] = { &c[0], &c[1] };
        for (int i = 0; i < 2; i++) {
                v1beta1__container_allocate_request__init(&c[i]);
                c[i].n_devices_ids = 3;
                c[i].devices_ids = ids;
        }
        V1beta1__AllocateRequest req;
        v1beta1__allocate_request__init(&req);
        req.n_container_requests = 2;
        req.container_requests = cp;
        uint8_t buf[128];
        size_t len = v1beta1__allocate_request__pack(&req, buf);
        struct diag d = { 0 };
        struct grpc_pb_limits lim = { .max_entries = 6, .max_fields = 100 };
        assert_int_equal(grpc_pb_check(&v1beta1__allocate_request__descriptor, buf, len, &lim, &d),
                         0);
        lim.max_entries = 5;
        assert_int_equal(grpc_pb_check(&v1beta1__allocate_request__descriptor, buf, len, &lim, &d),
                         -E2BIG);
        assert_string_equal(d.message, "ContainerAllocateRequest.devices_ids: more than 5 entries");
        /* a length inside a container that runs past the container's end
         * (though not past the message's) */
        static const uint8_t past[] = { 0x0a, 0x03, 0x0a, 0x05, 0x41, 0x41, 0x41, 0x41, 0x41 };
        assert_int_equal(grpc_pb_check(&v1beta1__allocate_request__descriptor, past, sizeof(past),
                                       &roomy, &d),
                         -EBADMSG);
        assert_null(v1beta1__allocate_request__unpack(NULL, sizeof(past), past));
}

static void test_malformed(void **state)
{
        static const struct {
                const char *what;
                uint8_t bytes[16];
                size_t len;
        } cases[] = {
                { "tag cut short", { 0x8a }, 1 },
                { "tag over 5 bytes", { 0x8a, 0x80, 0x80, 0x80, 0x80, 0x00 }, 6 },
                { "field number 0", { 0x02, 0x00 }, 2 },
                { "field number over 2^29-1", { 0xfa, 0xff, 0xff, 0xff, 0x7f, 0x00 }, 6 },
                { "length cut short", { 0x0a, 0xff }, 2 },
                { "length past the end", { 0x0a, 0x05, 0x00 }, 3 },
                { "length of 2^64-1", { 0x0a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                        0x01 }, 11 },
                { "length over 10 bytes", { 0x0a, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
                                            0x80, 0x80, 0x00 }, 12 },
                { "varint cut short", { 0x78, 0x80 }, 2 },
                { "varint over 10 bytes", { 0x78, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                            0xff, 0xff, 0x00 }, 12 },
                { "fixed64 cut short", { 0x79, 0x00, 0x00 }, 3 },
                { "fixed32 cut short", { 0x7d, 0x00 }, 2 },
                { "start group", { 0x7b }, 1 },
                { "end group", { 0x7c }, 1 },
                { "wire type 6", { 0x7e, 0x00 }, 2 },
                { "wire type 7", { 0x7f, 0x00 }, 2 },
                { "a message field as a varint", { 0x08, 0x01 }, 2 },
                { "inside a claim: length past its end", { 0x0a, 0x02, 0x0a, 0x05, 0x00, 0x00,
                                                           0x00, 0x00, 0x00 }, 9 },
                { "inside a claim: tag cut short", { 0x0a, 0x01, 0x8a }, 3 },
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                struct diag d;
                int r = check_prepare(cases[i].bytes, cases[i].len, &roomy, &d);
                if (r != -EBADMSG)
                        fail_msg("%s: %d (%s)", cases[i].what, r, d.message);
                assert_true(d.message[0] != '\0');
        }
        /* the same bytes after a valid claim: still refused */
        static const uint8_t tail[] = { 0x0a, 0x00, 0x0a, 0x7f };
        struct diag d;
        assert_int_equal(check_prepare(tail, sizeof(tail), &roomy, &d), -EBADMSG);
}

/* Decodes b with protobuf-c and checks it: whatever protobuf-c decodes, the
 * check accepts.  Returns whether protobuf-c decoded it. */
static bool agree(const uint8_t *b, size_t len, size_t at)
{
        Dra__V1__NodePrepareResourcesRequest *m =
                dra__v1__node_prepare_resources_request__unpack(NULL, len, b);
        struct diag d;
        int r = check_prepare(b, len, &roomy, &d);
        if (m && r != 0)
                fail_msg("byte %zu = 0x%02x, %zu bytes: protobuf-c decodes, the check says %s", at,
                         b[at], len, d.message);
        if (!m)
                return false;
        dra__v1__node_prepare_resources_request__free_unpacked(m, NULL);
        return true;
}

/* Single-byte changes of a real request (and the same cut by one or two
 * bytes), each decoded by both (protobuf-c is laxer only with field numbers
 * past 2^29-1, which the check refuses; the fuzz target looks further). */
static void test_agrees_with_protobuf_c(void **state)
{
        Dra__V1__Claim c;
        Dra__V1__Claim *cp[2] = { &c, &c };
        dra__v1__claim__init(&c);
        char ns[] = "ns", uid[] = "u-1", name[] = "n";
        c.namespace_ = ns;
        c.uid = uid;
        c.name = name;
        Dra__V1__NodePrepareResourcesRequest req = DRA__V1__NODE_PREPARE_RESOURCES_REQUEST__INIT;
        req.n_claims = 2;
        req.claims = cp;
        uint8_t good[64], b[64];
        size_t len = dra__v1__node_prepare_resources_request__pack(&req, good);
        static const uint8_t values[] = { 0x00, 0x01, 0x02, 0x03, 0x05, 0x07, 0x08, 0x0a,
                                          0x0b, 0x12, 0x1a, 0x7f, 0x80, 0xff };
        unsigned accepted = 0;
        for (size_t at = 0; at < len; at++) {
                for (size_t v = 0; v < sizeof(values); v++) {
                        memcpy(b, good, len);
                        b[at] = values[v];
                        for (size_t cut = len; cut + 2 >= len && cut > at; cut--)
                                accepted += agree(b, cut, at);
                }
        }
        assert_true(accepted > 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_counts_claims),
                cmocka_unit_test(test_unknown_fields_count),
                cmocka_unit_test(test_nested_counts_are_summed),
                cmocka_unit_test(test_malformed),
                cmocka_unit_test(test_agrees_with_protobuf_c),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
