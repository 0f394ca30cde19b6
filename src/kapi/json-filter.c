/* The streaming JSON filter (see json-filter.h): a byte-at-a-time state
 * machine with an explicit stack of open containers.
 *
 * Each value, as it starts, is given the spec node it falls under (NULL:
 * it is skipped): the root under the spec's root, an array's items under
 * the array node's item spec, an object's member under the member of that
 * name.  A key under an object spec is decoded into a small buffer to be
 * looked up (a key longer than any name, or with bytes outside ASCII,
 * matches nothing); under a "keep it all" node keys and values are copied
 * as they come.  Kept strings and numbers are copied byte for byte, so
 * what is kept is what was sent, without its whitespace.  Skipped values
 * cost no memory: only their open brackets take a stack frame, within the
 * depth limit.  Never allocates beyond the output (the budget's bytes)
 * and the stack (the depth limit). */
#include "kapi/json-filter.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/ascii.h"
#include "base/xalloc.h"

/* ---- specs ---- */

enum node_kind { NODE_ALL, NODE_OBJECT, NODE_ARRAY };

struct node {
        enum node_kind kind;
        const char *name; /* a member's: into the spec's text */
        size_t name_len;
        int child;        /* NODE_OBJECT: the first member; NODE_ARRAY: the items; -1 */
        int next;         /* the next member of the same object; -1 */
        size_t cap;       /* NODE_ALL: its first cap members or items only; 0: all */
};

struct kapi_json_spec {
        char *text;
        struct node *nodes; /* nodes[0] is the root */
        size_t n, cap;
};

/* A spec's nesting; ours are a few levels deep. */
#define SPEC_DEPTH_MAX 32
/* The longest key looked up in an object spec. */
#define KEY_MAX 64

static const struct node keep_all = { .kind = NODE_ALL, .child = -1, .next = -1 };

static int spec_add(struct kapi_json_spec *s, enum node_kind kind)
{
        if (s->n == s->cap) {
                s->cap = s->cap ? s->cap * 2 : 8;
                s->nodes = xrealloc(s->nodes, s->cap * sizeof(*s->nodes));
        }
        s->nodes[s->n] = (struct node){ .kind = kind, .child = -1, .next = -1 };
        return (int)s->n++;
}

static void spec_ws(const char **p)
{
        while (**p == ' ' || **p == '\t' || **p == '\n' || **p == '\r')
                (*p)++;
}

/* A name is written out as it is in the spec when a key matches it: no
 * byte that would need an escape, none outside ASCII. */
static bool spec_name_byte(char ch)
{
        return ch > ' ' && ch < 0x7f && !strchr("{}[],*\"\\", ch);
}

/* One spec at *p; returns its node, or -1. */
static int spec_parse(struct kapi_json_spec *s, const char **p, int depth)
{
        if (depth > SPEC_DEPTH_MAX)
                return -1;
        spec_ws(p);
        if (**p == '*') {
                (*p)++;
                int n = spec_add(s, NODE_ALL);
                size_t cap = 0;
                while (**p >= '0' && **p <= '9' && cap <= KAPI_JSON_VALUES_DEFAULT)
                        cap = cap * 10 + (size_t)(*(*p)++ - '0');
                if (cap > KAPI_JSON_VALUES_DEFAULT)
                        return -1;
                s->nodes[n].cap = cap;
                return n;
        }
        if (**p == '[') {
                (*p)++;
                int n = spec_add(s, NODE_ARRAY);
                int item = spec_parse(s, p, depth + 1);
                spec_ws(p);
                if (item < 0 || **p != ']')
                        return -1;
                (*p)++;
                s->nodes[n].child = item;
                return n;
        }
        if (**p != '{')
                return -1;
        (*p)++;
        int n = spec_add(s, NODE_OBJECT), last = -1;
        for (;;) {
                spec_ws(p);
                const char *name = *p;
                while (spec_name_byte(**p))
                        (*p)++;
                size_t len = (size_t)(*p - name);
                if (len == 0 || len > KEY_MAX)
                        return -1;
                spec_ws(p);
                int m = **p == '{' || **p == '[' || **p == '*' ? spec_parse(s, p, depth + 1)
                                                                 : spec_add(s, NODE_ALL);
                if (m < 0)
                        return -1;
                s->nodes[m].name = name;
                s->nodes[m].name_len = len;
                if (last < 0)
                        s->nodes[n].child = m;
                else
                        s->nodes[last].next = m;
                last = m;
                spec_ws(p);
                if (**p == ',') {
                        (*p)++;
                        continue;
                }
                if (**p != '}')
                        return -1;
                (*p)++;
                return n;
        }
}

