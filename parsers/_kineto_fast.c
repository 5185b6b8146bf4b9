/* A compiled reader for the event array of a PyTorch profiler (Kineto) trace.
 *
 * It turns a block of whole events into the staged columns that parsers/kineto.py's DuckDB reader
 * (_BATCH_SELECT over read_json) produces, with the same values, as Arrow buffers: no Python object is
 * made per event and the GIL is released while a block is read, so two threads read two halves of a
 * file on two cores. It validates everything it passes over (strict JSON, UTF-8, no control characters).
 *
 * It reads the common case only. Whatever it cannot reproduce exactly -- a float where text is kept,
 * escapes inside nested values, a duplicated key, invalid JSON -- raises Unsupported(offset, reason), and
 * the caller reads that piece of the array with the DuckDB path instead, which gives the documented result
 * or error. tests/test_kineto_fast.py
 * checks that both readers stage identical rows for every real trace in sample_traces/.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

enum { OK = 0, NEED_MORE = 1, BAD = 2 };
enum { V_ABSENT = 0, V_NULL, V_STR, V_INT, V_FLOAT, V_TRUE, V_FALSE, V_NESTED };

typedef struct {
    int kind;
    const char *p; /* V_STR: the content between the quotes; V_INT/V_FLOAT/V_NESTED: the raw text */
    size_t len;
    int escaped;   /* V_STR holds a backslash escape */
    int plain;     /* V_NESTED: no float, no -0 and no escape inside (its minified text is DuckDB's) */
    int negzero;   /* V_INT: the text is "-0" */
    const char *int_end, *frac_end; /* V_INT/V_FLOAT: where the integer digits end, and the fraction's (or int_end) */
    int has_exp;                    /* V_INT/V_FLOAT: an exponent follows */
} Val;

typedef struct {
    const char *bad_at;
    const char *reason;
} Err;

/* ---------------------------------------------------------------- growable buffers and columns */

typedef struct {
    char *p;
    size_t len, cap;
} Buf;

static int buf_reserve(Buf *b, size_t extra) {
    if (b->len + extra <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + extra) cap *= 2;
    char *q = realloc(b->p, cap);
    if (!q) return -1;
    b->p = q;
    b->cap = cap;
    return 0;
}

static int buf_put(Buf *b, const void *src, size_t n) {
    if (n == 0) return 0;
    if (buf_reserve(b, n)) return -1;
    memcpy(b->p + b->len, src, n);
    b->len += n;
    return 0;
}

typedef struct {
    Buf valid, values, data; /* data: string bytes; values: int32 offsets, int64 values or a bit map */
    int64_t n, nulls;
    int type; /* 's' string, 'i' int64, 'b' bool */
} Col;

static int bit_push(Buf *b, int64_t i, int on) {
    if ((i & 7) == 0) {
        if (buf_reserve(b, 1)) return -1;
        b->p[b->len++] = 0;
    }
    if (on) b->p[i >> 3] |= (char)(1 << (i & 7));
    return 0;
}

static int col_null(Col *c) {
    if (bit_push(&c->valid, c->n, 0)) return -1;
    c->nulls++;
    if (c->type == 's') {
        int32_t off = (int32_t)c->data.len;
        if (buf_put(&c->values, &off, 4)) return -1;
    } else if (c->type == 'i') {
        int64_t z = 0;
        if (buf_put(&c->values, &z, 8)) return -1;
    } else if (bit_push(&c->values, c->n, 0)) {
        return -1;
    }
    c->n++;
    return 0;
}

static int col_int(Col *c, int64_t v) {
    if (bit_push(&c->valid, c->n, 1) || buf_put(&c->values, &v, 8)) return -1;
    c->n++;
    return 0;
}

static int col_bool(Col *c, int v) {
    if (bit_push(&c->valid, c->n, 1) || bit_push(&c->values, c->n, v)) return -1;
    c->n++;
    return 0;
}

/* A string value: the bytes already appended to c->data since the last row are the value. */
static int col_str_done(Col *c) {
    int32_t off = (int32_t)c->data.len;
    if (bit_push(&c->valid, c->n, 1) || buf_put(&c->values, &off, 4)) return -1;
    c->n++;
    return 0;
}

static int col_str(Col *c, const char *p, size_t n) {
    if (buf_put(&c->data, p, n)) return -1;
    return col_str_done(c);
}

static void col_free(Col *c) {
    free(c->valid.p);
    free(c->values.p);
    free(c->data.p);
    memset(c, 0, sizeof *c);
}

/* ---------------------------------------------------------------- strict JSON scanning */

static inline const char *skip_ws(const char *p, const char *end) {
    if (p < end && (unsigned char)*p > ' ') return p; /* compact JSON: no whitespace at all */
    if (p < end && *p == '\n') { /* pretty-printed: a newline, then indentation, eight spaces at a time */
        p++;
        uint64_t w;
        while (end - p >= 8 && (memcpy(&w, p, 8), w == 0x2020202020202020ULL)) p += 8;
    }
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) p++;
    return p;
}

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static int hex4(const unsigned char *p, const unsigned char *end, unsigned *out) {
    if (end - p < 4) return NEED_MORE;
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(p[i]);
        if (h < 0) return BAD;
        v = (v << 4) | (unsigned)h;
    }
    *out = v;
    return OK;
}

/* One UTF-8 sequence starting with a byte >= 0x80: its length, or 0 if invalid, -1 if cut short. */
static int utf8_seq(const unsigned char *p, const unsigned char *end) {
    unsigned c = p[0];
    int n;
    unsigned lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) n = 2;
    else if (c == 0xE0) n = 3, lo = 0xA0;
    else if (c == 0xED) n = 3, hi = 0x9F;
    else if (c >= 0xE1 && c <= 0xEF) n = 3;
    else if (c == 0xF0) n = 4, lo = 0x90;
    else if (c >= 0xF1 && c <= 0xF3) n = 4;
    else if (c == 0xF4) n = 4, hi = 0x8F;
    else return 0;
    if (end - p < n) return -1;
    if (p[1] < lo || p[1] > hi) return 0;
    for (int i = 2; i < n; i++)
        if (p[i] < 0x80 || p[i] > 0xBF) return 0;
    return n;
}

/* Bytes that need no attention inside a string: ASCII, not a control character, quote or backslash. */
static unsigned char PLAIN[256];

static void init_tables(void) {
    for (int c = 0; c < 256; c++) PLAIN[c] = c >= 0x20 && c < 0x80 && c != '"' && c != '\\';
}

/* The first byte at or after p that is not PLAIN, or end: 16 bytes at a time (SSE2, every x86-64), or 32 where
 * the CPU has AVX2 (checked once, at import: the build itself assumes no more than the compiler's default). */
#ifdef __SSE2__
/* A bit per byte of the 16 at p that is a quote, a backslash, or (signed) below 0x20: a control character or
 * a byte >= 0x80. */
static inline int stop_mask16(const unsigned char *p) {
    const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\'), space = _mm_set1_epi8(0x20);
    __m128i x = _mm_loadu_si128((const __m128i *)p);
    return _mm_movemask_epi8(
        _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, backslash)), _mm_cmplt_epi8(x, space)));
}

static inline const unsigned char *skip_plain_sse2(const unsigned char *p, const unsigned char *end) {
    for (; end - p >= 16; p += 16) {
        int mask = stop_mask16(p);
        if (mask) return p + __builtin_ctz((unsigned)mask);
    }
    return p;
}
#endif

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_AVX2_PATH 1
static int use_avx2;

__attribute__((target("avx2"))) static const unsigned char *skip_plain_avx2(const unsigned char *p,
                                                                          const unsigned char *end) {
    const __m256i quote = _mm256_set1_epi8('"'), backslash = _mm256_set1_epi8('\\'), space = _mm256_set1_epi8(0x20);
    while (end - p >= 32) {
        __m256i x = _mm256_loadu_si256((const __m256i *)p);
        __m256i stop = _mm256_or_si256(_mm256_or_si256(_mm256_cmpeq_epi8(x, quote), _mm256_cmpeq_epi8(x, backslash)),
                                       _mm256_cmpgt_epi8(space, x));
        unsigned mask = (unsigned)_mm256_movemask_epi8(stop);
        if (mask) return p + __builtin_ctz(mask);
        p += 32;
    }
    return skip_plain_sse2(p, end);
}
#endif

static inline const unsigned char *skip_plain(const unsigned char *p, const unsigned char *end) {
#ifdef __SSE2__
    if (end - p >= 16) { /* most strings are short keys: their end is in the first 16 bytes, read inline */
        int mask = stop_mask16(p);
        if (mask) return p + __builtin_ctz((unsigned)mask);
        p += 16;
#ifdef HAVE_AVX2_PATH
        if (use_avx2)
            p = skip_plain_avx2(p, end);
        else
#endif
            p = skip_plain_sse2(p, end);
    }
#endif
    while (p < end && PLAIN[*p]) p++;
    return p;
}

