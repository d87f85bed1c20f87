/* Thrift binary and compact bytes -> plain objects for `thrift.decode_plain`, in one pass, per the plan.
 *
 * The Python path (opwire/serde/_thrift/fast.py `decode_plain`, then `count_values` under a budget) decodes with
 * Apache Thrift's C codec into the `_plain` classes, re-encodes to hold the input canonical, and counts again.
 * This reader takes exactly what that takes, and builds the same objects: the canonical bytes thrift_read.c
 * takes (thrift_wire.h), at most 64 nested structs, a union of exactly one member, required fields present;
 * then what the `_plain` classes check: a struct of a field that goes through opwire's expression grammar is
 * declined, and so is a settled field (serde/_padding.py) present; enum fields hold a value the IDL knows
 * (enums are left as ints). Each struct is an object of its `_plain` class whose `__dict__` holds the fields
 * present, in the wire's order (absent ones come from the class: the model's default, None where canonical).
 *
 * The count is `count_values`': fastbinary charges a struct and its own values when it ends (post-order) and
 * refuses a list or map longer than the budget when it reads its header. Whichever comes first decides, and
 * only once the whole input is taken: past the budget, the count is limit + 1; a container too long first, no
 * count (None: `decode` decides).
 */
#include "thrift_wire.h"

enum { E_NONE = 0, E_PAST = 1, E_LONG = 2 };

static PyObject *plain_value(Reader *r, int ti);

/* a list or map of `n` items: one value of the struct being read; longer than the budget: fastbinary's count
   stops here unless it stopped before */
static int container(Reader *r, TypeNode *t, Py_ssize_t n) {
    r->own++;
    if (n > r->limit && r->event == E_NONE)
        r->event = E_LONG;
    return 0;
}

/* an object of `sp`'s plain class holding `dict` (stolen) as its `__dict__` */
static PyObject *plain_object(Reader *r, StructPlan *sp, PyObject *dict) {
    PyTypeObject *cls = (PyTypeObject *)sp->plain_cls;
    PyObject *o = track_later(r, dict) < 0 ? NULL : cls->tp_alloc(cls, 0);
    if (o != NULL && (track_later(r, o) < 0 || PyObject_GenericSetDict(o, dict, NULL) < 0))
        Py_CLEAR(o);
    Py_DECREF(dict);
    return o;
}

/* a compact bool field's value: one of the struct's own */
static int own_value(Reader *r) {
    r->own++;
    return 0;
}

/* whether enum field `f`'s value `v` is a member of its enum */
static int known(Reader *r, FieldPlan *f, PyObject *v) {
    TypeNode *t = &r->p->types[f->type];
    if (t->kind != K_ENUM)
        return 1;
    PyObject *member = PyDict_GetItemWithError(t->enum_map, v);
    return member != NULL;
}

static PyObject *plain_struct(Reader *r, int si) {
    StructPlan *sp = &r->p->structs[si];
    if (r->structs >= MAX_STRUCTS || sp->plain_decline)
        return cb_fallback();
    PyObject *vals[MAX_FIELDS]; /* by field index (the IDL's order); NULL: left out */
    PyObject *o = NULL;
    long long outer = r->own; /* the enclosing struct's values so far */
    r->own = 0;
    r->structs++;
    int present = fields_of(r, sp, vals, plain_value, own_value);
    if (present < 0 || (sp->settled >= 0 && vals[sp->settled] != NULL))
        goto done; /* not canonical, or a settled field present (settled after the build) */
    for (int q = 0; q < sp->nfields; q++)
        if (vals[q] != NULL && !known(r, &sp->fields[q], vals[q]))
            goto done;
    PyObject *dict = _PyDict_NewPresized(present);
    if (dict == NULL)
        goto done;
    for (int q = 0; q < sp->nfields; q++) {
        int at = sp->order[q]; /* the wire's order, as the codec passes the fields */
        if (vals[at] != NULL && PyDict_SetItem(dict, sp->fields[at].name, vals[at]) < 0) {
            Py_DECREF(dict);
            goto done;
        }
    }
    o = plain_object(r, sp, dict);
    if (o != NULL) { /* the struct ends: fastbinary's count charges it and its own values now */
        r->count += 1 + r->own;
        if (r->count > r->limit && r->event == E_NONE)
            r->event = E_PAST;
    }
done:
    if (o == NULL)
        cb_fallback();
    for (int q = 0; q < sp->nfields; q++)
        Py_XDECREF(vals[q]);
    r->own = outer;
    r->structs--;
    return o;
}

static PyObject *plain_value(Reader *r, int ti) {
    TypeNode *t = &r->p->types[ti];
    if (t->kind == K_STRUCT)
        return plain_struct(r, t->a);
    if (t->kind == K_LIST)
        return list_of(r, t, plain_value, container);
    if (t->kind == K_MAP)
        return map_of(r, t, plain_value, container);
    if (t->kind == K_EXPR)
        return cb_fallback(); /* only in structs declined as a whole */
    r->own++;
    return leaf(r, t->kind); /* an enum as its int: a field's is checked by its struct (`known`) */
}

/* thrift_plain(plan, struct_index, data, compact, limit) -> (plain value, values counted or None) */
PyObject *thrift_plain(PyObject *self, PyObject *args) {
    PyObject *capsule;
    Py_buffer view;
    int si, compact;
    long long limit;
    (void)self;
    if (!PyArg_ParseTuple(args, "Oiy*pL", &capsule, &si, &view, &compact, &limit))
        return NULL;
    Plan *p = plan_struct(capsule, si);
    PyObject *out = NULL;
    if (p == NULL)
        goto end;
    Reader r = {p, view.buf, 0, view.len, compact, 0, limit, 0, {NULL, 0, 0}, 0, E_NONE, {NULL, 0}};
    str_cache_init(&r.strs, view.len);
    PyObject *o = plain_struct(&r, si);
    str_cache_free(&r.strs);
    if (o != NULL && r.pos != r.end) {
        Py_CLEAR(o);
        cb_fallback(); /* bytes left over */
    }
    untracked_finish(&r.u);
    if (o != NULL) {
        if (r.event == E_LONG)
            out = Py_BuildValue("(NO)", o, Py_None);
        else
            out = Py_BuildValue("(NL)", o, r.event == E_PAST ? limit + 1 : r.count);
    }
end:
    PyBuffer_Release(&view);
    return out;
}
