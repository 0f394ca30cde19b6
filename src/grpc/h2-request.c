/* The HTTP/2 request checks the gRPC server does in place of nghttp2's (see
 * h2-request.h for why, and for the one rule that differs).
 *
 * Mirrors libnghttp2 1.52's lib/nghttp2_http.c for a server session, and
 * the places lib/nghttp2_session.c applies it: each header field as it is
 * decoded, the end of each header block, each DATA chunk and the end of the
 * stream.  Features devlet never enables (SETTINGS_ENABLE_CONNECT_PROTOCOL,
 * SETTINGS_NO_RFC7540_PRIORITIES) are left out, so :protocol is an unknown
 * pseudo-header and the priority field an ordinary one, as in nghttp2 with
 * them off.
 *
 * Must never: let a malformed request reach the caller, or log. */
#include "grpc/h2-request.h"

#include "grpc/h2.h"

enum {
        REQ_AUTHORITY = 1u << 0,
        REQ_METHOD = 1u << 1,
        REQ_PATH = 1u << 2,
        REQ_SCHEME = 1u << 3,
        REQ_HOST = 1u << 4,
        REQ_REGULAR_SEEN = 1u << 5, /* no pseudo-header may follow */
        REQ_CONNECT = 1u << 6,
        REQ_OPTIONS = 1u << 7,
        REQ_PATH_REGULAR = 1u << 8, /* :path starts with '/' */
        REQ_PATH_ASTERISK = 1u << 9,
        REQ_SCHEME_HTTP = 1u << 10, /* http or https */
        REQ_MALFORMED = 1u << 11,   /* reset: nothing more is acted on */
};

enum field {
        FIELD_OTHER,
        FIELD_AUTHORITY,
        FIELD_METHOD,
        FIELD_PATH,
        FIELD_SCHEME,
        FIELD_HOST,
        FIELD_CONTENT_LENGTH,
        FIELD_TE,
        FIELD_CONNECTION_SPECIFIC, /* RFC 9113 §8.2.2 */
};

static enum field field_kind(const uint8_t *name, size_t len)
{
        static const struct {
                const char *name;
                enum field kind;
        } table[] = {
                { ":authority", FIELD_AUTHORITY },
                { ":method", FIELD_METHOD },
                { ":path", FIELD_PATH },
                { ":scheme", FIELD_SCHEME },
                { "host", FIELD_HOST },
                { "content-length", FIELD_CONTENT_LENGTH },
                { "te", FIELD_TE },
                { "connection", FIELD_CONNECTION_SPECIFIC },
                { "keep-alive", FIELD_CONNECTION_SPECIFIC },
                { "proxy-connection", FIELD_CONNECTION_SPECIFIC },
                { "transfer-encoding", FIELD_CONNECTION_SPECIFIC },
                { "upgrade", FIELD_CONNECTION_SPECIFIC },
        };
        for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
                if (h2_eq(name, len, table[i].name))
                        return table[i].kind;
        return FIELD_OTHER;
}

static bool ascii_case_eq(const uint8_t *s, size_t len, const char *lit)
{
        size_t n = strlen(lit);
        if (len != n)
                return false;
        for (size_t i = 0; i < n; i++) {
                uint8_t c = s[i] >= 'A' && s[i] <= 'Z' ? (uint8_t)(s[i] - 'A' + 'a') : s[i];
                if (c != (uint8_t)lit[i])
                        return false;
        }
        return true;
}

/* RFC 3986 scheme: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) */
static bool scheme_valid(const uint8_t *s, size_t len)
{
        if (len == 0 || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z')))
                return false;
        for (size_t i = 1; i < len; i++) {
                uint8_t c = s[i];
                if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '+' || c == '-' || c == '.'))
                        return false;
        }
        return true;
}

/* Decimal digits only, no sign, at most INT64_MAX; -1 otherwise. */
static int64_t content_length_parse(const uint8_t *s, size_t len)
{
        if (len == 0)
                return -1;
        int64_t n = 0;
        for (size_t i = 0; i < len; i++) {
                if (s[i] < '0' || s[i] > '9')
                        return -1;
                int d = s[i] - '0';
                if (n > (INT64_MAX - d) / 10)
                        return -1;
                n = n * 10 + d;
        }
        return n;
}

/* The field's value as nghttp2 checks it, except that :authority and host
 * may be any field value (nghttp2: nghttp2_check_authority). */
static bool value_valid(enum field kind, const uint8_t *v, size_t len)
{
        switch (kind) {
        case FIELD_METHOD:
                return nghttp2_check_method(v, len);
        case FIELD_PATH:
                return nghttp2_check_path(v, len);
        case FIELD_SCHEME:
                return scheme_valid(v, len);
        default:
                return nghttp2_check_header_value_rfc9113(v, len);
        }
}

/* A pseudo-header may come once, with a value. */
static bool pseudo_once(struct h2_request *r, uint32_t flag, size_t valuelen)
{
        if ((r->flags & flag) || valuelen == 0)
                return false;
        r->flags |= flag;
        return true;
}

/* Whether the field may be part of the request.  nghttp2 can be told to
 * drop a regular field with bad characters instead (with an
 * on_invalid_header_callback); devlet never did, so such a field makes the
 * request malformed here too. */