/* *pp at the opening quote; leaves *pp after the closing quote. */
static int scan_string_any(const char **pp, const char *end_, Val *v, Err *err) {
    const unsigned char *p = (const unsigned char *)*pp + 1, *end = (const unsigned char *)end_;
    const unsigned char *start = p;
    int escaped = 0;
    for (;;) {
        p = skip_plain(p, end);
        if (p >= end) return NEED_MORE;
        unsigned c = *p;
        if (c == '"') break;
        if (c == '\\') {
            escaped = 1;
            if (p + 1 >= end) return NEED_MORE;
            c = p[1];
            if (c == 'u') {
                unsigned u, u2;
                int r = hex4(p + 2, end, &u);
                if (r) return r == BAD ? (err->bad_at = (const char *)p, err->reason = "bad \\u escape", BAD) : r;
                p += 6;
                if (u >= 0xDC00 && u <= 0xDFFF) {
                    err->bad_at = (const char *)p;
                    err->reason = "lone low surrogate escape";
                    return BAD;
                }
                if (u >= 0xD800 && u <= 0xDBFF) {
                    if (end - p < 6) return NEED_MORE;
                    if (p[0] != '\\' || p[1] != 'u' || hex4(p + 2, end, &u2) != OK || u2 < 0xDC00 || u2 > 0xDFFF) {
                        err->bad_at = (const char *)p;
                        err->reason = "lone high surrogate escape";
                        return BAD;
                    }
                    p += 6;
                }
                continue;
            }
            if (c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' || c == 'r' || c == 't') {
                p += 2;
                continue;
            }
            err->bad_at = (const char *)p;
            err->reason = "invalid escape";
            return BAD;
        }
        if (c < 0x20) {
            err->bad_at = (const char *)p;
            err->reason = "control character in a string";
            return BAD;
        }
        int n = utf8_seq(p, end);
        if (n < 0) return NEED_MORE;
        if (n == 0) {
            err->bad_at = (const char *)p;
            err->reason = "invalid UTF-8";
            return BAD;
        }
        p += n;
    }
    v->kind = V_STR;
    v->p = (const char *)start;
    v->len = (size_t)(p - start);
    v->escaped = escaped;
    *pp = (const char *)p + 1;
    return OK;
}

/* scan_string, inline where the string is short (most are keys): its closing quote is the first byte of the 16
 * after the opening one that is not PLAIN. */
static inline __attribute__((always_inline)) int scan_string(const char **pp, const char *end, Val *v, Err *err) {
#ifdef __SSE2__
    const unsigned char *p = (const unsigned char *)*pp + 1;
    if ((const unsigned char *)end - p >= 16) {
        int mask = stop_mask16(p);
        if (mask) {
            int at = __builtin_ctz((unsigned)mask);
            if (p[at] == '"') {
                v->kind = V_STR;
                v->p = (const char *)p;
                v->len = (size_t)at;
                v->escaped = 0;
                *pp = (const char *)p + at + 1;
                return OK;
            }
        }
    }
#endif
    return scan_string_any(pp, end, v, err);
}

/* The first byte at or after p that is not a digit, or end: 16 bytes at a time (times have 16 or more). */
static inline const char *skip_digits(const char *p, const char *end) {
#ifdef __SSE2__
    const __m128i below = _mm_set1_epi8('0' - 1), above = _mm_set1_epi8('9' + 1);
    for (; end - p >= 16; p += 16) { /* a bit per byte that is not a digit (bytes >= 0x80 are below '0', signed) */
        __m128i x = _mm_loadu_si128((const __m128i *)p);
        int digit = _mm_movemask_epi8(_mm_and_si128(_mm_cmpgt_epi8(x, below), _mm_cmplt_epi8(x, above)));
        if (digit != 0xFFFF) return p + __builtin_ctz(~(unsigned)digit);
    }
#endif
    while (p < end && *p >= '0' && *p <= '9') p++;
    return p;
}

/* One or more digits (a fraction or an exponent); NEED_MORE where the block ends inside them. */
static int scan_digits(const char **pp, const char *end, Err *err) {
    const char *p = *pp, *d = p;
    p = skip_digits(p, end);
    if (p >= end) return NEED_MORE;
    if (p == d) {
        err->bad_at = p;
        err->reason = "invalid number";
        return BAD;
    }
    *pp = p;
    return OK;
}

static int scan_number(const char **pp, const char *end, Val *v, Err *err) {
    const char *p = *pp, *start = p;
    int is_float = 0;
    if (*p == '-') p++;
    if (p >= end) return NEED_MORE;
    if (*p == '0') {
        p++;
    } else if (*p >= '1' && *p <= '9') {
        p = skip_digits(p, end);
    } else {
        err->bad_at = p;
        err->reason = "invalid number";
        return BAD;
    }
    int r;
    const char *int_end = p, *frac_end = p;
    if (p < end && *p == '.') {
        is_float = 1;
        p++;
        if ((r = scan_digits(&p, end, err))) return r;
        frac_end = p;
    }
    v->has_exp = 0;
    if (p < end && (*p == 'e' || *p == 'E')) {
        v->has_exp = 1;
        is_float = 1;
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        if ((r = scan_digits(&p, end, err))) return r;
    }
    if (p >= end) return NEED_MORE; /* the number may go on in the next block */
    v->kind = is_float ? V_FLOAT : V_INT;
    v->p = start;
    v->len = (size_t)(p - start);
    v->negzero = !is_float && v->len == 2 && start[0] == '-' && start[1] == '0';
    v->int_end = int_end;
    v->frac_end = frac_end;
    *pp = p;
    return OK;
}

static int scan_literal(const char **pp, const char *end, const char *word, size_t n, Err *err) {
    size_t have = (size_t)(end - *pp) < n ? (size_t)(end - *pp) : n;
    if (memcmp(*pp, word, have)) {
        err->bad_at = *pp;
        err->reason = "invalid JSON value";
        return BAD;
    }
    if (have < n) return NEED_MORE;
    *pp += n;
    return OK;
}

#define MAX_DEPTH 512

/* An object member's key and colon: *pp at the key's quote, left at the value. */
static int scan_key(const char **pp, const char *end, Val *key, Err *err) {
    const char *p = *pp;
    int r;
    if (*p != '"') {
        err->bad_at = p;
        err->reason = "expected a key";
        return BAD;
    }
    if ((r = scan_string(&p, end, key, err))) return r;
    p = skip_ws(p, end);
    if (p >= end) return NEED_MORE;
    if (*p != ':') {
        err->bad_at = p;
        err->reason = "expected ':'";
        return BAD;
    }
    p = skip_ws(p + 1, end);
    if (p >= end) return NEED_MORE;
    *pp = p;
    return OK;
}

/* After a member or element: a ',' (then *more = 1, *pp at the next one) or the closing bracket (then
 * *more = 0, *pp after it). */
static int scan_separator(const char **pp, const char *end, char close, int *more, Err *err) {
    const char *p = skip_ws(*pp, end);
    if (p >= end) return NEED_MORE;
    if (*p == ',') {
        p = skip_ws(p + 1, end);
        if (p >= end) return NEED_MORE;
        *more = 1;
    } else if (*p == close) {
        p++;
        *more = 0;
    } else {
        err->bad_at = p;
        err->reason = close == '}' ? "expected ',' or '}'" : "expected ',' or ']'";
        return BAD;
    }
    *pp = p;
    return OK;
}

/* An array or object, validated without recursion; *pp at its opening bracket. Marks it plain when no
 * float, -0 or escape is inside (then its minified text is the text DuckDB gives it). */
static int scan_nested(const char **pp, const char *end, Val *v, Err *err) {
    char stack[MAX_DEPTH]; /* the closing bracket of each open level */
    int depth = 0, plain = 1, more, r;
    const char *p = *pp, *start = p;
    Val inner;
open:
    if (depth >= MAX_DEPTH) {
        err->bad_at = p;
        err->reason = "nesting too deep";
        return BAD;
    }
    stack[depth++] = *p == '{' ? '}' : ']';
    p = skip_ws(p + 1, end);
    if (p >= end) return NEED_MORE;
    if (*p == stack[depth - 1]) {
        p++;
        goto closed;
    }
    for (;;) {
        if (stack[depth - 1] == '}') { /* a member: its key first */
            if ((r = scan_key(&p, end, &inner, err))) return r;
            plain &= !inner.escaped;
        }
        switch (*p) {
        case '{':
        case '[':
            goto open;
        case '"':
            if ((r = scan_string(&p, end, &inner, err))) return r;
            plain &= !inner.escaped;
            break;
        case 't':
            if ((r = scan_literal(&p, end, "true", 4, err))) return r;
            break;
        case 'f':
            if ((r = scan_literal(&p, end, "false", 5, err))) return r;
            break;
        case 'n':
            if ((r = scan_literal(&p, end, "null", 4, err))) return r;
            break;
        default:
            if (*p != '-' && (*p < '0' || *p > '9')) {
                err->bad_at = p;
                err->reason = "invalid JSON value";
                return BAD;
            }
            if ((r = scan_number(&p, end, &inner, err))) return r;
            plain &= inner.kind == V_INT && !inner.negzero;
        }
    next:
        if ((r = scan_separator(&p, end, stack[depth - 1], &more, err))) return r;
        if (more) continue;
    closed:
        if (--depth == 0) break;
        goto next;
    }
    v->kind = V_NESTED;
    v->p = start;
    v->len = (size_t)(p - start);
    v->plain = plain;
    *pp = p;
    return OK;
}

