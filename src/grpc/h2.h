/* Internal to src/grpc/: the HTTP/2 byte pipe shared by server and client.
 *
 * An h2_io is a libuv pipe plus the accounting for bytes handed to uv_write
 * but not yet written.  h2_io_flush() drains what nghttp2 wants to send into
 * owned write buffers and stops at H2_WRITE_HIGH, leaving the rest queued in
 * nghttp2 (data providers are pulled lazily), so a peer that does not read
 * costs bounded memory.  Owners stop reading their socket while the pending
 * bytes are above H2_WRITE_HIGH and resume below H2_WRITE_LOW. */
#ifndef DEVLET_GRPC_H2_H
#define DEVLET_GRPC_H2_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <nghttp2/nghttp2.h>
#include <uv.h>

#define H2_READ_BUF (64u * 1024)
#define H2_WRITE_BATCH (64u * 1024)
#define H2_WRITE_HIGH (8u * 1024 * 1024)
#define H2_WRITE_LOW (1u * 1024 * 1024)

#define h2_container_of(ptr, type, member)                                     \
        ((type *)(void *)((char *)(ptr)-offsetof(type, member)))

struct h2_io {
        uv_pipe_t pipe;
        bool has_socket;      /* false: output is discarded (fuzzing) */
        size_t write_pending; /* bytes in uv_write requests not yet done */
        int write_error;      /* first failed write, as a libuv error */
        /* runs after each write request completes (also with UV_ECANCELED
         * while the pipe closes); may be NULL */
        void (*on_written)(struct h2_io *io);
};

/* Serializes pending nghttp2 output into write requests on io->pipe until
 * nghttp2 has nothing more or H2_WRITE_HIGH bytes are pending.  Returns 0, a
 * negative nghttp2 error (session is broken), or a negative libuv error. */
int h2_io_flush(struct h2_io *io, nghttp2_session *session);

/* Describes an h2_io_flush error: nghttp2 errors lie in -999..-500. */
static inline const char *h2_strerror(int r)
{
        return r <= -500 && r >= -999 ? nghttp2_strerror(r) : uv_strerror(r);
}

/* A peer may hang up at any time and libuv writes pipes with write(2): sets
 * SIGPIPE to ignored if it is at its default (which would kill the process). */
void h2_ignore_sigpipe(void);

/* uv_alloc_cb handing out one read buffer per thread, shared by every
 * connection: read callbacks hand the bytes to nghttp2_session_mem_recv
 * before they return, so no connection needs a buffer of its own while it
 * waits (an idle connection costs its session and little else). */
void h2_io_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf);

static inline nghttp2_nv h2_nv(const char *name, const char *value)
{
        return (nghttp2_nv){
                .name = (uint8_t *)(uintptr_t)name,
                .value = (uint8_t *)(uintptr_t)value,
                .namelen = strlen(name),
                .valuelen = strlen(value),
                .flags = NGHTTP2_NV_FLAG_NONE,
        };
}

static inline bool h2_eq(const uint8_t *s, size_t len, const char *lit)
{
        size_t n = strlen(lit);
        return len == n && memcmp(s, lit, n) == 0;
}

/* content-type is "application/grpc" or "application/grpc+xxx" / ";xxx" */
static inline bool h2_is_grpc_content_type(const uint8_t *v, size_t len)
{
        static const char ct[] = "application/grpc";
        size_t n = sizeof(ct) - 1;
        return len >= n && memcmp(v, ct, n) == 0 && (len == n || v[n] == '+' || v[n] == ';');
}

/* One length-prefixed message queued for sending. */
struct h2_chunk {
        struct h2_chunk *next;
        size_t len;
        uint8_t data[];
};

/* Builds a chunk holding the 5-byte prefix followed by msg. */
struct h2_chunk *h2_chunk_new(const uint8_t *msg, size_t len);

/* Copies up to cap bytes from the front of a chunk queue, freeing drained
 * chunks; *off is the read offset in the head chunk.  Returns bytes copied. */
size_t h2_chunks_read(struct h2_chunk **head, struct h2_chunk **tail, size_t *off, uint8_t *buf,
                      size_t cap);
void h2_chunks_free(struct h2_chunk **head, struct h2_chunk **tail);

#endif
