/* Parsed JSON (dicts, lists, str, int, float, bool, None from the parser) -> models, per the plan.
 *
 * As strict as the `json` flavour of opwire/serde/_build.py: exact types (a bool is no int), ints in their IDL
 * range, doubles as torch writes them (ints within 2**53, "Infinity", "-Infinity", "NaN"), binary as strict
 * base64, enums by value, lists and maps by type, a union is exactly one non-null member. Anything else raises
 * Fallback. Lists and maps of the parsed tree are checked and converted in place and become the models' values
 * (the parsed tree is the decode's own: nothing else holds it).
 */
#include "cbuild.h"
#include <string.h>

#define MAX_NEST 1000 /* JSON's parser stops at 200; this only bounds the C stack */
#define EXACT_FLOAT_INT (1LL << 53)

typedef struct {
    Plan *p;
    Untracked u;
} Walk;

static PyObject *struct_from(Walk *w, int si, PyObject *d, int depth);

static int int_in_range(PyObject *v, int kind) {
    if (!PyLong_CheckExact(v))
        return 0;
    int overflow;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || (x == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    switch (kind) {
    case K_I8: return x >= -128 && x <= 127;
    case K_I16: return x >= -32768 && x <= 32767;
    case K_I32: return x >= INT32_MIN && x <= INT32_MAX;
    default: return 1;
    }
}

static PyObject *f64_from(Plan *p, PyObject *v) {
    if (PyFloat_CheckExact(v)) {
        Py_INCREF(v);
        return v;
    }
    if (PyLong_CheckExact(v)) {
        int overflow;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow || (x == -1 && PyErr_Occurred()) || x < -EXACT_FLOAT_INT || x > EXACT_FLOAT_INT)
            return cb_fallback();
        return PyFloat_FromDouble((double)x);
    }
    if (PyUnicode_CheckExact(v)) {
        PyObject *r = NULL;
        if (PyUnicode_Compare(v, p->s_inf) == 0)
            r = p->inf;
        else if (PyUnicode_Compare(v, p->s_ninf) == 0)
            r = p->ninf;
        else if (PyUnicode_Compare(v, p->s_nan) == 0)
            r = p->nan;
        if (r != NULL) {
            Py_INCREF(r);
            return r;
        }
    }
    return cb_fallback();
}

static PyObject *value_from(Walk *w, int ti, PyObject *v, int depth);

/* Check and convert value `v` of key `k` of dict `d` (type `ti`) in place; -1: Fallback. Storing under an
   existing key keeps the dict's size and order, which the caller checks. */
static int convert_entry(Walk *w, PyObject *d, PyObject *k, PyObject *v, int ti, int depth) {
    Py_INCREF(k);
    Py_INCREF(v);
    PyObject *value = value_from(w, ti, v, depth);
    int bad = value == NULL;
    if (value != NULL && value != v)
        bad = PyDict_SetItem(d, k, value) < 0;
    Py_XDECREF(value);
    Py_DECREF(v);
    Py_DECREF(k);
    return bad ? -1 : 0;
}