/* Any JSON value; classifies it into v. Nested values are validated and marked plain or not. */
static int scan_value(const char **pp, const char *end, Val *v, Err *err) {
    const char *p = *pp;
    if (p >= end) return NEED_MORE;
    int r;
    switch (*p) {
    case '"':
        return scan_string(pp, end, v, err);
    case '{':
    case '[':
        return scan_nested(pp, end, v, err);
    case 't':
        if ((r = scan_literal(pp, end, "true", 4, err))) return r;
        v->kind = V_TRUE;
        return OK;
    case 'f':
        if ((r = scan_literal(pp, end, "false", 5, err))) return r;
        v->kind = V_FALSE;
        return OK;
    case 'n':
        if ((r = scan_literal(pp, end, "null", 4, err))) return r;
        v->kind = V_NULL;
        return OK;
    default:
        if (*p == '-' || (*p >= '0' && *p <= '9')) return scan_number(pp, end, v, err);
        err->bad_at = p;
        err->reason = "invalid JSON value";
        return BAD;
    }
}

/* ---------------------------------------------------------------- values as DuckDB's VARCHAR text */

static void put_utf8(Buf *b, unsigned u) {
    char s[4];
    size_t n;
    if (u < 0x80) s[0] = (char)u, n = 1;
    else if (u < 0x800) s[0] = (char)(0xC0 | (u >> 6)), s[1] = (char)(0x80 | (u & 0x3F)), n = 2;
    else if (u < 0x10000)
        s[0] = (char)(0xE0 | (u >> 12)), s[1] = (char)(0x80 | ((u >> 6) & 0x3F)), s[2] = (char)(0x80 | (u & 0x3F)), n = 3;
    else
        s[0] = (char)(0xF0 | (u >> 18)), s[1] = (char)(0x80 | ((u >> 12) & 0x3F)), s[2] = (char)(0x80 | ((u >> 6) & 0x3F)),
        s[3] = (char)(0x80 | (u & 0x3F)), n = 4;
    buf_put(b, s, n);
}

/* Appends a (validated) string's decoded content; the buffer has room (decoding never grows text). */
static void put_decoded(Buf *b, const char *p, size_t len) {
    const char *end = p + len;
    while (p < end) {
        const char *q = memchr(p, '\\', (size_t)(end - p));
        if (!q) q = end;
        memcpy(b->p + b->len, p, (size_t)(q - p));
        b->len += (size_t)(q - p);
        if (q == end) break;
        char c = q[1];
        if (c == 'u') {
            unsigned u = 0, u2 = 0xDC00;
            hex4((const unsigned char *)q + 2, (const unsigned char *)end, &u);
            p = q + 6;
            if (u >= 0xD800 && u <= 0xDBFF) {
                hex4((const unsigned char *)p + 2, (const unsigned char *)end, &u2);
                u = 0x10000 + ((u - 0xD800) << 10) + (u2 - 0xDC00);
                p += 6;
            }
            put_utf8(b, u);
            continue;
        }
        b->p[b->len++] = c == 'b' ? '\b' : c == 'f' ? '\f' : c == 'n' ? '\n' : c == 'r' ? '\r' : c == 't' ? '\t' : c;
        p = q + 2;
    }
}

/* Whether any byte in [p, end) is a space, a tab or a line break (or another byte <= 0x20). */
static int has_space(const char *p, const char *end) {
#ifdef __SSE2__
    const __m128i above = _mm_set1_epi8(0x21);
    for (; end - p >= 16; p += 16) /* bytes >= 0x80 are negative, so below 0x21: those (in strings) say maybe */
        if (_mm_movemask_epi8(_mm_cmplt_epi8(_mm_loadu_si128((const __m128i *)p), above))) return 1;
#endif
    for (; p < end; p++)
        if ((unsigned char)*p <= ' ') return 1;
    return 0;
}

/* Appends a plain nested value's text with the whitespace outside strings removed (room as above). */
static void put_minified(Buf *b, const char *p, size_t len) {
    const char *end = p + len;
    if (!has_space(p, end)) { /* compact JSON: nothing to remove */
        memcpy(b->p + b->len, p, len);
        b->len += len;
        return;
    }
    while (p < end) {
        char c = *p;
        if (c == '"') {
            const char *q = memchr(p + 1, '"', (size_t)(end - p - 1)); /* plain: no escapes inside */
            memcpy(b->p + b->len, p, (size_t)(q - p + 1));
            b->len += (size_t)(q - p + 1);
            p = q + 1;
        } else {
            if (c != ' ' && c != '\n' && c != '\r' && c != '\t') b->p[b->len++] = c;
            p++;
        }
    }
}

/* ---------------------------------------------------------------- one event → one staged row */

typedef struct {
    int null;
    const char *p;
    size_t n;
} Text;

typedef struct {
    int null;
    int64_t v;
} Int;

/* The VARCHAR DuckDB reads for a JSON value; escaped and nested text is written to scratch (which has
 * room for the whole event). BAD where DuckDB's text would differ from what is read here. */
static inline __attribute__((always_inline)) int text_of(const Val *v, Buf *scratch, Text *t, Err *err) {
    t->null = 0;
    switch (v->kind) {
    case V_ABSENT:
    case V_NULL:
        t->null = 1, t->p = NULL, t->n = 0;
        return OK;
    case V_STR:
        if (v->escaped) {
            size_t at = scratch->len;
            put_decoded(scratch, v->p, v->len);
            t->p = scratch->p + at, t->n = scratch->len - at;
        } else {
            t->p = v->p, t->n = v->len;
        }
        return OK;
    case V_INT:
        if (v->negzero) break;
        t->p = v->p, t->n = v->len;
        return OK;
    case V_TRUE:
        t->p = "true", t->n = 4;
        return OK;
    case V_FALSE:
        t->p = "false", t->n = 5;
        return OK;
    case V_NESTED:
        if (!v->plain) break;
        size_t at = scratch->len;
        put_minified(scratch, v->p, v->len);
        t->p = scratch->p + at, t->n = scratch->len - at;
        return OK;
    default:
        break;
    }
    err->bad_at = v->p;
    err->reason = "a float, -0 or an escaped nested value where text is kept";
    return BAD;
}

static int val_is_null(const Val *v) { return v->kind == V_ABSENT || v->kind == V_NULL; }

/* A text equal to a string literal (the length is a constant, so the comparison is inlined). */
#define TEXT_IS(t, lit) (!(t)->null && (t)->n == sizeof(lit) - 1 && memcmp((t)->p, lit, sizeof(lit) - 1) == 0)
#define KEY_IS(p, n, lit) ((n) == sizeof(lit) - 1 && memcmp(p, lit, sizeof(lit) - 1) == 0)

/* ph as one character; 0 for a longer or empty text, -1 for NULL. */
static inline int ph_code(const Text *t) { return t->null ? -1 : t->n == 1 ? (unsigned char)t->p[0] : 0; }

/* TRY_CAST of "0x" or "0X" and hex digits AS BIGINT, as DuckDB casts such text (documented since 0.10: '0xFF'::INT
 * = 255): the value, or NULL beyond int64. ROCm's runtime events write their stream handle so ("stream": "0x0").
 * 0 where the text is another form (a sign, an underscore, no digit after the prefix: left to the caller). */
static int try_hex(const Text *t, Int *out) {
    const char *p = t->p;
    size_t n = t->n;
    if (n < 3 || p[0] != '0' || (p[1] != 'x' && p[1] != 'X')) return 0;
    uint64_t acc = 0;
    int over = 0;
    for (size_t k = 2; k < n; k++) {
        int h = hexval((unsigned char)p[k]);
        if (h < 0) return 0;
        if (acc > ((uint64_t)INT64_MAX - (unsigned)h) / 16) over = 1;
        else acc = acc * 16 + (unsigned)h;
    }
    out->null = over;
    out->v = over ? 0 : (int64_t)acc;
    return 1;
}

