/* The wire of canonical Thrift binary and compact, shared by the two readers: thrift_read.c (models) and
 * thrift_plain.c (plain objects). See thrift_read.c for what "canonical" takes. Every length is checked against
 * the bytes that remain before anything is read or allocated; anything not taken raises Fallback.
 */
#ifndef OPWIRE_THRIFT_WIRE_H
#define OPWIRE_THRIFT_WIRE_H

#include "cbuild.h"
#include "thrift_strings.h" /* (and string.h) */

#if PY_VERSION_HEX >= 0x030B0000
#define UNPACK8 PyFloat_Unpack8
#else
#define UNPACK8 _PyFloat_Unpack8
#endif

#define MAX_STRUCTS 64 /* fastbinary's nesting limit: deeper values are the checking decoder's */

/* Thrift's TType numbers (binary) and compact's codes, by IDL kind (index: K_*) */
static const int TTYPE[] = {0, 2, 3, 6, 8, 10, 4, 11, 11, 8, 12, 15, 13, 11};
static const int CTYPE[] = {0, 1, 3, 4, 5, 6, 7, 8, 8, 5, 12, 9, 11, 8};

typedef struct {
    Plan *p;
    const unsigned char *buf;
    Py_ssize_t pos, end;
    int compact;
    long long count, limit;
    int structs; /* structs open on the current path */
    Untracked u;
    long long own;  /* plain: values of the struct being read, its nested structs' aside */
    int event;      /* plain: what a budgeted count meets first (see thrift_plain.c) */
    StrCache strs;  /* the strings built so far (thrift_strings.h) */
} Reader;

static inline int spend(Reader *r) {
    if (++r->count > r->limit) {
        PyErr_SetNone(CB_TooMany);
        return -1;
    }
    return 0;
}

static inline int fail(void) {
    cb_fallback();
    return -1;
}

static inline int take(Reader *r, Py_ssize_t n, const unsigned char **at) {
    if (n < 0 || n > r->end - r->pos)
        return fail();
    *at = r->buf + r->pos;
    r->pos += n;
    return 0;
}

static inline int byte(Reader *r, int *out) {
    const unsigned char *at;
    if (take(r, 1, &at) < 0)
        return -1;
    *out = at[0];
    return 0;
}

static inline unsigned long long big_endian(const unsigned char *at, int n) {
    unsigned long long v = 0;
    for (int i = 0; i < n; i++)
        v = (v << 8) | at[i];
    return v;
}

/* an unsigned varint of at most `bits` bits, written minimally (what the codec writes) */
static inline int varint(Reader *r, int bits, unsigned long long *out) {
    unsigned long long v = 0;
    int shift = 0;
    for (;;) {
        int b;
        if (byte(r, &b) < 0)
            return -1;
        if (shift && b == 0)
            return fail(); /* a trailing zero group: not minimal */
        if (shift >= bits || (shift + 7 > bits && (b & 0x7f) >> (bits - shift)))
            return fail(); /* past the width */
        v |= (unsigned long long)(b & 0x7f) << shift;
        shift += 7;
        if (!(b & 0x80))
            break;
    }
    *out = v;
    return 0;
}

static inline long long unzigzag(unsigned long long v) {
    return (long long)(v >> 1) ^ -(long long)(v & 1);
}

/* a signed integer of `bits` bits (8, 16, 32, 64) */
static inline int integer(Reader *r, int bits, long long *out) {
    const unsigned char *at;
    if (bits == 8) {
        if (take(r, 1, &at) < 0)
            return -1;
        *out = (signed char)at[0];
        return 0;
    }
    if (r->compact) {
        unsigned long long v;
        if (varint(r, bits == 16 ? 32 : bits, &v) < 0)
            return -1;
        *out = unzigzag(v);
        if (bits == 16 && (*out < -32768 || *out > 32767))
            return fail();
        return 0;
    }
    if (take(r, bits / 8, &at) < 0)
        return -1;
    unsigned long long v = big_endian(at, bits / 8);
    if (bits == 16)
        *out = (short)v;
    else if (bits == 32)
        *out = (int)(unsigned int)v;
    else
        *out = (long long)v;
    return 0;
}

/* a length or size: at most the bytes that remain (every element or byte takes one at least) */
static inline int length(Reader *r, Py_ssize_t *out) {
    unsigned long long v;
    if (r->compact) {
        if (varint(r, 32, &v) < 0)
            return -1;
    } else {
        long long s;
        if (integer(r, 32, &s) < 0)
            return -1;
        if (s < 0)
            return fail();
        v = (unsigned long long)s;
    }
    if (v > (unsigned long long)(r->end - r->pos))
        return fail();
    *out = (Py_ssize_t)v;
    return 0;
}

