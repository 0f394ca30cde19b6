/* The HTTP/2 byte pipe shared by the gRPC server and client (see h2.h).
 *
 * Owns the write path from nghttp2_session_mem_send into uv_write requests
 * with owned buffers, and the per-stream queues of framed messages that data
 * providers read from.  It never calls back into nghttp2 from a write
 * completion and never blocks. */
#include "grpc/h2.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>

#include "base/xalloc.h"
#include "grpc/grpc.h"

struct h2_write {
        uv_write_t req;
        struct h2_io *io;
        size_t len;
        uint8_t data[];
};

static void h2_on_write(uv_write_t *req, int status)
{
        struct h2_write *w = h2_container_of(req, struct h2_write, req);
        struct h2_io *io = w->io;

        io->write_pending -= w->len;
        if (status < 0 && io->write_error == 0)
                io->write_error = status;
        free(w);
        if (io->on_written)
                io->on_written(io);
}

static int h2_submit_write(struct h2_io *io, struct h2_write *w)
{
        uv_buf_t buf = uv_buf_init((char *)w->data, (unsigned)w->len);
        w->io = io;
        int r = uv_write(&w->req, (uv_stream_t *)&io->pipe, &buf, 1, h2_on_write);
        if (r < 0) {
                free(w);
                return r;
        }
        io->write_pending += w->len;
        return 0;
}

int h2_io_flush(struct h2_io *io, nghttp2_session *session)
{
        struct h2_write *w = NULL;
        size_t cap = 0;

        while (!io->has_socket || io->write_pending + (w ? w->len : 0) < H2_WRITE_HIGH) {
                const uint8_t *data;
                ssize_t n = nghttp2_session_mem_send(session, &data);
                if (n < 0) {
                        free(w);
                        return (int)n;
                }
                if (n == 0)
                        break;
                if (!io->has_socket)
                        continue;
                if (w && w->len + (size_t)n > cap) {
                        int r = h2_submit_write(io, w);
                        w = NULL;
                        if (r < 0)
                                return r;
                }
                if (!w) {
                        cap = (size_t)n > H2_WRITE_BATCH ? (size_t)n : H2_WRITE_BATCH;
                        w = xmalloc(sizeof(*w) + cap);
                        w->len = 0;
                }
                memcpy(w->data + w->len, data, (size_t)n);
                w->len += (size_t)n;
        }
        return w ? h2_submit_write(io, w) : 0;
}

void h2_ignore_sigpipe(void)
{
        struct sigaction sa;
        if (sigaction(SIGPIPE, NULL, &sa) == 0 && sa.sa_handler == SIG_DFL &&
            !(sa.sa_flags & SA_SIGINFO))
                signal(SIGPIPE, SIG_IGN);
}

/* The read buffer is one per thread that reads (its loop's reads are
 * consumed before the next): allocated at the first read and freed when
 * the thread ends.  Not a _Thread_local array: glibc zeroes a thread's
 * whole static TLS when it starts, so 64 KiB there would be resident in
 * every thread devlet starts, readers or not. */
static pthread_key_t rbuf_key;
static bool rbuf_key_ok; /* without the key (none left) a reader's buffer outlives it */
static pthread_once_t rbuf_once = PTHREAD_ONCE_INIT;

static void rbuf_key_make(void)
{
        rbuf_key_ok = pthread_key_create(&rbuf_key, free) == 0;
}

void h2_io_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf)
{
        static _Thread_local char *rbuf;
        if (!rbuf) {
                pthread_once(&rbuf_once, rbuf_key_make);
                rbuf = xmalloc(H2_READ_BUF);
                if (rbuf_key_ok)
                        pthread_setspecific(rbuf_key, rbuf);
        }
        *buf = uv_buf_init(rbuf, H2_READ_BUF);
}

struct h2_chunk *h2_chunk_new(const uint8_t *msg, size_t len)
{
        struct h2_chunk *c = xmalloc(sizeof(*c) + 5 + len);
        c->next = NULL;
        c->len = 5 + len;
        grpc_frame_prefix(c->data, len);
        if (len)
                memcpy(c->data + 5, msg, len);
        return c;
}

size_t h2_chunks_read(struct h2_chunk **head, struct h2_chunk **tail, size_t *off, uint8_t *buf,
                      size_t cap)
{
        size_t n = 0;
        while (n < cap && *head) {
                struct h2_chunk *c = *head;
                size_t k = c->len - *off;
                if (k > cap - n)
                        k = cap - n;
                memcpy(buf + n, c->data + *off, k);
                n += k;
                *off += k;
                if (*off == c->len) {
                        *head = c->next;
                        if (!*head)
                                *tail = NULL;
                        *off = 0;
                        free(c);
                }
        }
        return n;
}

void h2_chunks_free(struct h2_chunk **head, struct h2_chunk **tail)
{
        while (*head) {
                struct h2_chunk *c = *head;
                *head = c->next;
                free(c);
        }
        *tail = NULL;
}
