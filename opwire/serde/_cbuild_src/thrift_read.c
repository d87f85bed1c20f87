/* Thrift binary and compact bytes -> models, per the plan: a strict reader of the canonical encoding.
 *
 * "Canonical" is what the fastbinary path of opwire/serde/_thrift/fast.py accepts: the bytes Apache Thrift's
 * C codec writes for the decoded model, byte for byte. So this reader takes only: fields in increasing id order,
 * each known and of its IDL wire type, none left out but those whose default is None; lists and maps of the IDL
 * element types with canonical headers (compact: the short forms where they fit, an empty map as one 0 byte);
 * minimal varints that fit their width; bools as the codec writes them; valid UTF-8; a union of exactly one
 * member; enum values the IDL knows; no byte left over. Lengths are checked against the bytes that remain
 * before anything is read or allocated; at most 64 nested structs (as fastbinary); every value is counted
 * against the decode's budget (TooMany past it). Anything else raises Fallback: the checking decoder decides.
 */
#include "cbuild.h"
#include <string.h>

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
} Reader;

static PyObject *read_value(Reader *r, int ti);

static int spend(Reader *r) {
    if (++r->count > r->limit) {
        PyErr_SetNone(CB_TooMany);
        return -1;
    }
    return 0;
}

static int fail(void) {
    cb_fallback();
    return -1;
}

static int take(Reader *r, Py_ssize_t n, const unsigned char **at) {
    if (n < 0 || n > r->end - r->pos)
        return fail();
    *at = r->buf + r->pos;
    r->pos += n;
    return 0;
}

static int byte(Reader *r, int *out) {
    const unsigned char *at;
    if (take(r, 1, &at) < 0)
        return -1;
    *out = at[0];
    return 0;
}

static unsigned long long big_endian(const unsigned char *at, int n) {
    unsigned long long v = 0;
    for (int i = 0; i < n; i++)
        v = (v << 8) | at[i];
    return v;
}