static bool field_ok(struct h2_request *r, const uint8_t *name, size_t namelen,
                     const uint8_t *value, size_t valuelen, bool trailer)
{
        bool pseudo = namelen > 0 && name[0] == ':';
        if (!nghttp2_check_header_name(name, namelen))
                return false;
        enum field kind = field_kind(name, namelen);
        if (!value_valid(kind, value, valuelen))
                return false;
        if (pseudo && (trailer || (r->flags & REQ_REGULAR_SEEN)))
                return false;

        switch (kind) {
        case FIELD_AUTHORITY:
                if (!pseudo_once(r, REQ_AUTHORITY, valuelen))
                        return false;
                break;
        case FIELD_METHOD:
                if (!pseudo_once(r, REQ_METHOD, valuelen))
                        return false;
                if (h2_eq(value, valuelen, "CONNECT"))
                        r->flags |= REQ_CONNECT;
                else if (h2_eq(value, valuelen, "OPTIONS"))
                        r->flags |= REQ_OPTIONS;
                break;
        case FIELD_PATH:
                if (!pseudo_once(r, REQ_PATH, valuelen))
                        return false;
                if (value[0] == '/')
                        r->flags |= REQ_PATH_REGULAR;
                else if (valuelen == 1 && value[0] == '*')
                        r->flags |= REQ_PATH_ASTERISK;
                break;
        case FIELD_SCHEME:
                if (!pseudo_once(r, REQ_SCHEME, valuelen))
                        return false;
                if (ascii_case_eq(value, valuelen, "http") || ascii_case_eq(value, valuelen, "https"))
                        r->flags |= REQ_SCHEME_HTTP;
                break;
        case FIELD_HOST:
                if (!pseudo_once(r, REQ_HOST, valuelen))
                        return false;
                break;
        case FIELD_CONTENT_LENGTH:
                if (r->content_length != -1)
                        return false;
                r->content_length = content_length_parse(value, valuelen);
                if (r->content_length == -1)
                        return false;
                break;
        case FIELD_CONNECTION_SPECIFIC:
                return false;
        case FIELD_TE:
                if (!ascii_case_eq(value, valuelen, "trailers"))
                        return false;
                break;
        case FIELD_OTHER:
                if (pseudo)
                        return false; /* unknown, :protocol and :status included */
                break;
        }
        if (!pseudo)
                r->flags |= REQ_REGULAR_SEEN;
        return true;
}

/* The request's header block is complete. */
static bool headers_complete(struct h2_request *r)
{
        if (r->flags & REQ_CONNECT) {
                if ((r->flags & (REQ_SCHEME | REQ_PATH)) || !(r->flags & REQ_AUTHORITY))
                        return false;
                r->content_length = -1;
                return true;
        }
        uint32_t need = REQ_METHOD | REQ_PATH | REQ_SCHEME;
        if ((r->flags & need) != need || !(r->flags & (REQ_AUTHORITY | REQ_HOST)))
                return false;
        /* an http(s) :path is absolute, or "*" for OPTIONS */
        return !(r->flags & REQ_SCHEME_HTTP) || (r->flags & REQ_PATH_REGULAR) ||
               ((r->flags & REQ_OPTIONS) && (r->flags & REQ_PATH_ASTERISK));
}

static void request_reset(nghttp2_session *session, int32_t stream_id, struct h2_request *r)
{
        r->flags |= REQ_MALFORMED;
        nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, stream_id, NGHTTP2_PROTOCOL_ERROR);
}

int h2_request_session_new(nghttp2_session **out, const nghttp2_session_callbacks *cbs,
                           void *user_data)
{
        nghttp2_option *opt;
        int r = nghttp2_option_new(&opt);
        if (r != 0)
                return r;
        nghttp2_option_set_no_http_messaging(opt, 1);
        r = nghttp2_session_server_new2(out, cbs, user_data, opt);
        nghttp2_option_del(opt);
        return r;
}

void h2_request_init(struct h2_request *r)
{
        *r = (struct h2_request){ .content_length = -1 };
}

int h2_request_on_header(nghttp2_session *session, const nghttp2_frame *frame,
                         struct h2_request *r, const uint8_t *name, size_t namelen,
                         const uint8_t *value, size_t valuelen)
{
        if (r->flags & REQ_MALFORMED)
                return H2_REQUEST_DROP; /* reset already, not yet sent */
        bool trailer = frame->headers.cat != NGHTTP2_HCAT_REQUEST;
        if (field_ok(r, name, namelen, value, valuelen, trailer))
                return 0;
        request_reset(session, frame->hd.stream_id, r);
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
}

bool h2_request_on_frame_recv(nghttp2_session *session, const nghttp2_frame *frame,
                              struct h2_request *r)
{
        if (r->flags & REQ_MALFORMED)
                return false;
        bool end = frame->hd.flags & NGHTTP2_FLAG_END_STREAM;
        bool ok = true;
        if (frame->hd.type == NGHTTP2_HEADERS)
                ok = frame->headers.cat == NGHTTP2_HCAT_REQUEST ? headers_complete(r)
                                                                 : end; /* trailers end it */
        if (ok && end)
                ok = r->content_length == -1 || r->content_length == r->received;
        if (!ok)
                request_reset(session, frame->hd.stream_id, r);
        return ok;
}

bool h2_request_on_data_chunk(nghttp2_session *session, int32_t stream_id,
                              struct h2_request *r, size_t len)
{
        if (r->flags & REQ_MALFORMED)
                return false;
        r->received += (int64_t)len;
        if (r->content_length != -1 && r->received > r->content_length) {
                request_reset(session, stream_id, r);
                return false;
        }
        return true;
}
