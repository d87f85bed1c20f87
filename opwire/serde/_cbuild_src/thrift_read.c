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
 *
 * A list or map whose items cannot all fit in what is left of the budget (each item spends its type's `least`
 * values at least, plan.c) ends in an error whatever its bytes: TooMany where the budget runs out, or Fallback where
 * the bytes stop being canonical first. Its items are read dry (`dry_items`): the same bytes taken, the same values
 * spent, the same error at the same place, nothing built (2 MB of compact bytes can declare a million structs: the
 * build up to the budget took a second).
 */
#include "thrift_wire.h"

static PyObject *read_value(Reader *r, int ti);
static PyObject *dry_value(Reader *r, int ti);

/* a leaf of type `t` (an enum's member, a value the IDL knows), as both reads take it */
static PyObject *leaf_value(Reader *r, TypeNode *t) {
    PyObject *v = leaf(r, t->kind);
    if (v == NULL || t->kind != K_ENUM)
        return v;
    PyObject *member = PyDict_GetItemWithError(t->enum_map, v);
    Py_DECREF(v);
    if (member == NULL)
        return cb_fallback();
    Py_INCREF(member);
    return member;
}

/* a struct read dry: None for the model read_struct would build */
static PyObject *dry_struct(Reader *r, int si) {
    StructPlan *sp = &r->p->structs[si];
    if (r->structs >= MAX_STRUCTS)
        return cb_fallback();
    if (spend(r) < 0)
        return NULL;
    PyObject *vals[MAX_FIELDS];
    r->structs++;
    int present = fields_of(r, sp, vals, dry_value, spend);
    for (int q = 0; q < sp->nfields; q++)
        Py_XDECREF(vals[q]);
    r->structs--;
    if (present < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* the `n` items of a list or map of type `t` whose header was read, dry, a map's keys held distinct as
   map_of holds them: 0, or -1 with the error building them would have met */
static int dry_items(Reader *r, TypeNode *t, Py_ssize_t n) {
    PyObject *keys = t->kind == K_MAP ? PySet_New(NULL) : NULL;
    if (t->kind == K_MAP && keys == NULL)
        return -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (t->kind == K_LIST) {
            PyObject *x = dry_value(r, t->a);
            if (x == NULL)
                return -1;
            Py_DECREF(x);
            continue;
        }
        PyObject *k = string(r, K_STRING), *v = k ? dry_value(r, t->b) : NULL;
        int bad = v == NULL || PySet_Add(keys, k) < 0 || PySet_GET_SIZE(keys) != i + 1;
        Py_XDECREF(k);
        Py_XDECREF(v);
        if (bad) {
            Py_DECREF(keys);
            cb_fallback(); /* (keeps a TooMany) */
            return -1;
        }
    }
    Py_XDECREF(keys);
    return 0;
}

static PyObject *dry_value(Reader *r, int ti) {
    TypeNode *t = &r->p->types[ti];
    Py_ssize_t n;
    if (t->kind == K_STRUCT)
        return dry_struct(r, t->a);
    if (spend(r) < 0)
        return NULL;
    if (t->kind != K_LIST && t->kind != K_MAP)
        return leaf_value(r, t);
    if ((t->kind == K_LIST ? list_header(r, t->a, &n) : map_header(r, t->a, t->b, &n)) < 0 || dry_items(r, t, n) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* a list or map of `n` items of type `t` whose header was read: on to build it when its items can fit in the
   budget; else its items read dry to the error that stops them (-1) */
static int within_budget(Reader *r, TypeNode *t, Py_ssize_t n) {
    long long least = r->p->types[t->kind == K_LIST ? t->a : t->b].least;
    if (n <= (r->limit - r->count) / least)
        return 0;
    if (dry_items(r, t, n) == 0)
        cb_fallback(); /* not reached: the items spent more than the budget holds */
    return -1;
}

static PyObject *read_struct(Reader *r, int si) {
    StructPlan *sp = &r->p->structs[si];
    if (r->structs >= MAX_STRUCTS)
        return cb_fallback();
    if (spend(r) < 0)
        return NULL;
    PyObject *vals[MAX_FIELDS]; /* by field index (the IDL's order); NULL: left out */
    PyObject *dict = NULL, *fields = NULL, *o = NULL;
    r->structs++;
    int present = fields_of(r, sp, vals, read_value, spend);
    if (present < 0)
        goto done;
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
    /* a dict the collector does not track holds no container (CPython leaves such a dict untracked): it stays so */
    if ((PyObject_GC_IsTracked(dict) && track_later(r, dict) < 0) || track_later(r, fields) < 0)
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
    if (t->kind == K_STRUCT)
        return read_struct(r, t->a);
    if (spend(r) < 0)
        return NULL;
    if (t->kind == K_LIST)
        return list_of(r, t, read_value, within_budget);
    if (t->kind == K_MAP)
        return map_of(r, t, read_value, within_budget);
    return leaf_value(r, t);
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
    Plan *p = plan_struct(capsule, si);
    PyObject *out = NULL;
    if (p == NULL)
        goto end;
    if (start < 0 || start > view.len) {
        PyErr_SetString(PyExc_IndexError, "opwire C plan: start out of range");
        goto end;
    }
    Reader r = {p, view.buf, start, view.len, compact, 0, limit, 0, {NULL, 0, 0}, 0, 0, {NULL, 0}};
    str_cache_init(&r.strs, view.len - start);
    PyObject *o = read_struct(&r, si);
    str_cache_free(&r.strs);
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