/* New reference to the checked (and converted) value `v` of type `ti`, which is not None; NULL: Fallback. */
static PyObject *value_from(Walk *w, int ti, PyObject *v, int depth) {
    Plan *p = w->p;
    TypeNode *t = &p->types[ti];
    switch (t->kind) {
    case K_BOOL:
        if (!PyBool_Check(v))
            return cb_fallback();
        Py_INCREF(v);
        return v;
    case K_I8:
    case K_I16:
    case K_I32:
    case K_I64:
        if (!int_in_range(v, t->kind))
            return cb_fallback();
        Py_INCREF(v);
        return v;
    case K_STRING:
        if (!PyUnicode_CheckExact(v))
            return cb_fallback();
        Py_INCREF(v);
        return v;
    case K_DOUBLE:
        return f64_from(p, v);
    case K_BINARY:
    case K_EXPR: {
        if (!PyUnicode_CheckExact(v))
            return cb_fallback();
        PyObject *r = PyObject_CallOneArg(t->kind == K_BINARY ? p->binary_cb : p->expr_cb, v);
        return r ? r : cb_fallback();
    }
    case K_ENUM: {
        if (!PyLong_CheckExact(v))
            return cb_fallback();
        PyObject *r = PyDict_GetItemWithError(t->enum_map, v);
        if (r == NULL)
            return cb_fallback();
        Py_INCREF(r);
        return r;
    }
    case K_STRUCT:
        return struct_from(w, t->a, v, depth);
    case K_LIST: {
        if (!PyList_CheckExact(v) || depth >= MAX_NEST)
            return cb_fallback();
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(v); i++) {
            PyObject *x = PyList_GET_ITEM(v, i);
            if (x == Py_None)
                return cb_fallback();
            Py_INCREF(x); /* a callback may run Python code: hold the item while it is converted */
            PyObject *y = value_from(w, t->a, x, depth + 1);
            Py_DECREF(x);
            if (y == NULL)
                return NULL;
            if (i >= PyList_GET_SIZE(v)) { /* cannot happen (nothing else holds the list): stay safe */
                Py_DECREF(y);
                return cb_fallback();
            }
            if (y == x)
                Py_DECREF(y);
            else
                PyList_SetItem(v, i, y); /* steals y, releases the parsed item */
        }
        Py_INCREF(v);
        return v;
    }
    case K_MAP: {
        if (!PyDict_CheckExact(v) || depth >= MAX_NEST)
            return cb_fallback();
        if (p->types[t->a].kind != K_STRING)
            return cb_fallback(); /* JSON keys are strings: other keys are pydantic's to judge */
        Py_ssize_t pos = 0, n = PyDict_GET_SIZE(v);
        PyObject *k, *x;
        while (PyDict_Next(v, &pos, &k, &x)) {
            if (x == Py_None || !PyUnicode_CheckExact(k))
                return cb_fallback();
            if (convert_entry(w, v, k, x, t->b, depth + 1) < 0 || PyDict_GET_SIZE(v) != n)
                return cb_fallback();
        }
        Py_INCREF(v);
        return v;
    }
    }
    return cb_fallback();
}

/* The model of `sp` holding `dict` and `fields` (both stolen), all three kept from the collector until the
   build ends. */
static PyObject *model_done(Walk *w, StructPlan *sp, PyObject *dict, PyObject *fields) {
    if (untracked_add(&w->u, dict) < 0 || untracked_add(&w->u, fields) < 0) {
        Py_DECREF(dict);
        Py_DECREF(fields);
        return cb_fallback();
    }
    PyObject *o = model_new(w->p, sp, dict, fields);
    if (o == NULL || untracked_add(&w->u, o) < 0) {
        Py_XDECREF(o);
        return cb_fallback();
    }
    return o;
}

static PyObject *union_from(Walk *w, StructPlan *sp, PyObject *d, int depth) {
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    if (PyDict_GET_SIZE(d) != 1 || !PyDict_Next(d, &pos, &k, &v) || v == Py_None)
        return cb_fallback();
    PyObject *index = PyDict_GetItemWithError(sp->members, k);
    if (index == NULL)
        return cb_fallback();
    FieldPlan *f = &sp->fields[PyLong_AsLong(index)];
    Py_INCREF(v);
    PyObject *value = value_from(w, f->type, v, depth);
    Py_DECREF(v);
    if (value == NULL)
        return NULL;
    PyObject *dict = PyDict_Copy(sp->tmpl);
    PyObject *fields = PySet_New(NULL);
    if (dict == NULL || fields == NULL || PyDict_SetItem(dict, f->name, value) < 0 || PySet_Add(fields, f->name) < 0) {
        Py_DECREF(value);
        Py_XDECREF(dict);
        Py_XDECREF(fields);
        return cb_fallback();
    }
    Py_DECREF(value);
    return model_done(w, sp, dict, fields);
}

/* whether str `a` equals str `b` (the parser's key and a field's interned name) */
static int same_str(PyObject *a, PyObject *b) {
    if (a == b)
        return 1;
    if (!PyUnicode_CheckExact(a) || PyUnicode_GET_LENGTH(a) != PyUnicode_GET_LENGTH(b) ||
        PyUnicode_KIND(a) != PyUnicode_KIND(b))
        return 0;
    return memcmp(PyUnicode_DATA(a), PyUnicode_DATA(b), PyUnicode_GET_LENGTH(a) * PyUnicode_KIND(a)) == 0;
}