/* TRY_CAST(text AS BIGINT): NULL where DuckDB gives NULL, BAD where unsure (forms DuckDB rounds or trims). */
static int try_bigint(const Text *t, Int *out, const char *at, Err *err) {
    out->null = 1;
    if (t->null) return OK;
    const char *p = t->p;
    size_t n = t->n, i = 0;
    int neg = 0;
    if (n && p[0] == '-') neg = 1, i = 1;
    if (i < n && n - i <= 18) { /* the common case, in one pass: up to 18 digits, which no int64 overflows */
        uint64_t acc = 0;
        size_t k = i;
        for (; k < n && (unsigned)(p[k] - '0') <= 9; k++) acc = acc * 10 + (unsigned)(p[k] - '0');
        if (k == n) {
            out->null = 0;
            out->v = neg ? -(int64_t)acc : (int64_t)acc;
            return OK;
        }
    }
    int digits_only = i < n;
    for (size_t k = i; k < n; k++)
        if (p[k] < '0' || p[k] > '9') digits_only = 0;
    if (!digits_only && try_hex(t, out)) return OK;
    if (!digits_only) {
        for (size_t k = 0; k < n; k++)
            if (p[k] >= '0' && p[k] <= '9') {
                err->bad_at = at;
                err->reason = "an integer written in a form other than plain digits";
                return BAD;
            }
        return OK; /* no digit at all: not a number */
    }
    uint64_t acc = 0, limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    for (; i < n; i++) {
        unsigned d = (unsigned)(p[i] - '0');
        if (acc > (limit - d) / 10) return OK; /* beyond int64: NULL */
        acc = acc * 10 + d;
    }
    out->null = 0;
    out->v = neg ? (int64_t)(0 - acc) : (int64_t)acc;
    return OK;
}

/* Eight ASCII digits, already less '0' each, first digit in the lowest byte: their value (three multiplications:
 * pairs of digits, then pairs of pairs, then the two halves). */
static inline uint64_t eight_digits(uint64_t v) {
    v = v * 10 + (v >> 8);                    /* each byte pair (at even bytes): 10 x first + second, 0..99 */
    v = (v & 0x00FF00FF00FF00FFULL) * 100 + ((v >> 16) & 0x00FF00FF00FF00FFULL); /* at bytes 0 and 4: 0..9999 */
    return (v & 0xFFFFULL) * 10000 + ((v >> 32) & 0xFFFFULL);
}

/* The value of n digits (1 <= n <= 16) at p, which holds no other bytes in [p, p + n). */
static inline uint64_t digits_value(const char *p, int n) {
    const uint64_t zeros = 0x3030303030303030ULL;
    uint64_t w, acc = 0;
    if (n < 8) {
        for (int k = 0; k < n; k++) acc = acc * 10 + (unsigned)(p[k] - '0');
        return acc;
    }
    memcpy(&w, p, 8);
    acc = eight_digits(w - zeros);
    if (n == 8) return acc;
    static const uint64_t pow10[9] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000};
    int more = n - 8; /* the last `more` digits: the eight bytes ending at p + n, the ones already read zeroed */
    memcpy(&w, p + n - 8, 8);
    uint64_t keep = more == 8 ? ~0ULL : ~0ULL << (8 * (8 - more));
    return acc * pow10[more] + eight_digits((w - zeros) & keep);
}

/* CAST(<DECIMAL(38,3) of the number> * 1000 AS BIGINT), as DuckDB's reader computes it: exact integer nanoseconds
 * from microseconds written as any JSON number (decimals, exponents, -0), rounded half away from zero at the
 * nanosecond (DuckDB's decimal cast of the number's text: 1.0005 -> 1001, -1.0005 -> -1001, 1.5e-3 -> 2), never
 * through a double. A value beyond int64 nanoseconds is declined (the DuckDB path then says what it is). The usual
 * form (no exponent, at most 16 integer digits) is read from where scan_number found its digits; others digit by digit. */
static int micros_to_ns(const Val *v, Int *out, Err *err) {
    out->null = 1;
    if (val_is_null(v)) return OK;
    if (v->kind != V_INT && v->kind != V_FLOAT) goto bad;
    const char *ip = v->p + (v->p[0] == '-');
    int digits = (int)(v->int_end - ip);
    if (!v->has_exp && digits <= 16) { /* the common form, at most 10^19 ns: no digit loop, no overflow check */
        const char *f = v->int_end + 1;
        int fl = v->frac_end == v->int_end ? 0 : (int)(v->frac_end - f);
        uint64_t ms = fl >= 3   ? (uint64_t)(f[0] - '0') * 100 + (uint64_t)(f[1] - '0') * 10 + (uint64_t)(f[2] - '0')
                      : fl == 2 ? (uint64_t)(f[0] - '0') * 100 + (uint64_t)(f[1] - '0') * 10
                      : fl == 1 ? (uint64_t)(f[0] - '0') * 100
                                : 0;
        uint64_t acc = digits_value(ip, digits) * 1000 + ms + (fl > 3 && f[3] >= '5'); /* half away from zero */
        if (acc <= (uint64_t)INT64_MAX) {
            out->null = 0;
            out->v = v->p[0] == '-' ? -(int64_t)acc : (int64_t)acc;
            return OK;
        }
    }
    const char *p = v->p, *end = v->p + v->len;
    int neg = 0;
    if (*p == '-') neg = 1, p++;
    const char *int_start = p;
    p = skip_digits(p, end);
    const char *int_end = p, *frac_start = p, *frac_end = p;
    if (p < end && *p == '.') {
        frac_start = ++p;
        p = skip_digits(p, end);
        frac_end = p;
    }
    long exp = 0;
    if (p < end && (*p == 'e' || *p == 'E')) {
        int eneg = 0;
        p++;
        if (p < end && (*p == '+' || *p == '-')) eneg = *p == '-', p++;
        for (; p < end && *p >= '0' && *p <= '9'; p++)
            if (exp < 100000) exp = exp * 10 + (*p - '0'); /* beyond any int64: clamped, decided below */
        if (eneg) exp = -exp;
    }
    if (p != end) goto bad;
    /* the digits D = integer digits then fraction digits; the value x 1000 keeps the first `kept` of them */
    long int_len = (long)(int_end - int_start), frac_len = (long)(frac_end - frac_start);
    long total = int_len + frac_len, kept = int_len + 3 + exp;
#define DIGIT(k) ((k) < int_len ? int_start[(k)] - '0' : frac_start[(k) - int_len] - '0')
    uint64_t acc = 0;
    long k = 0, upto = total < kept ? total : kept;
    if (upto <= 19) { /* no 19 digits overflow 64 bits: no check per digit */
        long in_int = upto < int_len ? upto : int_len;
        for (; k < in_int; k++) acc = acc * 10 + (unsigned)(int_start[k] - '0');
        for (; k < upto; k++) acc = acc * 10 + (unsigned)(frac_start[k - int_len] - '0');
    }
    for (; k < upto; k++) {
        unsigned d = (unsigned)DIGIT(k);
        if (acc > (UINT64_MAX - d) / 10) goto bad;
        acc = acc * 10 + d;
    }
    if (kept > total) { /* whole: D followed by zeros */
        for (long z = total; z < kept; z++) {
            if (acc == 0) break;
            if (acc > UINT64_MAX / 10) goto bad;
            acc *= 10;
        }
    } else if (kept >= 0 && kept < total && DIGIT(kept) >= 5) {
        acc += 1; /* the first digit dropped is 5 or more: half away from zero */
    }
#undef DIGIT
    if (acc > (uint64_t)INT64_MAX) goto bad;
    out->null = 0;
    out->v = neg ? -(int64_t)acc : (int64_t)acc;
    return OK;
bad:
    err->bad_at = v->p;
    err->reason = "a time beyond 64-bit integer nanoseconds";
    return BAD;
}

enum { K_PH, K_CAT, K_NAME, K_PID, K_TID, K_TS, K_DUR, K_ID, K_BP, K_ARGS, N_KEYS };
/* top-level keys: ph cat name pid tid ts dur id bp args (top_key) */
enum {
    A_EXT, A_CORR, A_EVIDX, A_PEI, A_DEVICE, A_STREAM, A_GRID, A_BLOCK, A_BYTES, A_CBID, A_CID, A_DIMS, A_NAME, A_LABELS,
    N_ARGS
};
/* args keys: "External id" (or "external id"), correlation, "Ev Idx", "Profiler Event Index", device, stream, grid,
 * block, bytes, cbid, cid, "Input Dims", name, labels (arg_key) */

