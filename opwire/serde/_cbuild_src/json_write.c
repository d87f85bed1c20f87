/* Models -> torch's exact JSON bytes, walking the plan the builder reads (plan.c).
 *
 * Why C: the Python writers compiled from the IDL (opwire/serde/_json_write.py, one f-string function per struct)
 * spend their time in a Python call per model and in `str.join`; torch's C++ serializer writes a 3 MB program
 * about as fast. Here every model is read from its `__dict__` in IDL order and written straight into one growing
 * buffer: the bytes `json.dumps(to_jsonable(model))` gives. Keys in IDL order with ", " and ": ", strings escaped
 * as json's `encode_basestring_ascii`, ints as `int.__repr__`, finite doubles as `float.__repr__` and the others
 * as torch's strings, binary as standard base64, None as null (optional fields only), a union as its one member.
 *
 * Nothing here decides an error: a value it does not expect (a model of another class, a bool where an int
 * belongs, a union with other than one member set, a null in a required field, nesting past MAX_NEST, ...)
 * raises Fallback, and opwire's reference path writes the model or words the error.
 */
#include "cbuild.h"
#include <math.h>
#include <string.h>

#define MAX_NEST 1000 /* models and lists: bounds the C stack (Python's writers hit the recursion limit first) */

typedef struct {
    Plan *p;
    char *b;
    Py_ssize_t n, cap;
} Out;

static int put_value(Out *o, int ti, PyObject *v, int depth);

static int unexpected(void) {
    PyErr_SetNone(CB_Fallback);
    return -1;
}

static int grow(Out *o, Py_ssize_t k) {
    Py_ssize_t cap = o->cap ? o->cap : 1 << 16;
    while (cap - o->n < k) {
        if (cap > PY_SSIZE_T_MAX / 2) {
            PyErr_NoMemory();
            return -1;
        }
        cap *= 2;
    }
    char *b = PyMem_Realloc(o->b, cap);
    if (b == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    o->b = b;
    o->cap = cap;
    return 0;
}

/* room for `k` more bytes */
#define ROOM(o, k) ((o)->cap - (o)->n >= (k) || grow((o), (k)) == 0)

static int put(Out *o, const char *s, Py_ssize_t k) {
    if (!ROOM(o, k))
        return -1;
    memcpy(o->b + o->n, s, k);
    o->n += k;
    return 0;
}

#define PUT_LIT(o, lit) put((o), (lit), (Py_ssize_t)sizeof(lit) - 1)

static const char HEX[] = "0123456789abcdef";

/* json's ascii_escape_unichar: the escape of a character `encode_basestring_ascii` does not write as is */
static char *escape(char *w, Py_UCS4 c) {
    *w++ = '\\';
    switch (c) {
    case '\\': *w++ = '\\'; return w;
    case '"': *w++ = '"'; return w;
    case '\b': *w++ = 'b'; return w;
    case '\f': *w++ = 'f'; return w;
    case '\n': *w++ = 'n'; return w;
    case '\r': *w++ = 'r'; return w;
    case '\t': *w++ = 't'; return w;
    }
    if (c >= 0x10000) { /* a UTF-16 surrogate pair */
        Py_UCS4 hi = Py_UNICODE_HIGH_SURROGATE(c);
        *w++ = 'u';
        for (int shift = 12; shift >= 0; shift -= 4)
            *w++ = HEX[(hi >> shift) & 0xf];
        c = Py_UNICODE_LOW_SURROGATE(c);
        *w++ = '\\';
    }
    *w++ = 'u';
    for (int shift = 12; shift >= 0; shift -= 4)
        *w++ = HEX[(c >> shift) & 0xf];
    return w;
}

#define PLAIN(c) ((c) >= ' ' && (c) <= '~' && (c) != '\\' && (c) != '"')

static int put_string(Out *o, PyObject *s) {
    if (!PyUnicode_CheckExact(s))
        return unexpected();
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(s) < 0)
        return -1;
#endif
    Py_ssize_t len = PyUnicode_GET_LENGTH(s);
    int kind = PyUnicode_KIND(s);
    /* at most 6 bytes a character (\u00XX), 12 past the BMP (a surrogate pair) */
    if (len > (PY_SSIZE_T_MAX - 2) / 12) {
        PyErr_NoMemory();
        return -1;
    }
    if (!ROOM(o, (kind == PyUnicode_4BYTE_KIND ? 12 : 6) * len + 2))
        return -1;
    char *w = o->b + o->n;
    *w++ = '"';
    if (PyUnicode_IS_ASCII(s)) {
        const unsigned char *d = PyUnicode_1BYTE_DATA(s);
        for (Py_ssize_t i = 0; i < len; i++) {
            unsigned char c = d[i];
            if (PLAIN(c))
                *w++ = (char)c;
            else
                w = escape(w, c);
        }
    } else {
        const void *d = PyUnicode_DATA(s);
        for (Py_ssize_t i = 0; i < len; i++) {
            Py_UCS4 c = PyUnicode_READ(kind, d, i);
            if (PLAIN(c))
                *w++ = (char)c;
            else
                w = escape(w, c);
        }
    }
    *w++ = '"';
    o->n = w - o->b;
    return 0;
}