int kapi_json_spec_new(const char *text, struct kapi_json_spec **out)
{
        struct kapi_json_spec *s = xcalloc(1, sizeof(*s));
        s->text = xstrdup(text);
        const char *p = s->text;
        int root = spec_parse(s, &p, 0);
        spec_ws(&p);
        if (root != 0 || *p) {
                kapi_json_spec_free(s);
                return -EINVAL;
        }
        *out = s;
        return 0;
}

void kapi_json_spec_free(struct kapi_json_spec *s)
{
        if (!s)
                return;
        free(s->nodes);
        free(s->text);
        free(s);
}

/* ---- the filter ---- */

enum state {
        ST_VALUE,       /* a value is due */
        ST_FIRST_VALUE, /* after '[': a value or ']' */
        ST_FIRST_KEY,   /* after '{': a key or '}' */
        ST_KEY,         /* after ',' in an object */
        ST_COLON,
        ST_AFTER,       /* after a value inside a container: ',' or its closer */
        ST_STRING,
        ST_ESCAPE,
        ST_HEX,
        ST_NUMBER,
        ST_LITERAL,
        ST_DONE,        /* the document is complete: only whitespace may follow */
};

/* Where a number is, by JSON's grammar. */
enum num_state { N_MINUS, N_ZERO, N_INT, N_DOT, N_FRAC, N_E, N_ESIGN, N_EXP };

struct frame {
        const struct node *node; /* NULL: skipped */
        bool object;
        bool any;    /* an item or member was written out */
        size_t seen; /* members or items, for the node's cap */
};

struct kapi_json_filter {
        const struct kapi_json_spec *spec;
        size_t max_values, max_bytes;
        unsigned max_depth;

        enum state state;
        int err;
        bool started;
        const struct node *next; /* the spec of the value due (NULL: skipped) */
        uint64_t offset;         /* bytes fed before this call's */
        size_t values;

        /* the string being read */
        bool in_key, keep_str, key_lookup, key_long, key_kept;
        bool key_all; /* the key is under a "keep it all" node */
        char key[KEY_MAX];
        size_t key_len;
        unsigned hex_left, hex_val;
        /* the number or literal being read */
        enum num_state num;
        bool keep_scalar;
        const char *lit;
        size_t lit_at;

        struct frame *stack;
        unsigned depth, stack_cap;
        char *out;
        size_t out_len, out_cap;
        char why[192];
};

struct kapi_json_filter *kapi_json_filter_new(const struct kapi_json_spec *spec,
                                              const struct kapi_json_budget *budget)
{
        struct kapi_json_filter *f = xcalloc(1, sizeof(*f));
        f->spec = spec;
        f->max_values = budget && budget->max_values ? budget->max_values
                                                     : KAPI_JSON_VALUES_DEFAULT;
        f->max_bytes = budget && budget->max_bytes ? budget->max_bytes : KAPI_JSON_BYTES_DEFAULT;
        f->max_depth = budget && budget->max_depth ? budget->max_depth : KAPI_JSON_DEPTH_DEFAULT;
        if (f->max_depth > KAPI_JSON_DEPTH_MAX)
                f->max_depth = KAPI_JSON_DEPTH_MAX;
        kapi_json_filter_reset(f);
        return f;
}

void kapi_json_filter_free(struct kapi_json_filter *f)
{
        if (!f)
                return;
        free(f->stack);
        free(f->out);
        free(f);
}