/* The staged columns: kineto._STAGED's order, then old_cat, bad_link, dropped and flow_id as an integer. */
enum {
    C_PH, C_CAT, C_NAME, C_PID, C_TID, C_TS, C_DUR, C_EXT, C_CORR, C_EVIDX, C_DEVICE, C_STREAM, C_GRID, C_BLOCK, C_BYTES,
    C_CBID, C_DIMS, C_META, C_FLOW_ID, C_FLOW_BP, C_OLD_CAT, C_BAD_LINK, C_DROPPED, C_FLOW_INT, N_COLS
};
static const char COL_TYPES[N_COLS + 1] = "sssssiiiiiiissiissssbbbi";
#define N_TEXT_STAGED 20 /* the columns hashed for duplicate detection: C_PH .. C_FLOW_BP */

typedef struct {
    Text t[N_COLS]; /* text columns */
    Int i[N_COLS];  /* integer columns */
    int b[N_COLS];  /* bool columns: 0, 1, or -1 for NULL */
} Row;

/* Where a kept event goes (kineto._finalize's WHERE clauses over the kept rows). */
/* S_LAUNCHES: the ops rows that launch GPU work (cat cuda_runtime or cuda_driver, with a correlation id), also
 * staged apart, so that linking kernels to their launches reads them alone and not every op. */
enum { S_KERNELS, S_OPS, S_ANNOTATIONS, S_FLOWS, S_META, S_LAUNCHES, N_SINKS, S_NONE = -1 };

/* The counts kineto._finalize reads off the staged rows (same names, same order). */
enum {
    N_READ, N_DROPPED_PY, N_X, N_ZERO_TS, N_PYTHON, N_NS_DECIMALS, N_INSTANTS, N_META, N_OTHER_PH, N_CAPITALISED, N_OLD_FLOWS,
    N_MAX_X_TS, N_NEGATIVE_DUR, N_BAD_LINK, N_MIN_TS, N_MAX_TS, N_EVENTS, N_NULL_TS, N_COUNTS
};
static const char *COUNT_NAMES = "read dropped_py x zero_ts python ns_decimals instants meta other_ph capitalised_cats old_flows "
                                 "max_x_ts negative_dur bad_link min_ts max_ts events null_ts";

typedef struct {
    int64_t v[N_COUNTS];
    int has[N_COUNTS]; /* for the min/max entries: whether any row gave one */
} Counts;


/* name LIKE '%execute_model%' ('_' is any one character). */
static int like_execute_model(const Text *t) {
    const unsigned char *p = (const unsigned char *)t->p, *end = p + t->n;
    for (const unsigned char *s = p; s + 7 <= end; s++) {
        if (memcmp(s, "execute", 7)) continue;
        const unsigned char *q = s + 7;
        if (q >= end) break;
        q += *q < 0x80 ? 1 : *q >= 0xF0 ? 4 : *q >= 0xE0 ? 3 : 2;
        if (q + 5 <= end && memcmp(q, "model", 5) == 0) return 1;
    }
    return 0;
}

typedef struct {
    int keep_python;
    const char *ext_key; /* "External id", or "external id" for PyTorch 1.8-1.10 files */
    int64_t base_ns;     /* the clock base added to the rows' times (not to the counts, which are relative) */
} Opts;

/* The row _BATCH_SELECT makes of one event. */
static int make_row(Row *row, const Val *top, const Val *args, Buf *scratch, const Opts *o, Err *err) {
    int r;
    Text raw_cat;
    if ((r = text_of(&top[K_PH], scratch, &row->t[C_PH], err)) || (r = text_of(&top[K_CAT], scratch, &raw_cat, err)))
        return r;
    /* cat, with PyTorch 1.8-1.13 names mapped onto the modern ones; old_cat: one of the capitalised 2021
     * names (NULL when cat is NULL) */
    row->t[C_CAT] = raw_cat;
    const char *to = NULL;
    int old_cat = 0;
    if (!raw_cat.null) {
        if (TEXT_IS(&raw_cat, "Operator")) to = "cpu_op", old_cat = 1;
        else if (TEXT_IS(&raw_cat, "Runtime")) to = "cuda_runtime", old_cat = 1;
        else if (TEXT_IS(&raw_cat, "Kernel")) to = "kernel", old_cat = 1;
        else if (TEXT_IS(&raw_cat, "Memcpy")) to = "gpu_memcpy", old_cat = 1;
        else if (TEXT_IS(&raw_cat, "Memset")) to = "gpu_memset", old_cat = 1;
        else if (TEXT_IS(&raw_cat, "async") || TEXT_IS(&raw_cat, "launch") || TEXT_IS(&raw_cat, "async_cpu_to_gpu") ||
                 TEXT_IS(&raw_cat, "async_gpu"))
            to = "ac2g";
    }
    if (to) row->t[C_CAT].p = to, row->t[C_CAT].n = strlen(to);
    row->b[C_OLD_CAT] = raw_cat.null ? -1 : old_cat;
    /* keep: cat IS DISTINCT FROM 'python_function' OR name LIKE '%execute_model%' OR starts_with(name, 'nn.Module: ');
     * -1 is NULL */
    Text name;
    if ((r = text_of(&top[K_NAME], scratch, &name, err))) return r;
    int keep = 1;
    if (!o->keep_python && TEXT_IS(&raw_cat, "python_function"))
        keep = name.null ? -1 : like_execute_model(&name) || (name.n >= 11 && memcmp(name.p, "nn.Module: ", 11) == 0);
    row->t[C_NAME] = name;
    if (keep != 1) row->t[C_NAME].null = 1;
    row->b[C_DROPPED] = keep == -1 ? -1 : !keep;
    if ((r = text_of(&top[K_PID], scratch, &row->t[C_PID], err)) || (r = text_of(&top[K_TID], scratch, &row->t[C_TID], err)) ||
        (r = micros_to_ns(&top[K_TS], &row->i[C_TS], err)) || (r = micros_to_ns(&top[K_DUR], &row->i[C_DUR], err)))
        return r;
    /* integer args: TRY_CAST of the text; the first non-NULL text of a pair */
    static const int ints[][3] = {
        {C_EXT, A_EXT, -1}, {C_CORR, A_CORR, -1}, {C_EVIDX, A_EVIDX, A_PEI}, {C_DEVICE, A_DEVICE, -1},
        {C_STREAM, A_STREAM, -1}, {C_BYTES, A_BYTES, -1}, {C_CBID, A_CBID, A_CID},
    };
    int bad_link = 0;
    for (size_t i = 0; i < sizeof ints / sizeof *ints; i++) {
        const Val *v = &args[ints[i][1]];
        if (val_is_null(v) && ints[i][2] >= 0) v = &args[ints[i][2]];
        Text t;
        if ((r = text_of(v, scratch, &t, err)) || (r = try_bigint(&t, &row->i[ints[i][0]], v->p, err))) return r;
        if ((ints[i][0] == C_EXT || ints[i][0] == C_CORR) && !t.null && row->i[ints[i][0]].null) bad_link = 1;
    }
    row->b[C_BAD_LINK] = bad_link;
    if ((r = text_of(&args[A_GRID], scratch, &row->t[C_GRID], err)) ||
        (r = text_of(&args[A_BLOCK], scratch, &row->t[C_BLOCK], err)))
        return r;
    /* CASE WHEN ph = 'X' THEN Input Dims; CASE WHEN ph = 'M' THEN coalesce(name, labels) */
    static const Val none = {0};
    int ph = ph_code(&row->t[C_PH]), ph_x = ph == 'X', ph_m = ph == 'M';
    if ((r = text_of(ph_x ? &args[A_DIMS] : &none, scratch, &row->t[C_DIMS], err))) return r;
    const Val *meta = !ph_m ? &none : !val_is_null(&args[A_NAME]) ? &args[A_NAME] : &args[A_LABELS];
    if ((r = text_of(meta, scratch, &row->t[C_META], err)) || (r = text_of(&top[K_ID], scratch, &row->t[C_FLOW_ID], err)) ||
        (r = text_of(&top[K_BP], scratch, &row->t[C_FLOW_BP], err)))
        return r;
    /* flows: TRY_CAST(flow_id AS BIGINT) */
    row->i[C_FLOW_INT].null = 1;
    if ((ph == 's' || ph == 'f' || ph == 't') &&
        (r = try_bigint(&row->t[C_FLOW_ID], &row->i[C_FLOW_INT], top[K_ID].p, err)))
        return r;
    return OK;
}

static int sink_of(const Row *row) {
    if (row->b[C_DROPPED] != 0) return S_NONE; /* WHERE NOT dropped */
    const Text *cat = &row->t[C_CAT];
    switch (ph_code(&row->t[C_PH])) {
    case 'X':
        if (cat->null) return S_NONE;
        if (TEXT_IS(cat, "kernel") || TEXT_IS(cat, "gpu_memcpy") || TEXT_IS(cat, "gpu_memset") || TEXT_IS(cat, "cuda_sync"))
            return S_KERNELS;
        if (TEXT_IS(cat, "user_annotation") || TEXT_IS(cat, "gpu_user_annotation")) return S_ANNOTATIONS;
        return S_OPS;
    case 's':
    case 'f':
    case 't':
        return S_FLOWS;
    case 'M':
        return S_META;
    default:
        return S_NONE;
    }
}