/* an int (an enum member is an int) as int.__repr__ writes it; a bool is not taken */
static int put_int(Out *o, PyObject *v) {
    if (!PyLong_Check(v) || PyBool_Check(v))
        return unexpected();
    int overflow;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (x == -1 && PyErr_Occurred())
        return -1;
    if (overflow) {
        PyObject *r = PyLong_Type.tp_repr(v);
        if (r == NULL)
            return -1;
        const char *digits = PyUnicode_AsUTF8(r);
        int rc = digits == NULL ? -1 : put(o, digits, PyUnicode_GET_LENGTH(r));
        Py_DECREF(r);
        return rc;
    }
    char tmp[24], *end = tmp + sizeof(tmp), *w = end;
    unsigned long long u = x < 0 ? 0ULL - (unsigned long long)x : (unsigned long long)x;
    do {
        *--w = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (x < 0)
        *--w = '-';
    return put(o, w, end - w);
}

static int put_double(Out *o, PyObject *v) {
    if (!PyFloat_CheckExact(v))
        return unexpected();
    double d = PyFloat_AS_DOUBLE(v);
    if (isnan(d))
        return PUT_LIT(o, "\"NaN\"");
    if (isinf(d))
        return d > 0 ? PUT_LIT(o, "\"Infinity\"") : PUT_LIT(o, "\"-Infinity\"");
    char *s = PyOS_double_to_string(d, 'r', 0, Py_DTSF_ADD_DOT_0, NULL); /* float.__repr__ */
    if (s == NULL)
        return -1;
    int rc = put(o, s, (Py_ssize_t)strlen(s));
    PyMem_Free(s);
    return rc;
}

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* standard base64 with padding, quoted (base64.b64encode) */
static int put_binary(Out *o, PyObject *v) {
    if (!PyBytes_CheckExact(v))
        return unexpected();
    const unsigned char *d = (const unsigned char *)PyBytes_AS_STRING(v);
    Py_ssize_t n = PyBytes_GET_SIZE(v);
    if (n > (PY_SSIZE_T_MAX - 8) / 4 * 3) {
        PyErr_NoMemory();
        return -1;
    }
    if (!ROOM(o, (n + 2) / 3 * 4 + 2))
        return -1;
    char *w = o->b + o->n;
    *w++ = '"';
    Py_ssize_t i = 0;
    for (; i + 2 < n; i += 3) {
        unsigned int t = (unsigned int)d[i] << 16 | (unsigned int)d[i + 1] << 8 | d[i + 2];
        *w++ = B64[t >> 18];
        *w++ = B64[(t >> 12) & 63];
        *w++ = B64[(t >> 6) & 63];
        *w++ = B64[t & 63];
    }
    if (i < n) {
        unsigned int t = (unsigned int)d[i] << 16 | (i + 1 < n ? (unsigned int)d[i + 1] << 8 : 0);
        *w++ = B64[t >> 18];
        *w++ = B64[(t >> 12) & 63];
        *w++ = i + 1 < n ? B64[(t >> 6) & 63] : '=';
        *w++ = '=';
    }
    *w++ = '"';
    o->n = w - o->b;
    return 0;
}

/* `"name": ` (field names are ASCII identifiers: nothing to escape) */
static int put_key(Out *o, PyObject *name) {
    Py_ssize_t k = PyUnicode_GET_LENGTH(name);
    if (!PyUnicode_IS_ASCII(name))
        return unexpected();
    if (!ROOM(o, k + 4))
        return -1;
    char *w = o->b + o->n;
    *w++ = '"';
    memcpy(w, PyUnicode_1BYTE_DATA(name), k);
    w += k;
    memcpy(w, "\": ", 3);
    o->n += k + 4;
    return 0;
}

/* the union's one member, as `(k,) = o.__pydantic_fields_set__` and a non-null `o.__dict__[k]` name it */
static int put_union(Out *o, StructPlan *sp, PyObject *obj, PyObject *d, int depth) {
    Plan *p = o->p;
    PyObject *set = Py_TYPE(p->d_fields)->tp_descr_get(p->d_fields, obj, (PyObject *)Py_TYPE(obj));
    if (set == NULL)
        return -1;
    if (!PyAnySet_CheckExact(set) || PySet_GET_SIZE(set) != 1) {
        Py_DECREF(set);
        return unexpected();
    }
    PyObject *it = PyObject_GetIter(set);
    Py_DECREF(set);
    if (it == NULL)
        return -1;
    PyObject *k = PyIter_Next(it); /* new reference */
    Py_DECREF(it);
    if (k == NULL)
        return PyErr_Occurred() ? -1 : unexpected();
    if (!PyUnicode_CheckExact(k)) { /* no lookup runs Python code (a key's __eq__) */
        Py_DECREF(k);
        return unexpected();
    }
    PyObject *j = PyDict_GetItemWithError(sp->members, k);
    PyObject *v = j == NULL ? NULL : PyDict_GetItemWithError(d, k);
    Py_DECREF(k);
    if (v == NULL || v == Py_None)
        return PyErr_Occurred() ? -1 : unexpected();
    FieldPlan *f = &sp->fields[PyLong_AsLong(j)];
    Py_INCREF(v);
    int rc = PUT_LIT(o, "{") < 0 || put_key(o, f->name) < 0 || put_value(o, f->type, v, depth) < 0 ? -1 : 0;
    Py_DECREF(v);
    return rc < 0 ? -1 : PUT_LIT(o, "}");
}

static int put_struct(Out *o, int si, PyObject *obj, int depth) {
    Plan *p = o->p;
    StructPlan *sp = &p->structs[si];
    if (Py_TYPE(obj) != (PyTypeObject *)sp->cls || depth > MAX_NEST)
        return unexpected();
    PyObject *d = Py_TYPE(p->d_dict)->tp_descr_get(p->d_dict, obj, (PyObject *)Py_TYPE(obj));
    if (d == NULL)
        return -1;
    int rc = -1;
    if (!PyDict_CheckExact(d)) {
        unexpected();
        goto done;
    }
    if (sp->is_union) {
        rc = put_union(o, sp, obj, d, depth + 1);
        goto done;
    }
    if (PUT_LIT(o, "{") < 0)
        goto done;
    for (int j = 0; j < sp->nfields; j++) {
        FieldPlan *f = &sp->fields[j];
        if ((j && PUT_LIT(o, ", ") < 0) || put_key(o, f->name) < 0)
            goto done;
        PyObject *v = PyDict_GetItemWithError(d, f->name);
        if (v == NULL) {
            if (!PyErr_Occurred())
                unexpected();
            goto done;
        }
        /* null only where the IDL makes the field optional (nullable: optional and not required in pydantic) */
        if (v == Py_None && f->nullable) {
            if (PUT_LIT(o, "null") < 0)
                goto done;
            continue;
        }
        Py_INCREF(v); /* values are held while written: nothing borrowed outlives a lookup */
        int failed = put_value(o, f->type, v, depth + 1) < 0;
        Py_DECREF(v);
        if (failed)
            goto done;
    }
    rc = PUT_LIT(o, "}");
done:
    Py_DECREF(d);
    return rc;
}

static int put_list(Out *o, int ti, PyObject *v, int depth) {
    if (!PyList_CheckExact(v) || depth > MAX_NEST)
        return unexpected();
    if (PUT_LIT(o, "[") < 0)
        return -1;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(v); i++) {
        if (i && PUT_LIT(o, ", ") < 0)
            return -1;
        PyObject *x = PyList_GET_ITEM(v, i);
        Py_INCREF(x);
        int failed = put_value(o, ti, x, depth + 1) < 0;
        Py_DECREF(x);
        if (failed)
            return -1;
    }
    return PUT_LIT(o, "]");
}

