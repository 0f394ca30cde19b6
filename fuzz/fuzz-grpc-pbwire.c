/* libFuzzer target: the wire-format counter that runs before protobuf-c
 * decodes a request (src/grpc/pbwire.c), on each request message devlet
 * decodes (the first byte picks which).  Every input must be accepted or
 * refused with a message, and whatever protobuf-c decodes the check must
 * accept when the limits are roomy (but a field number past 2^29-1).
 * Seeds: fuzz/corpus/fuzz-grpc-pbwire/. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/diag.h"
#include "deviceplugin.pb-c.h"
#include "dra.pb-c.h"
#include "grpc/grpc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static const ProtobufCMessageDescriptor *const msgs[] = {
                &dra__v1__node_prepare_resources_request__descriptor,
                &dra__v1__node_unprepare_resources_request__descriptor,
                &v1beta1__allocate_request__descriptor,
                &v1beta1__preferred_allocation_request__descriptor,
                &v1beta1__pre_start_container_request__descriptor,
        };
        if (size == 0)
                return 0;
        const ProtobufCMessageDescriptor *d = msgs[data[0] % (sizeof(msgs) / sizeof(msgs[0]))];
        data++;
        size--;
        static const struct grpc_pb_limits tight = { .max_entries = 4, .max_fields = 16 };
        static const struct grpc_pb_limits roomy = { .max_entries = 1u << 30,
                                                     .max_fields = 1u << 30 };
        struct diag why = { 0 };
        int r = grpc_pb_check(d, data, size, &tight, &why);
        if (r != 0 && ((r != -EBADMSG && r != -E2BIG) || !why.message[0]))
                abort();
        why.message[0] = '\0';
        r = grpc_pb_check(d, data, size, &roomy, &why);
        if (r != 0 && (r != -EBADMSG || !why.message[0]))
                abort();
        /* protobuf-c is laxer only with field numbers (a tag's bits past 32
         * dropped, numbers past 2^29-1 kept), which the check refuses */
        ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, size, data);
        if (m && r != 0 && strncmp(why.message, "field number ", 13) != 0)
                abort();
        if (m)
                protobuf_c_message_free_unpacked(m, NULL);
        return 0;
}