static inline PyObject *string(Reader *r, int kind) {
    Py_ssize_t n;
    const unsigned char *at;
    if (length(r, &n) < 0 || take(r, n, &at) < 0)
        return NULL;
    if (kind == K_BINARY)
        return PyBytes_FromStringAndSize((const char *)at, n);
    if (kind != K_EXPR)
        return cached_str(&r->strs, at, n);
    PyObject *s = PyUnicode_DecodeUTF8((const char *)at, n, NULL);
    if (s == NULL)
        return cb_fallback();
    PyObject *checked = PyObject_CallOneArg(r->p->expr_cb, s);
    Py_DECREF(s);
    return checked ? checked : cb_fallback();
}

static inline PyObject *boolean(Reader *r) {
    int b;
    if (byte(r, &b) < 0)
        return NULL;
    if (b != 1 && b != (r->compact ? 2 : 0)) /* as elements: compact writes 1/2, binary 1/0 */
        return cb_fallback();
    return PyBool_FromLong(b == 1);
}

static inline int track_later(Reader *r, PyObject *o) { return untracked_add(&r->u, o); }

/* element type codes of a container as the wire must give them */
static inline int code_of(Reader *r, int ti) {
    int kind = r->p->types[ti].kind;
    return r->compact ? CTYPE[kind] : TTYPE[kind];
}

/* a field header: 0 at the struct's end, else 1 with the field's id and wire code (compact: bool's value
   travels in the code: 1 true, 2 false) */
static inline int field_header(Reader *r, int last, int *id, int *code) {
    int b;
    if (byte(r, &b) < 0)
        return -1;
    if (b == 0)
        return 0;
    if (!r->compact) {
        long long fid;
        if (integer(r, 16, &fid) < 0)
            return -1;
        *code = b;
        *id = (int)fid;
        return 1;
    }
    *code = b & 0x0f;
    if (b >> 4) {
        *id = last + (b >> 4);
        return 1;
    }
    long long fid;
    if (integer(r, 16, &fid) < 0)
        return -1;
    if (fid > last && fid - last <= 15)
        return fail(); /* the short form fits */
    *id = (int)fid;
    return 1;
}

/* the fields of `sp` from wire position *k up to (not including) field index `j` (-1: all the rest) were
   left out: canonical only when their default is None */
static inline int left_out(StructPlan *sp, int *k, int j) {
    for (; *k < sp->nfields && sp->order[*k] != j; (*k)++)
        if (!sp->fields[sp->order[*k]].thrift_absent_ok)
            return fail();
    return 0;
}

/* a list header of element type `ti`: its length (at most the bytes that remain) */
static inline int list_header(Reader *r, int ti, Py_ssize_t *n) {
    int etype;
    if (r->compact) {
        int h;
        if (byte(r, &h) < 0)
            return -1;
        etype = h & 0x0f;
        *n = h >> 4;
        if (*n == 15) {
            if (length(r, n) < 0)
                return -1;
            if (*n < 15)
                return fail(); /* the short form fits */
        }
        if (*n > r->end - r->pos)
            return fail();
    } else {
        if (byte(r, &etype) < 0 || length(r, n) < 0)
            return -1;
    }
    return etype != code_of(r, ti) ? fail() : 0;
}

/* a map header of key type `ki` (a string) and value type `vi`: its size */
static inline int map_header(Reader *r, int ki, int vi, Py_ssize_t *n) {
    int kv;
    if (r->compact) {
        if (length(r, n) < 0)
            return -1;
        if (*n == 0)
            kv = (code_of(r, ki) << 4) | code_of(r, vi); /* an empty map is one 0 byte */
        else if (byte(r, &kv) < 0)
            return -1;
    } else {
        int k, v;
        if (byte(r, &k) < 0 || byte(r, &v) < 0 || length(r, n) < 0)
            return -1;
        kv = (k << 4) | v;
    }
    if (kv != ((code_of(r, ki) << 4) | code_of(r, vi)) || r->p->types[ki].kind != K_STRING)
        return fail();
    return 0;
}

/* a value of a leaf kind both readers build alike: bool, the integers (an enum's as its int), double, string,
   binary, an expression's string; NULL with Fallback for any other kind */