static void count_row(Counts *c, const Row *row) {
    int kept = row->b[C_DROPPED] == 0;
    int ph = ph_code(&row->t[C_PH]);
    int x = ph == 'X', m = ph == 'M', inst = ph == 'i' || ph == 'I', flow_sf = ph == 's' || ph == 'f';
    const Int *ts = &row->i[C_TS], *dur = &row->i[C_DUR];
    c->v[N_READ]++;
    c->v[N_DROPPED_PY] += row->b[C_DROPPED] == 1;
    c->v[N_X] += kept && x;
    c->v[N_ZERO_TS] += kept && x && !ts->null && ts->v == 0;
    c->v[N_PYTHON] += kept && TEXT_IS(&row->t[C_CAT], "python_function");
    c->v[N_NS_DECIMALS] += !ts->null && ts->v % 1000 != 0;
    c->v[N_INSTANTS] += inst;
    c->v[N_META] += m;
    c->v[N_OTHER_PH] += ph != -1 && !x && !m && !inst && !flow_sf && ph != 't';
    c->v[N_CAPITALISED] += row->b[C_OLD_CAT] == 1;
    c->v[N_OLD_FLOWS] += flow_sf && (TEXT_IS(&row->t[C_NAME], "async_cpu_to_gpu") || TEXT_IS(&row->t[C_NAME], "async_gpu"));
    if (x && !ts->null && (!c->has[N_MAX_X_TS] || ts->v > c->v[N_MAX_X_TS])) c->v[N_MAX_X_TS] = ts->v, c->has[N_MAX_X_TS] = 1;
    c->v[N_NEGATIVE_DUR] += kept && !dur->null && dur->v < 0;
    c->v[N_BAD_LINK] += row->b[C_BAD_LINK];
    if (kept && !ts->null && ts->v != 0) {
        if (!c->has[N_MIN_TS] || ts->v < c->v[N_MIN_TS]) c->v[N_MIN_TS] = ts->v, c->has[N_MIN_TS] = 1;
        if (!c->has[N_MAX_TS] || ts->v > c->v[N_MAX_TS]) c->v[N_MAX_TS] = ts->v, c->has[N_MAX_TS] = 1;
    }
    c->v[N_EVENTS] += kept && ph != -1 && !m;
    c->v[N_NULL_TS] += kept && x && ts->null;
}

/* A 64-bit hash of a row's staged values for duplicate detection: equal rows have equal hashes, which is
 * all that correctness needs (equal hashes of unequal rows only send the file to the DuckDB reader, which
 * counts exactly). A text contributes its length and its first and last eight bytes. */
static inline uint64_t mix(uint64_t h, uint64_t x) {
    h = (h ^ x) * 0x9E3779B97F4A7C15ULL;
    return h ^ (h >> 32);
}

static inline uint64_t load_upto8(const char *p, size_t n) {
    uint64_t w = 0;
    if (n >= 8) {
        memcpy(&w, p, 8);
        return w;
    }
    for (size_t i = 0; i < n; i++) w = (w << 8) | (unsigned char)p[i];
    return w;
}

static uint64_t row_hash(const Row *row) {
    uint64_t h = 0x243F6A8885A308D3ULL;
    for (int c = 0; c < N_TEXT_STAGED; c++) {
        if (COL_TYPES[c] == 'i') {
            h = mix(h, row->i[c].null ? 0x5bd1e995 : (uint64_t)row->i[c].v ^ 0x7f4a7c15);
            continue;
        }
        const Text *t = &row->t[c];
        if (t->null) {
            h = mix(h, 0x5bd1e995);
            continue;
        }
        h = mix(h, t->n + 2);
        h = mix(h, load_upto8(t->p, t->n));
        if (t->n > 8) h = mix(h, load_upto8(t->p + t->n - 8, 8));
    }
    return h;
}

/* The columns each sink's table is made from (kineto._finalize reads no others). */
static const unsigned char SINK_COLS[N_SINKS][N_COLS] = {
    [S_KERNELS] = {[C_CAT] = 1, [C_NAME] = 1, [C_PID] = 1, [C_TID] = 1, [C_TS] = 1, [C_DUR] = 1, [C_EXT] = 1, [C_CORR] = 1,
                   [C_EVIDX] = 1, [C_DEVICE] = 1, [C_STREAM] = 1, [C_GRID] = 1, [C_BLOCK] = 1, [C_BYTES] = 1},
    [S_OPS] = {[C_CAT] = 1, [C_NAME] = 1, [C_PID] = 1, [C_TID] = 1, [C_TS] = 1, [C_DUR] = 1, [C_EXT] = 1, [C_CORR] = 1,
               [C_EVIDX] = 1, [C_CBID] = 1, [C_DIMS] = 1},
    [S_ANNOTATIONS] = {[C_CAT] = 1, [C_NAME] = 1, [C_PID] = 1, [C_TID] = 1, [C_TS] = 1, [C_DUR] = 1, [C_EXT] = 1,
                       [C_EVIDX] = 1, [C_DIMS] = 1},
    [S_FLOWS] = {[C_PH] = 1, [C_CAT] = 1, [C_NAME] = 1, [C_PID] = 1, [C_TID] = 1, [C_TS] = 1, [C_FLOW_BP] = 1, [C_FLOW_INT] = 1},
    [S_META] = {[C_NAME] = 1, [C_PID] = 1, [C_TID] = 1, [C_META] = 1},
    [S_LAUNCHES] = {[C_NAME] = 1, [C_PID] = 1, [C_TID] = 1, [C_TS] = 1, [C_CORR] = 1},
};

/* An ops row that launches GPU work (kineto_tables._LAUNCH_FILTER: a category in LAUNCH_CATS, as mapped, and a
 * correlation id). */
static int is_launch(const Row *row) {
    const Text *cat = &row->t[C_CAT];
    return !row->i[C_CORR].null && (TEXT_IS(cat, "cuda_runtime") || TEXT_IS(cat, "cuda_driver"));
}

static inline __attribute__((always_inline)) int append_row(Col *cols, const unsigned char *mask, const Row *row) {
    for (int c = 0; c < N_COLS; c++) {
        if (!mask[c]) continue;
        Col *col = &cols[c];
        int fail;
        if (col->type == 's')
            fail = row->t[c].null ? col_null(col) : col_str(col, row->t[c].p, row->t[c].n);
        else if (col->type == 'i')
            fail = row->i[c].null ? col_null(col) : col_int(col, row->i[c].v);
        else
            fail = row->b[c] < 0 ? col_null(col) : col_bool(col, row->b[c]);
        if (fail) return -1;
    }
    return 0;
}

/* The top-level key we read, or -1. */
static int top_key(const char *p, size_t n) {
    switch (n) {
    case 2:
        return KEY_IS(p, n, "ph") ? K_PH : KEY_IS(p, n, "ts") ? K_TS : KEY_IS(p, n, "id") ? K_ID : KEY_IS(p, n, "bp") ? K_BP : -1;
    case 3:
        return KEY_IS(p, n, "cat")   ? K_CAT
               : KEY_IS(p, n, "pid") ? K_PID
               : KEY_IS(p, n, "tid") ? K_TID
               : KEY_IS(p, n, "dur") ? K_DUR
                                     : -1;
    case 4:
        return KEY_IS(p, n, "name") ? K_NAME : KEY_IS(p, n, "args") ? K_ARGS : -1;
    default:
        return -1;
    }
}

/* The args key we read, or -1. */
static int arg_key(const char *p, size_t n, const Opts *o) {
    switch (n) {
    case 3:
        return KEY_IS(p, n, "cid") ? A_CID : -1;
    case 4:
        return KEY_IS(p, n, "grid") ? A_GRID : KEY_IS(p, n, "cbid") ? A_CBID : KEY_IS(p, n, "name") ? A_NAME : -1;
    case 5:
        return KEY_IS(p, n, "block") ? A_BLOCK : KEY_IS(p, n, "bytes") ? A_BYTES : -1;
    case 6:
        return KEY_IS(p, n, "Ev Idx") ? A_EVIDX : KEY_IS(p, n, "device") ? A_DEVICE : KEY_IS(p, n, "stream") ? A_STREAM
             : KEY_IS(p, n, "labels") ? A_LABELS : -1;
    case 10:
        return KEY_IS(p, n, "Input Dims") ? A_DIMS : -1;
    case 11:
        return memcmp(p, o->ext_key, 11) == 0 ? A_EXT : KEY_IS(p, n, "correlation") ? A_CORR : -1;
    case 20:
        return KEY_IS(p, n, "Profiler Event Index") ? A_PEI : -1;
    default:
        return -1;
    }
}