/* an unsigned varint of at most `bits` bits, written minimally (what the codec writes) */
static int varint(Reader *r, int bits, unsigned long long *out) {
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

static long long unzigzag(unsigned long long v) {
    return (long long)(v >> 1) ^ -(long long)(v & 1);
}

/* a signed integer of `bits` bits (8, 16, 32, 64) */
static int integer(Reader *r, int bits, long long *out) {
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
static int length(Reader *r, Py_ssize_t *out) {
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

static PyObject *string(Reader *r, int kind) {
    Py_ssize_t n;
    const unsigned char *at;
    if (length(r, &n) < 0 || take(r, n, &at) < 0)
        return NULL;
    if (kind == K_BINARY)
        return PyBytes_FromStringAndSize((const char *)at, n);
    PyObject *s = PyUnicode_DecodeUTF8((const char *)at, n, NULL);
    if (s == NULL)
        return cb_fallback();
    if (kind == K_EXPR) {
        PyObject *checked = PyObject_CallOneArg(r->p->expr_cb, s);
        Py_DECREF(s);
        return checked ? checked : cb_fallback();
    }
    return s;
}

static PyObject *boolean(Reader *r) {
    int b;
    if (byte(r, &b) < 0)
        return NULL;
    if (b != 1 && b != (r->compact ? 2 : 0)) /* as elements: compact writes 1/2, binary 1/0 */
        return cb_fallback();
    return PyBool_FromLong(b == 1);
}

static int track_later(Reader *r, PyObject *o) {
    return untracked_add(&r->u, o);
}

/* element type codes of a container as the wire must give them */
static int code_of(Reader *r, int ti) {
    int kind = r->p->types[ti].kind;
    return r->compact ? CTYPE[kind] : TTYPE[kind];
}

static PyObject *read_list(Reader *r, TypeNode *t) {
    Py_ssize_t n;
    int etype;
    if (r->compact) {
        int h;
        if (byte(r, &h) < 0)
            return NULL;
        etype = h & 0x0f;
        n = h >> 4;
        if (n == 15) {
            if (length(r, &n) < 0)
                return NULL;
            if (n < 15)
                return cb_fallback(); /* the short form fits */
        }
        if (n > r->end - r->pos)
            return cb_fallback();
    } else {
        if (byte(r, &etype) < 0 || length(r, &n) < 0)
            return NULL;
    }
    if (etype != code_of(r, t->a))
        return cb_fallback();
    PyObject *list = PyList_New(n);
    if (list == NULL)
        return NULL;
    if (track_later(r, list) < 0) {
        Py_DECREF(list);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = read_value(r, t->a);
        if (x == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, x);
    }
    return list;
}

static PyObject *read_map(Reader *r, TypeNode *t) {
    Py_ssize_t n;
    int kv;
    if (r->compact) {
        if (length(r, &n) < 0)
            return NULL;
        if (n == 0)
            kv = (code_of(r, t->a) << 4) | code_of(r, t->b); /* an empty map is one 0 byte */
        else if (byte(r, &kv) < 0)
            return NULL;
    } else {
        int k, v;
        if (byte(r, &k) < 0 || byte(r, &v) < 0 || length(r, &n) < 0)
            return NULL;
        kv = (k << 4) | v;
    }
    if (kv != ((code_of(r, t->a) << 4) | code_of(r, t->b)) || r->p->types[t->a].kind != K_STRING)
        return cb_fallback();
    PyObject *dict = PyDict_New();
    if (dict == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *k = string(r, K_STRING), *v = k ? read_value(r, t->b) : NULL; /* keys are not counted */
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

/* a field header: 0 at the struct's end, else 1 with the field's id and wire code (compact: bool's value
   travels in the code: 1 true, 2 false) */
static int field_header(Reader *r, int last, int *id, int *code) {
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
static int left_out(StructPlan *sp, int *k, int j) {
    for (; *k < sp->nfields && sp->order[*k] != j; (*k)++)
        if (!sp->fields[sp->order[*k]].thrift_absent_ok)
            return fail();
    return 0;
}

static PyObject *read_struct(Reader *r, int si) {
    StructPlan *sp = &r->p->structs[si];
    if (r->structs >= MAX_STRUCTS)
        return cb_fallback();
    if (spend(r) < 0)
        return NULL;
    PyObject *vals[MAX_FIELDS]; /* by field index (the IDL's order); NULL: left out */
    PyObject *dict = NULL, *fields = NULL, *o = NULL;
    int last = 0, k = 0, present = 0, j = -1; /* k: position in the wire's order of the next field */
    for (int q = 0; q < sp->nfields; q++)
        vals[q] = NULL;
    r->structs++;
    for (;;) {
        int id, code;
        int more = field_header(r, last, &id, &code);
        if (more < 0)
            goto done;
        if (!more)
            break;
        j = id > 0 && id <= sp->max_id ? sp->by_id[id] : -1;
        if (j < 0 || id <= last || (sp->is_union && present)) {
            cb_fallback(); /* unknown, repeated, out of order, or a second member */
            goto done;
        }
        FieldPlan *f = &sp->fields[j];
        if (!sp->is_union && left_out(sp, &k, j) < 0)
            goto done;
        k++;
        if (r->compact && r->p->types[f->type].kind == K_BOOL) {
            if (code != 1 && code != 2) {
                cb_fallback();
                goto done;
            }
            vals[j] = spend(r) < 0 ? NULL : PyBool_FromLong(code == 1);
        } else if (code != code_of(r, f->type)) {
            cb_fallback();
            goto done;
        } else {
            vals[j] = read_value(r, f->type);
        }
        if (vals[j] == NULL)
            goto done;
        last = id;
        present++;
    }
    if (sp->is_union ? present != 1 : left_out(sp, &k, -1) < 0) {
        cb_fallback();
        goto done;
    }
    fields = PySet_New(present == sp->nfields ? sp->names : NULL);
    dict = sp->is_union ? PyDict_Copy(sp->tmpl) : _PyDict_NewPresized(sp->nfields);
    if (dict == NULL || fields == NULL)
        goto fallback;
    for (int q = 0; q < sp->nfields; q++) {
        PyObject *name = sp->fields[q].name;
        if (vals[q] == NULL) {
            if (!sp->is_union && PyDict_SetItem(dict, name, Py_None) < 0)
                goto fallback;
        } else if (PyDict_SetItem(dict, name, vals[q]) < 0 ||
                   (present != sp->nfields && PySet_Add(fields, name) < 0)) {
            goto fallback;
        }
    }
    if (track_later(r, dict) < 0 || track_later(r, fields) < 0)
        goto done;
    o = model_new(r->p, sp, dict, fields);
    dict = fields = NULL;
    if (o == NULL || track_later(r, o) < 0) {
        Py_CLEAR(o);
        goto fallback;
    }
    goto done;
fallback:
    cb_fallback();
done:
    for (int q = 0; q < sp->nfields; q++)
        Py_XDECREF(vals[q]);
    Py_XDECREF(dict);
    Py_XDECREF(fields);
    r->structs--;
    return o;
}

static PyObject *read_value(Reader *r, int ti) {
    TypeNode *t = &r->p->types[ti];
    const unsigned char *at;
    long long v;
    if (t->kind != K_STRUCT && spend(r) < 0)
        return NULL;
    switch (t->kind) {
    case K_BOOL:
        return boolean(r);
    case K_I8:
        return integer(r, 8, &v) < 0 ? NULL : PyLong_FromLongLong(v);
    case K_I16:
        return integer(r, 16, &v) < 0 ? NULL : PyLong_FromLongLong(v);
    case K_I32:
        return integer(r, 32, &v) < 0 ? NULL : PyLong_FromLongLong(v);
    case K_I64:
        return integer(r, 64, &v) < 0 ? NULL : PyLong_FromLongLong(v);
    case K_ENUM: {
        if (integer(r, 32, &v) < 0)
            return NULL;
        PyObject *key = PyLong_FromLongLong(v);
        if (key == NULL)
            return NULL;
        PyObject *member = PyDict_GetItemWithError(t->enum_map, key);
        Py_DECREF(key);
        if (member == NULL)
            return cb_fallback();
        Py_INCREF(member);
        return member;
    }
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
        return string(r, t->kind);
    case K_STRUCT:
        return read_struct(r, t->a);
    case K_LIST:
        return read_list(r, t);
    case K_MAP:
        return read_map(r, t);
    }
    return cb_fallback();
}

/* thrift_build(plan, struct_index, data, start, compact, limit) -> (model, values counted) */
PyObject *thrift_build(PyObject *self, PyObject *args) {
    PyObject *capsule;
    Py_buffer view;
    Py_ssize_t start;
    int si, compact;
    long long limit;
    (void)self;
    if (!PyArg_ParseTuple(args, "Oiy*npL", &capsule, &si, &view, &start, &compact, &limit))
        return NULL;
    Plan *p = plan_get(capsule);
    PyObject *out = NULL;
    if (p == NULL)
        goto end;
    if (si < 0 || si >= p->nstructs || start < 0 || start > view.len) {
        PyErr_SetString(PyExc_IndexError, "struct index or start out of range");
        goto end;
    }
    Reader r = {p, view.buf, start, view.len, compact, 0, limit, 0, {NULL, 0, 0}};
    PyObject *o = read_struct(&r, si);
    if (o != NULL && r.pos != r.end) {
        Py_CLEAR(o);
        cb_fallback(); /* bytes left over */
    }
    untracked_finish(&r.u);
    if (o != NULL) {
        out = Py_BuildValue("(NL)", o, r.count);
    }
end:
    PyBuffer_Release(&view);
    return out;
}
