/* A strict JSON parser whose containers stay out of the cyclic collector while the build runs.
 *
 * Why: parsing a 3 MB program allocates ~150k dicts and lists; in a process with torch imported they are
 * enough to trigger a full collection (walking every object of the process) in the middle of the parse, which
 * cost a fresh process's first decode 2.4x. Every container made here is untracked as it is made (see gc.c) and
 * tracked again when the build ends.
 *
 * It takes strict RFC 8259 JSON only, and less: no duplicate keys, no NaN/Infinity literals, no lone
 * surrogates, no number that does not fit a finite double or an int of at most 40 digits, nesting within 190
 * (pydantic-core's parser stops at 200). Anything it does not take raises Fallback: pydantic-core's parser and
 * pydantic's validation decide then, so this parser may refuse valid JSON but never takes what they refuse.
 */
#include "cbuild.h"
#include <math.h>
#include <string.h>

#define MAX_JSON_NEST 190 /* below pydantic-core's 200: never takes what it refuses */
#define MAX_INT_DIGITS 40
#define MAX_FLOAT_CHARS 400

typedef struct {
    const unsigned char *s, *end;
    Untracked *u;
} Parser;

static PyObject *parse_value(Parser *ps, int depth);

static void skip_ws(Parser *ps) {
    while (ps->s < ps->end && (*ps->s == ' ' || *ps->s == '\n' || *ps->s == '\r' || *ps->s == '\t'))
        ps->s++;
}

static int hex4(const unsigned char *h, unsigned *out) {
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        int c = h[i], d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            d = c - 'A' + 10;
        else
            return -1;
        v = v << 4 | (unsigned)d;
    }
    *out = v;
    return 0;
}

static unsigned char *put_utf8(unsigned char *o, unsigned cp) {
    if (cp < 0x80) {
        *o++ = (unsigned char)cp;
    } else if (cp < 0x800) {
        *o++ = (unsigned char)(0xC0 | cp >> 6);
        *o++ = (unsigned char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        *o++ = (unsigned char)(0xE0 | cp >> 12);
        *o++ = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
        *o++ = (unsigned char)(0x80 | (cp & 0x3F));
    } else {
        *o++ = (unsigned char)(0xF0 | cp >> 18);
        *o++ = (unsigned char)(0x80 | (cp >> 12 & 0x3F));
        *o++ = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
        *o++ = (unsigned char)(0x80 | (cp & 0x3F));
    }
    return o;
}

/* a string; ps->s at the opening quote */
static PyObject *parse_string(Parser *ps) {
    const unsigned char *start = ++ps->s, *p = start;
    int escaped = 0;
    while (p < ps->end && *p != '"') {
        if (*p < 0x20)
            return cb_fallback();
        if (*p == '\\') {
            escaped = 1;
            if (++p >= ps->end)
                return cb_fallback();
        }
        p++;
    }
    if (p >= ps->end)
        return cb_fallback();
    ps->s = p + 1;
    if (!escaped) {
        PyObject *r = PyUnicode_DecodeUTF8((const char *)start, p - start, NULL);
        return r ? r : cb_fallback();
    }
    /* escapes: rewrite as UTF-8 (never longer than the escaped text) */
    unsigned char *buf = PyMem_Malloc(p - start + 1), *o = buf;
    if (buf == NULL)
        return PyErr_NoMemory();
    for (const unsigned char *q = start; q < p;) {
        if (*q != '\\') {
            *o++ = *q++;
            continue;
        }
        q++;
        unsigned cp;
        switch (*q++) {
        case '"': *o++ = '"'; continue;
        case '\\': *o++ = '\\'; continue;
        case '/': *o++ = '/'; continue;
        case 'b': *o++ = '\b'; continue;
        case 'f': *o++ = '\f'; continue;
        case 'n': *o++ = '\n'; continue;
        case 'r': *o++ = '\r'; continue;
        case 't': *o++ = '\t'; continue;
        case 'u':
            if (p - q < 4 || hex4(q, &cp) < 0)
                goto bad;
            q += 4;
            if (cp >= 0xDC00 && cp <= 0xDFFF)
                goto bad; /* a lone low surrogate */
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                unsigned lo;
                if (p - q < 6 || q[0] != '\\' || q[1] != 'u' || hex4(q + 2, &lo) < 0 || lo < 0xDC00 || lo > 0xDFFF)
                    goto bad; /* a high surrogate without its low one */
                q += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            o = put_utf8(o, cp);
            continue;
        default:
            goto bad;
        }
    }
    PyObject *r = PyUnicode_DecodeUTF8((const char *)buf, o - buf, NULL);
    PyMem_Free(buf);
    return r ? r : cb_fallback();
bad:
    PyMem_Free(buf);
    return cb_fallback();
}

static PyObject *parse_number(Parser *ps) {
    const unsigned char *start = ps->s, *p = ps->s;
    int is_float = 0;
    if (p < ps->end && *p == '-')
        p++;
    if (p >= ps->end || *p < '0' || *p > '9')
        return cb_fallback();
    if (*p == '0') {
        p++;
        if (p < ps->end && *p >= '0' && *p <= '9')
            return cb_fallback(); /* a leading zero */
    } else {
        while (p < ps->end && *p >= '0' && *p <= '9')
            p++;
    }
    if (p < ps->end && *p == '.') {
        is_float = 1;
        p++;
        if (p >= ps->end || *p < '0' || *p > '9')
            return cb_fallback();
        while (p < ps->end && *p >= '0' && *p <= '9')
            p++;
    }
    if (p < ps->end && (*p == 'e' || *p == 'E')) {
        is_float = 1;
        p++;
        if (p < ps->end && (*p == '+' || *p == '-'))
            p++;
        if (p >= ps->end || *p < '0' || *p > '9')
            return cb_fallback();
        while (p < ps->end && *p >= '0' && *p <= '9')
            p++;
    }
    Py_ssize_t n = p - start;
    ps->s = p;
    if (!is_float) {
        const unsigned char *d = start + (*start == '-');
        if (p - d <= 18) { /* fits a long long */
            long long v = 0;
            for (; d < p; d++)
                v = v * 10 + (*d - '0');
            return PyLong_FromLongLong(*start == '-' ? -v : v);
        }
        if (p - d > MAX_INT_DIGITS)
            return cb_fallback();
    } else if (n > MAX_FLOAT_CHARS) {
        return cb_fallback();
    }
    char text[MAX_FLOAT_CHARS + 1];
    memcpy(text, start, n);
    text[n] = '\0';
    if (!is_float) {
        PyObject *r = PyLong_FromString(text, NULL, 10);
        return r ? r : cb_fallback();
    }
    char *stop;
    double v = PyOS_string_to_double(text, &stop, NULL);
    if ((v == -1.0 && PyErr_Occurred()) || stop != text + n || !isfinite(v))
        return cb_fallback();
    return PyFloat_FromDouble(v);
}

static int literal(Parser *ps, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(ps->end - ps->s) < n || memcmp(ps->s, word, n) != 0)
        return 0;
    ps->s += n;
    return 1;
}