/* The model of `sp` whose __dict__ is the parsed object `d` itself, its values checked and converted in place:
   taken when `d` holds exactly the fields, in the IDL's order (what torch and opwire write). NULL and no error
   set: `d` is not so (the general path decides); NULL with an error: Fallback. */
static PyObject *struct_in_place(Walk *w, StructPlan *sp, PyObject *d, int depth) {
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    int j = 0;
    if (PyDict_GET_SIZE(d) != sp->nfields)
        return NULL;
    while (PyDict_Next(d, &pos, &k, &v))
        if (!same_str(k, sp->fields[j++].name))
            return NULL;
    pos = 0;
    j = 0;
    while (PyDict_Next(d, &pos, &k, &v)) {
        FieldPlan *f = &sp->fields[j++];
        if (v == Py_None) {
            if (!f->nullable)
                return cb_fallback();
            continue;
        }
        if (convert_entry(w, d, k, v, f->type, depth + 1) < 0 || PyDict_GET_SIZE(d) != sp->nfields)
            return cb_fallback();
    }
    PyObject *fields = PySet_New(sp->names);
    if (fields == NULL)
        return cb_fallback();
    Py_INCREF(d);
    return model_done(w, sp, d, fields);
}

static PyObject *struct_from(Walk *w, int si, PyObject *d, int depth) {
    StructPlan *sp = &w->p->structs[si];
    if (!PyDict_CheckExact(d) || depth >= MAX_NEST)
        return cb_fallback();
    if (sp->is_union)
        return union_from(w, sp, d, depth + 1);
    PyObject *reused = struct_in_place(w, sp, d, depth);
    if (reused != NULL || PyErr_Occurred())
        return reused;
    PyObject *dict = _PyDict_NewPresized(sp->nfields);
    if (dict == NULL)
        return NULL;
    int missing = 0;
    for (int j = 0; j < sp->nfields; j++) {
        FieldPlan *f = &sp->fields[j];
        PyObject *v = PyDict_GetItemWithError(d, f->name), *value;
        if (v == NULL) {
            if (PyErr_Occurred() || f->required)
                goto fail;
            missing = 1;
            value = field_default(w->p, f);
        } else if (v == Py_None) {
            if (!f->nullable)
                goto fail;
            Py_INCREF(v);
            value = v;
        } else {
            Py_INCREF(v);
            value = value_from(w, f->type, v, depth + 1);
            Py_DECREF(v);
        }
        if (value == NULL)
            goto fail;
        int bad = PyDict_SetItem(dict, f->name, value) < 0;
        Py_DECREF(value);
        if (bad)
            goto fail;
    }
    PyObject *fields;
    if (!missing) {
        fields = PySet_New(sp->names);
    } else {
        fields = PySet_New(NULL);
        for (int j = 0; fields != NULL && j < sp->nfields; j++) {
            int has = PyDict_Contains(d, sp->fields[j].name);
            if (has < 0 || (has && PySet_Add(fields, sp->fields[j].name) < 0))
                Py_CLEAR(fields);
        }
    }
    if (fields == NULL)
        goto fail;
    return model_done(w, sp, dict, fields);
fail:
    Py_DECREF(dict);
    return cb_fallback();
}

/* json_build(plan, struct_index, parsed or JSON bytes) -> the model; Fallback when the plan does not take it. */
PyObject *json_build(PyObject *self, PyObject *args) {
    PyObject *capsule, *parsed;
    int si;
    (void)self;
    if (!PyArg_ParseTuple(args, "OiO", &capsule, &si, &parsed))
        return NULL;
    Plan *p = plan_struct(capsule, si);
    if (p == NULL)
        return NULL;
    Walk w = {p, {NULL, 0, 0}};
    PyObject *o = NULL;
    if (PyBytes_Check(parsed)) { /* JSON text: parsed here, its containers kept from the collector too */
        PyObject *tree = json_parse(PyBytes_AS_STRING(parsed), PyBytes_GET_SIZE(parsed), &w.u);
        if (tree != NULL) {
            o = struct_from(&w, si, tree, 0);
            Py_DECREF(tree);
        }
    } else {
        o = struct_from(&w, si, parsed, 0);
    }
    untracked_finish(&w.u);
    return o;
}