/* *pp at '{'. Fills top[] and args[] with the keys read; BAD on a duplicated key read or a non-object
 * args. */
static int scan_event(const char **pp, const char *end, Val *top, Val *args, const Opts *o, Err *err) {
    const char *p = *pp;
    int r, more = 1;
    for (int i = 0; i < N_KEYS; i++) top[i].kind = V_ABSENT;
    for (int i = 0; i < N_ARGS; i++) args[i].kind = V_ABSENT;
    p = skip_ws(p + 1, end);
    if (p >= end) return NEED_MORE;
    if (*p == '}') more = 0, p++;
    while (more) {
        Val key, skipped;
        if ((r = scan_key(&p, end, &key, err))) return r;
        if (key.escaped) {
            err->bad_at = key.p;
            err->reason = "an escaped key";
            return BAD;
        }
        int k = top_key(key.p, key.len);
        if (k >= 0 && top[k].kind) goto dup;
        if (k == K_ARGS && *p == '{') {
            top[K_ARGS].kind = V_NESTED;
            top[K_ARGS].p = p;
            p = skip_ws(p + 1, end);
            if (p >= end) return NEED_MORE;
            int arg_more = 1;
            if (*p == '}') arg_more = 0, p++;
            while (arg_more) {
                Val akey;
                if ((r = scan_key(&p, end, &akey, err))) return r;
                int a = akey.escaped ? -1 : arg_key(akey.p, akey.len, o);
                if (a >= 0 && args[a].kind) goto dup;
                if ((r = scan_value(&p, end, a >= 0 ? &args[a] : &skipped, err)) ||
                    (r = scan_separator(&p, end, '}', &arg_more, err)))
                    return r;
            }
        } else {
            if ((r = scan_value(&p, end, k >= 0 ? &top[k] : &skipped, err))) return r;
            if (k == K_ARGS && top[k].kind != V_NULL) {
                err->bad_at = top[k].p;
                err->reason = "args is not an object";
                return BAD;
            }
        }
        if ((r = scan_separator(&p, end, '}', &more, err))) return r;
    }
    *pp = p;
    return OK;
dup:
    err->bad_at = p;
    err->reason = "a duplicated key";
    return BAD;
}

/* ---------------------------------------------------------------- the Python entry point */

static PyObject *Unsupported;

/* A buffer malloc'd here, handed to Python as it is (the buffer protocol; Arrow wraps it without a copy) and
 * freed with the object: a block's columns are not copied into bytes objects. */
typedef struct {
    PyObject_HEAD
    char *p;
    Py_ssize_t len;
} Owned;

static int owned_getbuffer(PyObject *o, Py_buffer *view, int flags) {
    Owned *b = (Owned *)o;
    static char empty[1];
    return PyBuffer_FillInfo(view, o, b->p ? b->p : empty, b->len, 1, flags);
}

static void owned_dealloc(PyObject *o) {
    free(((Owned *)o)->p);
    Py_TYPE(o)->tp_free(o);
}

static PyBufferProcs owned_buffer = {owned_getbuffer, NULL};

static PyTypeObject OwnedType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "_kineto_fast.Owned",
    .tp_basicsize = sizeof(Owned),
    .tp_dealloc = owned_dealloc,
    .tp_as_buffer = &owned_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A read-only buffer of a read block's column (freed with the object).",
};

/* The buffer's bytes as an Owned object; the buffer is emptied (its memory now belongs to the object). */
static PyObject *owned_from(Buf *b) {
    Owned *o = PyObject_New(Owned, &OwnedType);
    if (!o) return NULL;
    o->p = b->p, o->len = (Py_ssize_t)b->len;
    b->p = NULL, b->len = b->cap = 0;
    return (PyObject *)o;
}

static PyObject *col_to_py(Col *c) {
    PyObject *valid = c->nulls ? owned_from(&c->valid) : (Py_INCREF(Py_None), Py_None);
    PyObject *values = owned_from(&c->values);
    PyObject *data = c->type == 's' ? owned_from(&c->data) : (Py_INCREF(Py_None), Py_None);
    if (!valid || !values || !data) {
        Py_XDECREF(valid);
        Py_XDECREF(values);
        Py_XDECREF(data);
        return NULL;
    }
    return Py_BuildValue("(NNNL)", valid, values, data, (long long)c->nulls);
}

PyDoc_STRVAR(read_events_doc,
             "read_events(buf, first, final, keep_python, ext_key, base_ns, max_event) -> (consumed, sinks, counts, hashes)\n\n"
             "Read the whole events in buf, a piece of a trace's event array: a reader's first block starts at an\n"
             "event, later ones at the separator after the last event read. Returns the bytes consumed (up to the\n"
             "end of the last whole event); per sink (kernels, ops, annotations, flows, meta: the kept events\n"
             "each table is made from) its row count and, per staged column, (validity bit map or None, values,\n"
             "string data or None, null count), each a read-only buffer handed over without a copy; the counts\n"
             "named by COUNT_NAMES (None for a min or max of no rows); and the uint64 hashes of the rows that\n"
             "duplicate detection compares (a buffer). Raises\n"
             "Unsupported(offset, reason) where the DuckDB reader must decide.");

static PyObject *read_events(PyObject *self, PyObject *a) {
    (void)self;
    Py_buffer view;
    int first, final, keep_python;
    const char *ext_key;
    long long base_ns;
    Py_ssize_t max_event;
    if (!PyArg_ParseTuple(a, "y*pppsLn", &view, &first, &final, &keep_python, &ext_key, &base_ns, &max_event)) return NULL;
    Opts o = {keep_python, ext_key, (int64_t)base_ns};
    Col cols[N_SINKS][N_COLS];
    memset(cols, 0, sizeof cols);
    Counts counts;
    memset(&counts, 0, sizeof counts);
    int64_t sink_rows[N_SINKS] = {0};
    Buf scratch = {0}, hashes = {0};
    const char *base = view.buf, *end = base + view.len, *p = base, *done = base;
    Err err = {NULL, NULL};
    int status = OK, oom = 0;
    Val top[N_KEYS], args[N_ARGS];
    Row row;
    Py_BEGIN_ALLOW_THREADS;
    for (int s = 0; s < N_SINKS; s++)
        for (int i = 0; i < N_COLS; i++) {
            int32_t zero = 0;
            cols[s][i].type = COL_TYPES[i];
            if (cols[s][i].type == 's' && buf_put(&cols[s][i].values, &zero, 4)) oom = 1;
        }
    int expect_sep = !first;
    while (!oom) {
        p = skip_ws(done, end);
        if (p >= end) break; /* after the last whole event, or an empty piece */
        if (expect_sep) {
            if (*p != ',') {
                status = BAD;
                err.bad_at = p;
                err.reason = "expected ',' between events";
                break;
            }
            p = skip_ws(p + 1, end);
            if (p >= end) {
                status = final ? BAD : OK;
                err.bad_at = p;
                err.reason = "the array ends after ','";
                break;
            }
        }
        if (*p != '{') {
            status = BAD;
            err.bad_at = p;
            err.reason = "an event that is not an object";
            break;
        }
        const char *q = p;
        int r = scan_event(&q, end, top, args, &o, &err);
        if (r == NEED_MORE) {
            status = final ? BAD : OK;
            if (final) err.bad_at = p, err.reason = "an event cut short";
            break;
        }
        if (r == BAD) {
            status = BAD;
            break;
        }
        if (q - p > max_event) { /* the DuckDB reader's maximum_object_size: its error to give */
            status = BAD;
            err.bad_at = p;
            err.reason = "an event larger than the largest one read";
            break;
        }
        scratch.len = 0;
        if (buf_reserve(&scratch, (size_t)(q - p))) {
            oom = 1;
            break;
        }
        if (make_row(&row, top, args, &scratch, &o, &err)) {
            status = BAD;
            break;
        }
        count_row(&counts, &row);
        if (row.b[C_DROPPED] == 0 && !row.t[C_PH].null && !TEXT_IS(&row.t[C_PH], "M")) {
            uint64_t h = row_hash(&row);
            if (buf_put(&hashes, &h, 8)) {
                oom = 1;
                break;
            }
        }
        int s = sink_of(&row);
        if (s != S_NONE && !row.i[C_TS].null && __builtin_add_overflow(row.i[C_TS].v, o.base_ns, &row.i[C_TS].v)) {
            status = BAD;
            err.bad_at = p;
            err.reason = "a time beyond 64-bit nanoseconds once the clock base is added";
            break;
        }
        if (s != S_NONE && append_row(cols[s], SINK_COLS[s], &row)) {
            oom = 1;
            break;
        }
        if (s != S_NONE) sink_rows[s]++;
        if (s == S_OPS && is_launch(&row)) {
            if (append_row(cols[S_LAUNCHES], SINK_COLS[S_LAUNCHES], &row)) {
                oom = 1;
                break;
            }
            sink_rows[S_LAUNCHES]++;
        }
        done = q;
        expect_sep = 1;
    }
    Py_END_ALLOW_THREADS;
    PyObject *result = NULL;
    if (oom) {
        PyErr_NoMemory();
    } else if (status == BAD) {
        Py_ssize_t at = (err.bad_at ? err.bad_at : p) - base;
        PyObject *exc_args = Py_BuildValue("(ns)", at, err.reason ? err.reason : "invalid JSON");
        if (exc_args) {
            PyErr_SetObject(Unsupported, exc_args);
            Py_DECREF(exc_args);
        }
    } else {
        PyObject *sinks = PyTuple_New(N_SINKS), *cnt = PyTuple_New(N_COUNTS);
        for (int s = 0; sinks && cnt && s < N_SINKS; s++) {
            PyObject *cl = PyTuple_New(N_COLS);
            for (int i = 0; cl && i < N_COLS; i++) {
                PyObject *c = SINK_COLS[s][i] ? col_to_py(&cols[s][i]) : (Py_INCREF(Py_None), Py_None);
                if (!c) {
                    Py_CLEAR(cl);
                    break;
                }
                PyTuple_SET_ITEM(cl, i, c);
            }
            PyObject *sink = cl ? Py_BuildValue("(LN)", (long long)sink_rows[s], cl) : NULL;
            if (!sink) {
                Py_CLEAR(sinks);
                break;
            }
            PyTuple_SET_ITEM(sinks, s, sink);
        }
        for (int i = 0; sinks && cnt && i < N_COUNTS; i++) {
            int is_extreme = i == N_MAX_X_TS || i == N_MIN_TS || i == N_MAX_TS;
            PyObject *v = is_extreme && !counts.has[i] ? (Py_INCREF(Py_None), Py_None) : PyLong_FromLongLong(counts.v[i]);
            if (!v) {
                Py_CLEAR(cnt);
                break;
            }
            PyTuple_SET_ITEM(cnt, i, v);
        }
        PyObject *hb = owned_from(&hashes);
        if (sinks && cnt && hb) {
            result = Py_BuildValue("(nNNN)", (Py_ssize_t)(done - base), sinks, cnt, hb);
        } else {
            Py_XDECREF(sinks);
            Py_XDECREF(cnt);
            Py_XDECREF(hb);
        }
    }
    for (int s = 0; s < N_SINKS; s++)
        for (int i = 0; i < N_COLS; i++) col_free(&cols[s][i]);
    free(scratch.p);
    free(hashes.p);
    PyBuffer_Release(&view);
    return result;
}