void kapi_json_filter_reset(struct kapi_json_filter *f)
{
        f->state = ST_VALUE;
        f->err = 0;
        f->started = false;
        f->next = f->spec ? &f->spec->nodes[0] : &keep_all;
        f->offset = 0;
        f->values = 0;
        f->depth = 0;
        f->out_len = 0;
        f->why[0] = '\0';
}

const char *kapi_json_filter_why(const struct kapi_json_filter *f) { return f->why; }

static int fail(struct kapi_json_filter *f, int err, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
static int fail(struct kapi_json_filter *f, int err, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(f->why, sizeof(f->why), fmt, ap);
        va_end(ap);
        f->err = err;
        return err;
}

static int emit(struct kapi_json_filter *f, const char *s, size_t n)
{
        if (n > f->max_bytes - f->out_len)
                return fail(f, -EMSGSIZE, "JSON document over %zu bytes kept", f->max_bytes);
        if (f->out_len + n > f->out_cap) {
                size_t cap = f->out_cap ? f->out_cap : 256;
                while (cap < f->out_len + n)
                        cap *= 2;
                if (cap > f->max_bytes)
                        cap = f->max_bytes;
                f->out = xrealloc(f->out, cap);
                f->out_cap = cap;
        }
        memcpy(f->out + f->out_len, s, n);
        f->out_len += n;
        return 0;
}

static int emit_ch(struct kapi_json_filter *f, char ch) { return emit(f, &ch, 1); }

static int count_value(struct kapi_json_filter *f)
{
        if (++f->values > f->max_values)
                return fail(f, -EMSGSIZE, "JSON document over %zu values", f->max_values);
        return 0;
}

/* The innermost open container (depth > 0). */
static struct frame *top(struct kapi_json_filter *f) { return &f->stack[f->depth - 1]; }

/* Under a capped "keep it all" node: its first cap members or items are
 * kept whole (uncapped), the rest skipped. */
static const struct node *capped(struct frame *t)
{
        if (!t->node->cap)
                return t->node;
        return t->seen++ < t->node->cap ? &keep_all : NULL;
}

/* The spec of the next item of the array t. */
static const struct node *item_of(const struct kapi_json_filter *f, struct frame *t)
{
        const struct node *n = t->node;
        if (!n || n->kind == NODE_ALL)
                return n ? capped(t) : NULL;
        return n->kind == NODE_ARRAY ? &f->spec->nodes[n->child] : NULL;
}

/* The spec of the member key of the object t. */
static const struct node *member_of(const struct kapi_json_filter *f, struct frame *t,
                                    const char *key, size_t len)
{
        const struct node *n = t->node;
        if (!n || n->kind == NODE_ALL)
                return n ? capped(t) : NULL;
        if (n->kind != NODE_OBJECT)
                return NULL;
        for (int i = n->child; i >= 0; i = f->spec->nodes[i].next) {
                const struct node *m = &f->spec->nodes[i];
                if (m->name_len == len && memcmp(m->name, key, len) == 0)
                        return m;
        }
        return NULL;
}

/* A value starts under f->next: counted, and its comma written in a kept array. */
static int value_begin(struct kapi_json_filter *f)
{
        f->started = true;
        if (!f->next)
                return 0;
        int r = count_value(f);
        struct frame *t = f->depth ? top(f) : NULL;
        if (r == 0 && t && !t->object) {
                if (t->any)
                        r = emit_ch(f, ',');
                t->any = true;
        }
        return r;
}

static void value_done(struct kapi_json_filter *f)
{
        f->state = f->depth ? ST_AFTER : ST_DONE;
}

static int push(struct kapi_json_filter *f, bool object)
{
        if (f->depth >= f->max_depth)
                return fail(f, -EMSGSIZE, "JSON document nested deeper than %u", f->max_depth);
        if (f->depth == f->stack_cap) {
                f->stack_cap = f->stack_cap ? f->stack_cap * 2 : 16;
                f->stack = xrealloc(f->stack, f->stack_cap * sizeof(*f->stack));
        }
        f->stack[f->depth++] = (struct frame){ .node = f->next, .object = object };
        if (!object)
                f->next = item_of(f, top(f));
        f->state = object ? ST_FIRST_KEY : ST_FIRST_VALUE;
        return f->stack[f->depth - 1].node ? emit_ch(f, object ? '{' : '[') : 0;
}

static int pop(struct kapi_json_filter *f)
{
        struct frame *t = top(f);
        int r = t->node ? emit_ch(f, t->object ? '}' : ']') : 0;
        f->depth--;
        value_done(f);
        return r;
}

static void key_add(struct kapi_json_filter *f, unsigned ch)
{
        if (!f->key_lookup)
                return;
        if (ch == 0 || ch >= 0x80 || f->key_len == sizeof(f->key))
                f->key_long = true; /* no spec name has it */
        else
                f->key[f->key_len++] = (char)ch;
}

/* A key starts.  Under a "keep it all" node whether its member is kept
 * is known now (the cap), and the key is copied as it comes; under an
 * object spec it is gathered to be looked up at its end. */
static int key_begin(struct kapi_json_filter *f)
{
        struct frame *t = top(f);
        const struct node *n = t->node;
        f->in_key = true;
        f->key_len = 0;
        f->key_long = false;
        f->key_lookup = n && n->kind == NODE_OBJECT;
        f->key_all = n && n->kind == NODE_ALL;
        f->keep_str = false;
        f->state = ST_STRING;
        if (!f->key_all)
                return 0;
        f->next = capped(t);
        f->keep_str = f->next != NULL;
        if (!f->keep_str)
                return 0;
        int r = count_value(f);
        if (r == 0 && t->any)
                r = emit_ch(f, ',');
        t->any = true;
        return r ? r : emit_ch(f, '"');
}

static int key_end(struct kapi_json_filter *f)
{
        struct frame *t = top(f);
        f->in_key = false;
        f->state = ST_COLON;
        if (f->key_all) {
                f->key_kept = f->keep_str; /* f->next was set at its start */
                return 0;
        }
        f->next = f->key_long ? NULL : member_of(f, t, f->key, f->key_len);
        f->key_kept = f->next != NULL;
        if (!f->key_kept)
                return 0;
        int r = count_value(f);
        if (r == 0 && t->any)
                r = emit_ch(f, ',');
        t->any = true;
        if (r == 0)
                r = emit_ch(f, '"');
        if (r == 0)
                r = emit(f, f->key, f->key_len);
        return r ? r : emit_ch(f, '"');
}

static bool is_ws(char ch) { return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r'; }

static bool is_digit(char ch) { return ch >= '0' && ch <= '9'; }

static int unexpected(struct kapi_json_filter *f, size_t at, char ch, const char *what)
{
        unsigned char u = (unsigned char)ch;
        if (u >= 0x21 && u < 0x7f)
                return fail(f, -EBADMSG, "byte %llu: '%c' where %s is due",
                            (unsigned long long)(f->offset + at + 1), ch, what);
        return fail(f, -EBADMSG, "byte %llu: byte 0x%02x where %s is due",
                    (unsigned long long)(f->offset + at + 1), u, what);
}

/* A value starts with ch (state ST_VALUE or ST_FIRST_VALUE). */
static int value_start(struct kapi_json_filter *f, size_t at, char ch)
{
        int r;
        switch (ch) {
        case '{':
        case '[':
                r = value_begin(f);
                return r ? r : push(f, ch == '{');
        case '"':
                r = value_begin(f);
                f->in_key = false;
                f->keep_str = f->next != NULL;
                f->state = ST_STRING;
                return r == 0 && f->keep_str ? emit_ch(f, '"') : r;
        case 't':
        case 'f':
        case 'n':
                f->lit = ch == 't' ? "true" : ch == 'f' ? "false" : "null";
                f->lit_at = 1;
                f->state = ST_LITERAL;
                break;
        default:
                if (ch != '-' && !is_digit(ch))
                        return unexpected(f, at, ch, "a value");
                f->num = ch == '-' ? N_MINUS : ch == '0' ? N_ZERO : N_INT;
                f->state = ST_NUMBER;
                break;
        }
        r = value_begin(f);
        f->keep_scalar = f->next != NULL;
        return r == 0 && f->keep_scalar ? emit_ch(f, ch) : r;
}

/* Takes a number's next byte: 1 when taken, 0 when the number ended
 * before it (ch is the next token's), or -errno. */
static int number_step(struct kapi_json_filter *f, size_t at, char ch)
{
        bool digit = is_digit(ch), e = ch == 'e' || ch == 'E';
        enum num_state to;
        switch (f->num) {
        case N_MINUS:
                if (!digit)
                        return unexpected(f, at, ch, "a digit");
                to = ch == '0' ? N_ZERO : N_INT;
                break;
        case N_ZERO:
        case N_INT:
                if (digit && f->num == N_INT)
                        to = N_INT;
                else if (ch == '.')
                        to = N_DOT;
                else if (e)
                        to = N_E;
                else
                        return 0;
                break;
        case N_DOT:
        case N_FRAC:
                if (digit)
                        to = N_FRAC;
                else if (f->num == N_DOT)
                        return unexpected(f, at, ch, "a digit");
                else if (e)
                        to = N_E;
                else
                        return 0;
                break;
        case N_E:
                if (ch == '+' || ch == '-') {
                        to = N_ESIGN;
                        break;
                }
                __attribute__((fallthrough));
        case N_ESIGN:
                if (!digit)
                        return unexpected(f, at, ch, "a digit");
                to = N_EXP;
                break;
        case N_EXP:
        default:
                if (!digit)
                        return 0;
                to = N_EXP;
                break;
        }
        f->num = to;
        int r = f->keep_scalar ? emit_ch(f, ch) : 0;
        return r ? r : 1;
}

static bool number_complete(const struct kapi_json_filter *f)
{
        return f->num == N_ZERO || f->num == N_INT || f->num == N_FRAC || f->num == N_EXP;
}

/* The bytes of a string up to its next '"', '\\' or control byte: *at
 * moves past them.  Returns 0 or -errno. */
static int string_run(struct kapi_json_filter *f, const char *data, size_t len, size_t *at)
{
        size_t i = *at;
        while (i < len && data[i] != '"' && data[i] != '\\' && (unsigned char)data[i] >= 0x20)
                i++;
        int r = 0;
        if (f->keep_str)
                r = emit(f, data + *at, i - *at);
        else if (f->key_lookup)
                for (size_t k = *at; k < i; k++)
                        key_add(f, (unsigned char)data[k]);
        *at = i;
        return r;
}

static int escape_step(struct kapi_json_filter *f, size_t at, char ch)
{
        static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
        const char *p = ch ? strchr(from, ch) : NULL;
        if (ch == 'u') {
                f->hex_left = 4;
                f->hex_val = 0;
                f->state = ST_HEX;
        } else if (p) {
                key_add(f, (unsigned char)to[p - from]);
                f->state = ST_STRING;
        } else {
                return unexpected(f, at, ch, "an escape");
        }
        return f->keep_str ? emit_ch(f, ch) : 0;
}

static int hex_step(struct kapi_json_filter *f, size_t at, char ch)
{
        int v = ascii_hex_value(ch);
        if (v < 0)
                return unexpected(f, at, ch, "a hex digit");
        f->hex_val = f->hex_val * 16 + (unsigned)v;
        if (--f->hex_left == 0) {
                key_add(f, f->hex_val);
                f->state = ST_STRING;
        }
        return f->keep_str ? emit_ch(f, ch) : 0;
}

/* One byte at data[*at] in a state between tokens or inside a scalar;
 * *at moves past what was taken. */
static int step(struct kapi_json_filter *f, const char *data, size_t len, size_t *at)
{
        size_t i = *at;
        char ch = data[i];
        int r = 0;
        (*at)++;
        switch (f->state) {
        case ST_STRING:
                if (ch == '"') {
                        if (f->keep_str)
                                r = emit_ch(f, '"');
                        if (r == 0 && f->in_key)
                                return key_end(f);
                        value_done(f);
                        return r;
                }
                if (ch == '\\') {
                        f->state = ST_ESCAPE;
                        return f->keep_str ? emit_ch(f, ch) : 0;
                }
                if ((unsigned char)ch < 0x20)
                        return unexpected(f, i, ch,
                                          "a string's next byte (a control byte must be escaped)");
                *at = i;
                return string_run(f, data, len, at);
        case ST_ESCAPE:
                return escape_step(f, i, ch);
        case ST_HEX:
                return hex_step(f, i, ch);
        case ST_NUMBER:
                r = number_step(f, i, ch);
                if (r == 0) {
                        (*at)--; /* the next token's */
                        value_done(f);
                }
                return r < 0 ? r : 0;
        case ST_LITERAL:
                if (ch != f->lit[f->lit_at])
                        return unexpected(f, i, ch, f->lit);
                if (f->keep_scalar)
                        r = emit_ch(f, ch);
                if (!f->lit[++f->lit_at])
                        value_done(f);
                return r;
        default:
                break;
        }
        if (is_ws(ch))
                return 0;
        switch (f->state) {
        case ST_FIRST_VALUE:
                if (ch == ']')
                        return pop(f);
                __attribute__((fallthrough));
        case ST_VALUE:
                return value_start(f, i, ch);
        case ST_FIRST_KEY:
                if (ch == '}')
                        return pop(f);
                __attribute__((fallthrough));
        case ST_KEY:
                if (ch != '"')
                        return unexpected(f, i, ch, "a key");
                return key_begin(f);
        case ST_COLON:
                if (ch != ':')
                        return unexpected(f, i, ch, "':'");
                f->state = ST_VALUE;
                return f->key_kept ? emit_ch(f, ':') : 0;
        case ST_AFTER: {
                struct frame *t = top(f);
                if (ch == ',') {
                        f->state = t->object ? ST_KEY : ST_VALUE;
                        if (!t->object)
                                f->next = item_of(f, t);
                        return 0;
                }
                if (ch == (t->object ? '}' : ']'))
                        return pop(f);
                return unexpected(f, i, ch, t->object ? "',' or '}'" : "',' or ']'");
        }
        case ST_DONE:
        default:
                return unexpected(f, i, ch, "the end of the document");
        }
}

int kapi_json_filter_feed(struct kapi_json_filter *f, const char *data, size_t len)
{
        if (f->err)
                return f->err;
        size_t at = 0;
        while (at < len) {
                int r = step(f, data, len, &at);
                if (r < 0)
                        return r;
        }
        f->offset += len;
        return 0;
}

int kapi_json_filter_finish(struct kapi_json_filter *f, const char **out, size_t *len)
{
        if (f->err)
                return f->err;
        if (f->state == ST_NUMBER && f->depth == 0 && number_complete(f))
                f->state = ST_DONE;
        if (!f->started) {
                *out = NULL;
                *len = 0;
                return 0;
        }
        if (f->state != ST_DONE)
                return fail(f, -EBADMSG, "byte %llu: the document ends early",
                            (unsigned long long)f->offset);
        *out = f->out;
        *len = f->out_len;
        return 0;
}

int kapi_json_load(const char *data, size_t len, const struct kapi_json_spec *spec,
                   const struct kapi_json_budget *budget, size_t flags, json_t **out,
                   struct diag *diag)
{
        struct kapi_json_filter *f = kapi_json_filter_new(spec, budget);
        const char *kept = NULL;
        size_t kept_len = 0;
        int r = kapi_json_filter_feed(f, data, len);
        if (r == 0)
                r = kapi_json_filter_finish(f, &kept, &kept_len);
        if (r < 0) {
                diag_set(diag, r, "%s", kapi_json_filter_why(f));
                kapi_json_filter_free(f);
                return r;
        }
        json_t *j = NULL;
        if (kept) {
                json_error_t je;
                j = json_loadb(kept, kept_len, flags, &je);
                if (!j)
                        r = diag_set(diag, -EBADMSG, "%s", je.text);
        }
        kapi_json_filter_free(f);
        if (r == 0)
                *out = j;
        return r;
}
