/* The check after a Thrift encode, in one pass over the bytes, per the plan, building nothing.
 *
 * `thrift.encode` writes with Apache Thrift's C codec, which writes whatever a model holds; `fast.verify` then
 * decodes the bytes again (fastbinary with a Python callback per struct) to hold them to the IDL: every union of
 * exactly one member, required fields present, enum values known. That decode took longer than the encode.
 * This takes the canonical bytes thrift_read.c takes (thrift_wire.h: what the codec writes, so every encode's
 * output unless the model breaks a rule), at most 64 nested structs (the codec writes no more), unions of exactly
 * one member, no field left out but those whose default is None (so every required one is present) and enum
 * values the IDL knows, anywhere. So where it answers True, `fast.verify` answers True; anything else is declined
 * (None) and `fast.verify` decides. Strings are stepped over: the codec wrote them from Python strings.
 */
#include "thrift_wire.h"

static PyObject *check_value(Reader *r, int ti);

static int charge_none(Reader *r) { return 0; }

static PyObject *check_struct(Reader *r, int si) {
    StructPlan *sp = &r->p->structs[si];
    if (r->structs >= MAX_STRUCTS)
        return cb_fallback();
    PyObject *vals[MAX_FIELDS]; /* Py_None for each field read; NULL: left out */
    r->structs++;
    int present = fields_of(r, sp, vals, check_value, charge_none);
    r->structs--;
    for (int q = 0; q < sp->nfields; q++)
        Py_XDECREF(vals[q]);
    if (present < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* a string's bytes, stepped over */
static int skip_string(Reader *r) {
    Py_ssize_t n;
    const unsigned char *at;
    return length(r, &n) < 0 || take(r, n, &at) < 0 ? -1 : 0;
}

static PyObject *check_value(Reader *r, int ti) {
    TypeNode *t = &r->p->types[ti];
    Py_ssize_t n;
    switch (t->kind) {
    case K_STRUCT:
        return check_struct(r, t->a);
    case K_LIST:
        if (list_header(r, t->a, &n) < 0)
            return NULL;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *x = check_value(r, t->a);
            if (x == NULL)
                return NULL;
            Py_DECREF(x);
        }
        Py_RETURN_NONE;
    case K_MAP:
        if (map_header(r, t->a, t->b, &n) < 0)
            return NULL;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *x = skip_string(r) < 0 ? NULL : check_value(r, t->b); /* keys: strings (map_header) */
            if (x == NULL)
                return NULL;
            Py_DECREF(x);
        }
        Py_RETURN_NONE;
    case K_STRING:
    case K_BINARY:
    case K_EXPR:
        if (skip_string(r) < 0)
            return NULL;
        Py_RETURN_NONE;
    }
    PyObject *v = leaf(r, t->kind);
    if (v == NULL || t->kind != K_ENUM)
        return v;
    PyObject *member = PyDict_GetItemWithError(t->enum_map, v); /* a value the IDL knows */
    Py_DECREF(v);
    if (member == NULL)
        return cb_fallback();
    Py_RETURN_NONE;
}

/* thrift_check(plan, struct_index, data, compact) -> True, or Fallback (fast.verify decides) */
PyObject *thrift_check(PyObject *self, PyObject *args) {
    PyObject *capsule;
    Py_buffer view;
    int si, compact;
    (void)self;
    if (!PyArg_ParseTuple(args, "Oiy*p", &capsule, &si, &view, &compact))
        return NULL;
    Plan *p = plan_struct(capsule, si);
    PyObject *out = NULL;
    if (p != NULL) {
        Reader r = {p, view.buf, 0, view.len, compact, 0, 0, 0, {NULL, 0, 0}, 0, 0, {NULL, 0}};
        PyObject *o = check_struct(&r, si);
        if (o != NULL && r.pos != r.end) {
            Py_CLEAR(o);
            cb_fallback(); /* bytes left over */
        }
        if (o != NULL) {
            Py_DECREF(o);
            out = Py_NewRef(Py_True);
        }
    }
    PyBuffer_Release(&view);
    return out;
}