/* ---------------------------------------------------------------- distinct rows across pieces */

/* Move heap[at] down until its run's head is no greater than its children's (a min-heap of n runs by head). */
static inline void sift_down(const uint64_t **pos, Py_ssize_t *heap, Py_ssize_t n, Py_ssize_t at) {
    for (;;) {
        Py_ssize_t c = 2 * at + 1;
        if (c >= n) return;
        if (c + 1 < n && *pos[heap[c + 1]] < *pos[heap[c]]) c++;
        if (*pos[heap[at]] <= *pos[heap[c]]) return;
        Py_ssize_t t = heap[at];
        heap[at] = heap[c], heap[c] = t, at = c;
    }
}

/* The number of distinct values in runs of uint64 row hashes, each sorted ascending (one run per piece read):
 * a k-way merge over a binary heap of the runs' heads, without copying them into one array. */
static int64_t merge_distinct(const uint64_t **pos, const uint64_t **end, Py_ssize_t *heap, Py_ssize_t k) {
    Py_ssize_t n = 0;
    for (Py_ssize_t i = 0; i < k; i++)
        if (pos[i] < end[i]) heap[n++] = i;
    for (Py_ssize_t start = n / 2 - 1; start >= 0; start--) sift_down(pos, heap, n, start); /* heap[0]: the least */
    int64_t distinct = 0;
    uint64_t last = 0;
    while (n > 0) {
        Py_ssize_t top = heap[0];
        uint64_t v = *pos[top];
        if (distinct == 0 || v != last) distinct++, last = v;
        /* take every equal value of this run at once: the heap is restored once per run of duplicates */
        const uint64_t *p = pos[top] + 1;
        while (p < end[top] && *p == v) p++;
        pos[top] = p;
        if (p == end[top]) heap[0] = heap[--n];
        sift_down(pos, heap, n, 0);
    }
    return distinct;
}

PyDoc_STRVAR(count_distinct_doc,
             "count_distinct(runs) -> int\n\n"
             "The number of distinct values in ``runs``: buffers of uint64 values, each sorted ascending (the pieces'\n"
             "row hashes). Merged where they lie, without the GIL: nothing is copied or changed.");

static PyObject *count_distinct(PyObject *self, PyObject *arg) {
    (void)self;
    PyObject *seq = PySequence_Fast(arg, "count_distinct: expected a sequence of buffers");
    if (!seq) return NULL;
    Py_ssize_t k = PySequence_Fast_GET_SIZE(seq), got = 0;
    Py_buffer *views = PyMem_Calloc((size_t)(k ? k : 1), sizeof(Py_buffer));
    const uint64_t **pos = PyMem_Calloc((size_t)(k ? k : 1), sizeof(*pos));
    const uint64_t **end = PyMem_Calloc((size_t)(k ? k : 1), sizeof(*end));
    Py_ssize_t *heap = PyMem_Calloc((size_t)(k ? k : 1), sizeof(*heap));
    PyObject *result = NULL;
    if (!views || !pos || !end || !heap) {
        PyErr_NoMemory();
        goto done;
    }
    for (; got < k; got++) {
        if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(seq, got), &views[got], PyBUF_C_CONTIGUOUS)) goto done;
        if (views[got].len % 8 != 0) {
            got++;
            PyErr_SetString(PyExc_ValueError, "count_distinct: a buffer whose length is not a multiple of 8");
            goto done;
        }
        pos[got] = (const uint64_t *)views[got].buf;
        end[got] = pos[got] + views[got].len / 8;
    }
    int64_t distinct;
    Py_BEGIN_ALLOW_THREADS
    distinct = merge_distinct(pos, end, heap, k);
    Py_END_ALLOW_THREADS
    result = PyLong_FromLongLong(distinct);
done:
    for (Py_ssize_t i = 0; i < got; i++) PyBuffer_Release(&views[i]);
    PyMem_Free(views), PyMem_Free(pos), PyMem_Free(end), PyMem_Free(heap);
    Py_DECREF(seq);
    return result;
}

static PyMethodDef methods[] = {
    {"read_events", read_events, METH_VARARGS, read_events_doc},
    {"count_distinct", count_distinct, METH_O, count_distinct_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_kineto_fast", "Compiled Kineto event reader (see the C source).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__kineto_fast(void) {
    init_tables();
#ifdef HAVE_AVX2_PATH
    __builtin_cpu_init();
    use_avx2 = __builtin_cpu_supports("avx2") && !getenv("LLTRACE_NO_AVX2");
#endif
    if (PyType_Ready(&OwnedType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Unsupported = PyErr_NewException("_kineto_fast.Unsupported", PyExc_ValueError, NULL);
    if (!Unsupported || PyModule_AddObject(m, "Unsupported", Unsupported)) {
        Py_XDECREF(Unsupported);
        Py_DECREF(m);
        return NULL;
    }
    PyObject *sink_cols = PyTuple_New(N_SINKS);
    for (int s = 0; sink_cols && s < N_SINKS; s++) {
        PyObject *cs = PyTuple_New(0);
        for (int c = 0; cs && c < N_COLS; c++)
            if (SINK_COLS[s][c]) {
                PyObject *i = PyLong_FromLong(c);
                if (!i || _PyTuple_Resize(&cs, PyTuple_GET_SIZE(cs) + 1)) {
                    Py_XDECREF(i);
                    Py_CLEAR(cs);
                    break;
                }
                PyTuple_SET_ITEM(cs, PyTuple_GET_SIZE(cs) - 1, i);
            }
        if (!cs) {
            Py_CLEAR(sink_cols);
            break;
        }
        PyTuple_SET_ITEM(sink_cols, s, cs);
    }
#if defined(HAVE_AVX2_PATH)
    const char *simd = use_avx2 ? "avx2" : "sse2";
#elif defined(__SSE2__)
    const char *simd = "sse2";
#else
    const char *simd = "none";
#endif
    if (!sink_cols || PyModule_AddObject(m, "SINK_COLUMNS", sink_cols) ||
        PyModule_AddStringConstant(m, "COUNT_NAMES", COUNT_NAMES) || PyModule_AddStringConstant(m, "SIMD", simd)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
