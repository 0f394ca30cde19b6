/* Internal to src/grpc/: the HTTP/2 request rules (RFC 9113 §8) that the
 * server checks itself instead of leaving them to nghttp2.
 *
 * nghttp2's own checks (its "HTTP messaging") reject an :authority that is
 * not URI authority syntax, and kubelets before v1.26 send the plugin
 * socket's path there; the rejection is a pseudo-header error, which no
 * callback can overrule.  So server sessions turn nghttp2's checks off and
 * this file does them instead, rule for rule as libnghttp2 1.52 does for a
 * server (tests/unit/test-grpc-h2-request.c compares the two), with one
 * departure: :authority and host need only be valid field values (grpc-go
 * servers ignore them).  A malformed request gets RST_STREAM PROTOCOL_ERROR
 * and reaches no handler; everything else about the stream is untouched. */
#ifndef DEVLET_GRPC_H2_REQUEST_H
#define DEVLET_GRPC_H2_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <nghttp2/nghttp2.h>

/* What one request stream has shown so far. */
struct h2_request {
        uint32_t flags;
        int64_t content_length; /* -1: none given */
        int64_t received;       /* DATA payload bytes */
};

/* h2_request_on_header: ignore the field (its stream is already reset). */
#define H2_REQUEST_DROP 1

/* A server session (nghttp2_session_server_new2) with nghttp2's request
 * checks off, for callbacks that call the functions below.  Returns 0 or a
 * negative nghttp2 error (NGHTTP2_ERR_NOMEM). */
int h2_request_session_new(nghttp2_session **out, const nghttp2_session_callbacks *cbs,
                           void *user_data);

/* Call from on_begin_headers_callback for a request (NGHTTP2_HCAT_REQUEST). */
void h2_request_init(struct h2_request *r);

/* Call from on_header_callback for a HEADERS frame on the request's stream
 * (its header block or its trailers).  Returns 0 (use the field),
 * H2_REQUEST_DROP (the stream is already reset: ignore the field), or
 * NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE once RST_STREAM PROTOCOL_ERROR is
 * submitted: the callback returns it, and nghttp2 delivers nothing more of
 * the header block. */
int h2_request_on_header(nghttp2_session *session, const nghttp2_frame *frame,
                         struct h2_request *r, const uint8_t *name, size_t namelen,
                         const uint8_t *value, size_t valuelen);

/* Call from on_frame_recv_callback for a HEADERS or DATA frame of the
 * request's stream, before acting on it.  Returns whether the frame may be
 * acted on; false once the request is malformed (RST_STREAM PROTOCOL_ERROR
 * submitted, here or earlier). */
bool h2_request_on_frame_recv(nghttp2_session *session, const nghttp2_frame *frame,
                              struct h2_request *r);

/* Call from on_data_chunk_recv_callback: len payload bytes for stream_id.
 * Returns whether the bytes may be used; false once the request is
 * malformed (more DATA than its content-length: RST_STREAM submitted). */
bool h2_request_on_data_chunk(nghttp2_session *session, int32_t stream_id,
                              struct h2_request *r, size_t len);

#endif