static inline PyObject *leaf(Reader *r, int kind) {
    const unsigned char *at;
    long long v;
    switch (kind) {
    case K_BOOL:
        return boolean(r);
    case K_I8:
        return integer(r, 8, &v) < 0 ? NULL : PyLong_FromLongLong(v);
    case K_I16:
        return integer(r, 16, &v) < 0 ? NULL : PyLong_FromLongLong(v);
    case K_I32:
    case K_ENUM:
        return integer(r, 32, &v) < 0 ? NULL : PyLong_FromLongLong(v);
    case K_I64:
        return integer(r, 64, &v) < 0 ? NULL : PyLong_FromLongLong(v);
    case K_DOUBLE: {
        if (take(r, 8, &at) < 0)
            return NULL;
        double d = UNPACK8((const char *)at, r->compact ? 1 : 0);
        if (d == -1.0 && PyErr_Occurred())
            return NULL;
        return PyFloat_FromDouble(d);
    }
    case K_STRING:
    case K_BINARY:
    case K_EXPR:
        return string(r, kind);
    }
    return cb_fallback();
}

/* how a reader reads one value of type `ti` (a model or a plain object for a struct); `seen`, when set, is told
   each container's type and length once its header is read (the plain reader counts it; the model reader reads
   a container that cannot fit its budget without building it) and stops the read by returning -1, an error set */
typedef PyObject *(*ValueFn)(Reader *r, int ti);
typedef int (*SeenFn)(Reader *r, TypeNode *t, Py_ssize_t n);

/* a list of `t`'s items, each read by `value` */
static inline PyObject *list_of(Reader *r, TypeNode *t, ValueFn value, SeenFn seen) {
    Py_ssize_t n;
    if (list_header(r, t->a, &n) < 0 || (seen != NULL && seen(r, t, n) < 0))
        return NULL;
    PyObject *list = PyList_New(n);
    if (list == NULL)
        return NULL;
    if (track_later(r, list) < 0) {
        Py_DECREF(list);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = value(r, t->a);
        if (x == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, x);
    }
    return list;
}

/* a map of string keys to `t`'s values, each read by `value` */
static inline PyObject *map_of(Reader *r, TypeNode *t, ValueFn value, SeenFn seen) {
    Py_ssize_t n;
    if (map_header(r, t->a, t->b, &n) < 0 || (seen != NULL && seen(r, t, n) < 0))
        return NULL;
    PyObject *dict = PyDict_New();
    if (dict == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *k = string(r, K_STRING), *v = k ? value(r, t->b) : NULL; /* keys are not counted */
        int bad = v == NULL || PyDict_SetItem(dict, k, v) < 0;
        Py_XDECREF(k);
        Py_XDECREF(v);
        if (bad || PyDict_GET_SIZE(dict) != i + 1) { /* a repeated key: not what the codec writes */
            Py_DECREF(dict);
            return cb_fallback(); /* (keeps a TooMany) */
        }
    }
    if (track_later(r, dict) < 0) { /* once filled: storing a container in a dict tracks it again */
        Py_DECREF(dict);
        return NULL;
    }
    return dict;
}

/* how a reader charges a compact bool field's value (its byte is the field header's) */
typedef int (*ChargeFn)(Reader *r);

/* The fields of struct `sp` into `vals` by field index (NULL where left out), each value read by `value`, a
   compact bool field's charged by `charge`: in increasing id order, each known and of its IDL wire type, none left
   out but those whose default is None, a union's exactly one member. The number present, or -1 (an error set:
   Fallback where the bytes are not canonical). `vals` holds what was read either way: the caller releases it. */
static inline int fields_of(Reader *r, StructPlan *sp, PyObject **vals, ValueFn value, ChargeFn charge) {
    int last = 0, k = 0, present = 0; /* k: position in the wire's order of the next field */
    for (int q = 0; q < sp->nfields; q++)
        vals[q] = NULL;
    for (;;) {
        int id, code;
        int more = field_header(r, last, &id, &code);
        if (more < 0)
            return -1;
        if (!more)
            break;
        int j = id > 0 && id <= sp->max_id ? sp->by_id[id] : -1;
        if (j < 0 || id <= last || (sp->is_union && present))
            return fail(); /* unknown, repeated, out of order, or a second member */
        FieldPlan *f = &sp->fields[j];
        if (!sp->is_union && left_out(sp, &k, j) < 0)
            return -1;
        k++;
        if (r->compact && r->p->types[f->type].kind == K_BOOL) {
            if (code != 1 && code != 2)
                return fail();
            vals[j] = charge(r) < 0 ? NULL : PyBool_FromLong(code == 1);
        } else if (code != code_of(r, f->type)) {
            return fail();
        } else {
            vals[j] = value(r, f->type);
        }
        if (vals[j] == NULL)
            return -1;
        last = id;
        present++;
    }
    if (sp->is_union ? present != 1 : left_out(sp, &k, -1) < 0)
        return fail();
    return present;
}

#endif