static int put_map(Out *o, TypeNode *t, PyObject *v, int depth) {
    if (!PyDict_CheckExact(v) || o->p->types[t->a].kind != K_STRING || depth > MAX_NEST)
        return unexpected();
    if (PUT_LIT(o, "{") < 0)
        return -1;
    Py_ssize_t pos = 0, i = 0;
    PyObject *k, *x;
    while (PyDict_Next(v, &pos, &k, &x)) {
        Py_INCREF(k);
        Py_INCREF(x);
        int failed = (i++ && PUT_LIT(o, ", ") < 0) || put_string(o, k) < 0 || PUT_LIT(o, ": ") < 0 ||
                     put_value(o, t->b, x, depth + 1) < 0;
        Py_DECREF(k);
        Py_DECREF(x);
        if (failed)
            return -1;
    }
    return PUT_LIT(o, "}");
}

static int put_value(Out *o, int ti, PyObject *v, int depth) {
    TypeNode *t = &o->p->types[ti];
    switch (t->kind) {
    case K_BOOL:
        if (v == Py_True)
            return PUT_LIT(o, "true");
        if (v == Py_False)
            return PUT_LIT(o, "false");
        return unexpected();
    case K_I8:
    case K_I16:
    case K_I32:
    case K_I64:
    case K_ENUM: return put_int(o, v);
    case K_DOUBLE: return put_double(o, v);
    case K_STRING:
    case K_EXPR: return put_string(o, v);
    case K_BINARY: return put_binary(o, v);
    case K_STRUCT: return put_struct(o, t->a, v, depth);
    case K_LIST: return put_list(o, t->a, v, depth);
    case K_MAP: return put_map(o, t, v, depth);
    }
    return unexpected();
}

/* json_write(plan, struct_index, model) -> the model's JSON bytes; Fallback for anything not taken */
PyObject *json_write(PyObject *self, PyObject *args) {
    PyObject *capsule, *obj;
    int si;
    (void)self;
    if (!PyArg_ParseTuple(args, "OiO", &capsule, &si, &obj))
        return NULL;
    Plan *p = plan_struct(capsule, si);
    if (p == NULL)
        return NULL;
    Out o = {p, NULL, 0, 0};
    PyObject *out = NULL;
    if (put_struct(&o, si, obj, 0) == 0)
        out = PyBytes_FromStringAndSize(o.b, o.n);
    PyMem_Free(o.b);
    return out != NULL ? out : cb_fallback();
}