/* after an item of an object or array: 1 at a comma, 0 at the closing `close`, -1 at anything else */
static int after_item(Parser *ps, unsigned char close) {
    skip_ws(ps);
    if (ps->s < ps->end && *ps->s == ',') {
        ps->s++;
        return 1;
    }
    if (ps->s < ps->end && *ps->s == close) {
        ps->s++;
        return 0;
    }
    return -1;
}

/* the object `d`, complete: untracked now (storing a container in a dict tracks the dict again) */
static PyObject *object_done(Parser *ps, PyObject *d) {
    if (untracked_add(ps->u, d) < 0) {
        Py_DECREF(d);
        return NULL;
    }
    return d;
}

static PyObject *parse_object(Parser *ps, int depth) {
    PyObject *d = PyDict_New();
    if (d == NULL)
        return NULL;
    ps->s++;
    skip_ws(ps);
    if (ps->s < ps->end && *ps->s == '}') {
        ps->s++;
        return object_done(ps, d);
    }
    for (;;) {
        skip_ws(ps);
        if (ps->s >= ps->end || *ps->s != '"')
            goto bad;
        PyObject *k = parse_string(ps);
        if (k == NULL)
            goto fail;
        PyUnicode_InternInPlace(&k); /* keys are field names: one object each, compared by identity */
        skip_ws(ps);
        if (ps->s >= ps->end || *ps->s != ':') {
            Py_DECREF(k);
            goto bad;
        }
        ps->s++;
        PyObject *v = parse_value(ps, depth + 1);
        Py_ssize_t before = PyDict_GET_SIZE(d);
        int err = v == NULL || PyDict_SetItem(d, k, v) < 0;
        Py_DECREF(k);
        Py_XDECREF(v);
        if (err)
            goto fail;
        if (PyDict_GET_SIZE(d) == before)
            goto bad; /* a repeated key */
        int more = after_item(ps, '}');
        if (more < 0)
            goto bad;
        if (!more)
            return object_done(ps, d);
    }
bad:
    cb_fallback();
fail:
    Py_DECREF(d);
    return NULL;
}

static PyObject *parse_array(Parser *ps, int depth) {
    PyObject *l = PyList_New(0);
    if (l == NULL || untracked_add(ps->u, l) < 0) {
        Py_XDECREF(l);
        return NULL;
    }
    ps->s++;
    skip_ws(ps);
    if (ps->s < ps->end && *ps->s == ']') {
        ps->s++;
        return l;
    }
    for (;;) {
        PyObject *v = parse_value(ps, depth + 1);
        int err = v == NULL || PyList_Append(l, v) < 0;
        Py_XDECREF(v);
        if (err) {
            Py_DECREF(l);
            return NULL;
        }
        int more = after_item(ps, ']');
        if (!more)
            return l;
        if (more < 0) {
            Py_DECREF(l);
            return cb_fallback();
        }
    }
}

static PyObject *parse_value(Parser *ps, int depth) {
    skip_ws(ps);
    if (ps->s >= ps->end || depth > MAX_JSON_NEST)
        return cb_fallback();
    switch (*ps->s) {
    case '{': return parse_object(ps, depth);
    case '[': return parse_array(ps, depth);
    case '"': return parse_string(ps);
    case 't': if (literal(ps, "true")) Py_RETURN_TRUE; break;
    case 'f': if (literal(ps, "false")) Py_RETURN_FALSE; break;
    case 'n': if (literal(ps, "null")) Py_RETURN_NONE; break;
    default: return parse_number(ps);
    }
    return cb_fallback();
}

/* The whole of `data` as one JSON value (its containers untracked into `u`), or NULL with Fallback. */
PyObject *json_parse(const char *data, Py_ssize_t n, Untracked *u) {
    Parser ps = {(const unsigned char *)data, (const unsigned char *)data + n, u};
    PyObject *v = parse_value(&ps, 1);
    if (v == NULL)
        return NULL;
    skip_ws(&ps);
    if (ps.s != ps.end) {
        Py_DECREF(v);
        return cb_fallback();
    }
    return v;
}
