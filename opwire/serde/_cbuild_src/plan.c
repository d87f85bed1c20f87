/* opwire's model builder in C: the plan table, model construction and the module.
 *
 * Why C of our own: a typed decode must build ~70k pydantic models for a 3 MB program. pydantic-core can only
 * build these models by validating (several times slower than torch's C++ decoder) or with a Python callback
 * per model (the builders of opwire/serde/_build.py: measured 0.77x torch's C++ decoder, the model building
 * alone ~100 ms of it). Building the models from C, driven by a plan table compiled in Python from the IDL
 * (opwire/serde/_cplan.py), removes the per-field interpreter work. The models are built exactly as _build.py
 * builds them: `__dict__`, `__pydantic_fields_set__`, no extra, no private.
 *
 * Files: plan.c (this: the plan, models, the module), json_parse.c (JSON text -> a parsed tree the collector
 * does not see), json_walk.c (parsed JSON -> models), thrift_read.c
 * (Thrift binary and compact bytes -> models), thrift_plain.c (the same bytes -> plain objects), thrift_wire.h (the
 * wire both read), gc.c (building without feeding the cyclic collector), json_write.c (models -> JSON bytes, the
 * other way, by the same plan).
 * Nothing here reports an error to the user: anything not taken raises Fallback (or TooMany for a Thrift
 * decode past its budget) and opwire's checking path decides and words the error.
 */
#include "cbuild.h"

PyObject *CB_Fallback = NULL;
PyObject *CB_TooMany = NULL;

PyObject *cb_fallback(void) {
    if (!PyErr_Occurred() || !PyErr_ExceptionMatches(CB_TooMany))
        PyErr_SetNone(CB_Fallback);
    return NULL;
}

static void plan_free(PyObject *capsule) {
    Plan *p = PyCapsule_GetPointer(capsule, "opwire.plan");
    if (p == NULL)
        return;
    if (p->types) {
        for (int i = 0; i < p->ntypes; i++)
            Py_XDECREF(p->types[i].enum_map);
        PyMem_Free(p->types);
    }
    if (p->structs) {
        for (int i = 0; i < p->nstructs; i++) {
            StructPlan *s = &p->structs[i];
            Py_XDECREF(s->cls);
            Py_XDECREF(s->names);
            Py_XDECREF(s->tmpl);
            Py_XDECREF(s->members);
            Py_XDECREF(s->plain_cls);
            if (s->fields) {
                for (int j = 0; j < s->nfields; j++) {
                    Py_XDECREF(s->fields[j].name);
                    Py_XDECREF(s->fields[j].dflt);
                }
                PyMem_Free(s->fields);
            }
            PyMem_Free(s->by_id);
            PyMem_Free(s->order);
        }
        PyMem_Free(p->structs);
    }
    PyObject **objs[] = {&p->binary_cb, &p->expr_cb, &p->deepcopy, &p->inf, &p->ninf, &p->nan, &p->s_inf,
                         &p->s_ninf, &p->s_nan, &p->d_dict, &p->d_fields, &p->d_extra, &p->d_private};
    for (size_t i = 0; i < sizeof(objs) / sizeof(objs[0]); i++)
        Py_XDECREF(*objs[i]);
    PyMem_Free(p);
}

Plan *plan_get(PyObject *capsule) {
    return (Plan *)PyCapsule_GetPointer(capsule, "opwire.plan");
}

Plan *plan_struct(PyObject *capsule, int si) {
    Plan *p = plan_get(capsule);
    if (p != NULL && (si < 0 || si >= p->nstructs)) {
        PyErr_SetString(PyExc_IndexError, "opwire C plan: struct index out of range");
        return NULL;
    }
    return p;
}

static int bad_plan(const char *what) {
    PyErr_Format(PyExc_ValueError, "opwire C plan: bad %s", what);
    return -1;
}

static int read_type(Plan *p, int i, PyObject *t) {
    TypeNode *n = &p->types[i];
    PyObject *emap;
    if (!PyTuple_Check(t) || !PyArg_ParseTuple(t, "iiiO", &n->kind, &n->a, &n->b, &emap))
        return bad_plan("type");
    if (n->kind < K_BOOL || n->kind > K_EXPR)
        return bad_plan("type kind");
    if (n->kind == K_STRUCT && (n->a < 0 || n->a >= p->nstructs))
        return bad_plan("struct index");
    if ((n->kind == K_LIST || n->kind == K_MAP) && (n->a < 0 || n->a >= p->ntypes))
        return bad_plan("item type");
    if (n->kind == K_MAP && (n->b < 0 || n->b >= p->ntypes))
        return bad_plan("map value type");
    if (n->kind == K_ENUM) {
        if (!PyDict_Check(emap))
            return bad_plan("enum map");
        Py_INCREF(emap);
        n->enum_map = emap;
    }
    return 0;
}

static int read_field(Plan *p, FieldPlan *f, PyObject *t) {
    PyObject *name, *dflt;
    if (!PyTuple_Check(t) || !PyArg_ParseTuple(t, "UiiiiOii", &name, &f->type, &f->required, &f->nullable,
                                               &f->dkind, &dflt, &f->id, &f->thrift_absent_ok))
        return bad_plan("field");
    if (f->type < 0 || f->type >= p->ntypes || f->id < 0 || f->id > 32767 || f->dkind < D_CONST ||
        f->dkind > D_DEEPCOPY)
        return bad_plan("field values");
    Py_INCREF(name);
    PyUnicode_InternInPlace(&name);
    f->name = name;
    Py_INCREF(dflt);
    f->dflt = dflt;
    return 0;
}

static int read_struct(Plan *p, StructPlan *s, PyObject *t) {
    PyObject *cls, *fields, *names, *tmpl, *members, *plain;
    if (!PyTuple_Check(t) || !PyArg_ParseTuple(t, "OpOOOOOpi", &cls, &s->is_union, &fields, &names, &tmpl, &members,
                                               &plain, &s->plain_decline, &s->settled))
        return bad_plan("struct");
    if (!PyType_Check(cls) || !PyTuple_Check(fields) || !PyAnySet_Check(names))
        return bad_plan("struct members");
    /* plain objects get their `__dict__` set in place (thrift_plain.c): a class with a dict slot of its own */
    if (!PyType_Check(plain) || ((PyTypeObject *)plain)->tp_dictoffset <= 0 ||
        PyType_HasFeature((PyTypeObject *)plain, Py_TPFLAGS_MANAGED_DICT))
        return bad_plan("plain class");
    Py_INCREF(plain);
    s->plain_cls = plain;
    if (s->is_union && (!PyDict_Check(tmpl) || !PyDict_Check(members)))
        return bad_plan("union");
    Py_INCREF(cls);
    s->cls = cls;
    Py_INCREF(names);
    s->names = names;
    Py_INCREF(tmpl);
    s->tmpl = tmpl;
    Py_INCREF(members);
    s->members = members;
    if (PyTuple_GET_SIZE(fields) > MAX_FIELDS)
        return bad_plan("field count");
    s->nfields = (int)PyTuple_GET_SIZE(fields);
    if (s->settled < -1 || s->settled >= s->nfields)
        return bad_plan("settled field");
    s->fields = PyMem_Calloc(s->nfields ? s->nfields : 1, sizeof(FieldPlan));
    if (s->fields == NULL)
        return -1;
    s->max_id = 0;
    for (int j = 0; j < s->nfields; j++) {
        if (read_field(p, &s->fields[j], PyTuple_GET_ITEM(fields, j)) < 0)
            return -1;
        if (s->fields[j].id > s->max_id)
            s->max_id = s->fields[j].id;
    }
    s->by_id = PyMem_Malloc(sizeof(int) * (s->max_id + 1));
    s->order = PyMem_Malloc(sizeof(int) * (s->nfields + 1));
    if (s->by_id == NULL || s->order == NULL)
        return -1;
    for (int k = 0; k <= s->max_id; k++)
        s->by_id[k] = -1;
    for (int j = 0; j < s->nfields; j++) {
        if (s->by_id[s->fields[j].id] != -1)
            return bad_plan("field ids (duplicate)");
        s->by_id[s->fields[j].id] = j;
    }
    int k = 0;
    for (int id = 0; id <= s->max_id; id++)
        if (s->by_id[id] >= 0)
            s->order[k++] = s->by_id[id];
    return 0;
}

/* Each type's `least`: the fewest values one of its values spends in a Thrift decode (thrift_read.c charges one
   for every struct, list, map and leaf): one for a leaf, list or map; for a struct one more than its fields that
   must be on the wire spend, for a union one more than its cheapest member. Starting from one everywhere and
   applying these rules a few times stays a lower bound at every step (the rules are monotone and the true least
   counts obey them), which is all thrift_read.c needs of it; a recursive struct only stops growing at the cap. */
static void least_values(Plan *p) {
    for (int i = 0; i < p->ntypes; i++)
        p->types[i].least = 1;
    for (int pass = 0, changed = 1; changed && pass < 16; pass++) {
        changed = 0;
        for (int i = 0; i < p->ntypes; i++) {
            if (p->types[i].kind != K_STRUCT)
                continue;
            StructPlan *s = &p->structs[p->types[i].a];
            long long fields = 0;
            for (int j = 0; j < s->nfields; j++) {
                long long c = p->types[s->fields[j].type].least;
                if (s->is_union)
                    fields = j == 0 || c < fields ? c : fields;
                else if (!s->fields[j].thrift_absent_ok)
                    fields += c;
            }
            long long least = fields < (1LL << 40) ? 1 + fields : 1LL << 40;
            changed |= least != p->types[i].least;
            p->types[i].least = least;
        }
    }
}

/* compile(types, structs, objects) -> capsule; see opwire/serde/_cplan.py for the layout */
PyObject *plan_compile(PyObject *self, PyObject *args) {
    PyObject *types, *structs, *objs;
    (void)self;
    if (!PyArg_ParseTuple(args, "O!O!O!", &PyTuple_Type, &types, &PyTuple_Type, &structs, &PyTuple_Type, &objs))
        return NULL;
    Plan *p = PyMem_Calloc(1, sizeof(Plan));
    if (p == NULL)
        return PyErr_NoMemory();
    PyObject *capsule = PyCapsule_New(p, "opwire.plan", plan_free);
    if (capsule == NULL) {
        PyMem_Free(p);
        return NULL;
    }
    p->ntypes = (int)PyTuple_GET_SIZE(types);
    p->nstructs = (int)PyTuple_GET_SIZE(structs);
    p->types = PyMem_Calloc(p->ntypes ? p->ntypes : 1, sizeof(TypeNode));
    p->structs = PyMem_Calloc(p->nstructs ? p->nstructs : 1, sizeof(StructPlan));
    if (p->types == NULL || p->structs == NULL) {
        Py_DECREF(capsule);
        return PyErr_NoMemory();
    }
    if (!PyArg_ParseTuple(objs, "OOOOOOOOOO", &p->binary_cb, &p->expr_cb, &p->deepcopy, &p->inf, &p->ninf,
                          &p->nan, &p->d_dict, &p->d_fields, &p->d_extra, &p->d_private)) {
        p->binary_cb = p->expr_cb = p->deepcopy = p->inf = p->ninf = p->nan = NULL;
        p->d_dict = p->d_fields = p->d_extra = p->d_private = NULL;
        Py_DECREF(capsule);
        return NULL;
    }
    PyObject **owned[] = {&p->binary_cb, &p->expr_cb, &p->deepcopy, &p->inf, &p->ninf,
                          &p->nan, &p->d_dict, &p->d_fields, &p->d_extra, &p->d_private};
    for (size_t i = 0; i < sizeof(owned) / sizeof(owned[0]); i++)
        Py_INCREF(*owned[i]);
    PyObject **descrs[] = {&p->d_dict, &p->d_fields, &p->d_extra, &p->d_private};
    for (size_t i = 0; i < 4; i++) {
        if (Py_TYPE(*descrs[i])->tp_descr_set == NULL) {
            bad_plan("slot descriptor");
            Py_DECREF(capsule);
            return NULL;
        }
    }
    p->s_inf = PyUnicode_InternFromString("Infinity");
    p->s_ninf = PyUnicode_InternFromString("-Infinity");
    p->s_nan = PyUnicode_InternFromString("NaN");
    if (p->s_inf == NULL || p->s_ninf == NULL || p->s_nan == NULL) {
        Py_DECREF(capsule);
        return NULL;
    }
    for (int i = 0; i < p->ntypes; i++) {
        if (read_type(p, i, PyTuple_GET_ITEM(types, i)) < 0) {
            Py_DECREF(capsule);
            return NULL;
        }
    }
    for (int i = 0; i < p->nstructs; i++) {
        if (read_struct(p, &p->structs[i], PyTuple_GET_ITEM(structs, i)) < 0) {
            Py_DECREF(capsule);
            return NULL;
        }
    }
    least_values(p);
    return capsule;
}

/* A model of `sp` holding `dict` and `fields_set` (both stolen), built as _build.py builds it. */
PyObject *model_new(Plan *p, StructPlan *sp, PyObject *dict, PyObject *fields_set) {
    PyTypeObject *cls = (PyTypeObject *)sp->cls;
    PyObject *o = cls->tp_alloc(cls, 0);
    if (o == NULL)
        goto fail;
    if (Py_TYPE(p->d_dict)->tp_descr_set(p->d_dict, o, dict) < 0 ||
        Py_TYPE(p->d_fields)->tp_descr_set(p->d_fields, o, fields_set) < 0 ||
        Py_TYPE(p->d_extra)->tp_descr_set(p->d_extra, o, Py_None) < 0 ||
        Py_TYPE(p->d_private)->tp_descr_set(p->d_private, o, Py_None) < 0) {
        Py_DECREF(o);
        goto fail;
    }
    Py_DECREF(dict);
    Py_DECREF(fields_set);
    return o;
fail:
    Py_DECREF(dict);
    Py_DECREF(fields_set);
    return NULL;
}

/* What pydantic fills in for a field the input left out. */
PyObject *field_default(Plan *p, FieldPlan *f) {
    if (f->dkind == D_CONST) {
        Py_INCREF(f->dflt);
        return f->dflt;
    }
    if (f->dkind == D_FACTORY)
        return PyObject_CallNoArgs(f->dflt);
    return PyObject_CallOneArg(p->deepcopy, f->dflt);
}

static PyMethodDef methods[] = {
    {"compile", plan_compile, METH_VARARGS, "compile(types, structs, objects) -> plan (see opwire/serde/_cplan.py)"},
    {"json_build", json_build, METH_VARARGS, "json_build(plan, struct_index, parsed) -> model"},
    {"thrift_build", thrift_build, METH_VARARGS,
     "thrift_build(plan, struct_index, data, start, compact, limit) -> (model, values)"},
    {"thrift_plain", thrift_plain, METH_VARARGS,
     "thrift_plain(plan, struct_index, data, compact, limit) -> (plain value, values or None)"},
    {"json_write", json_write, METH_VARARGS, "json_write(plan, struct_index, model) -> JSON bytes"},
    {"thrift_check", thrift_check, METH_VARARGS,
     "thrift_check(plan, struct_index, data, compact) -> True, or Fallback (see thrift_check.c)"},
    {"thrift_tensor", thrift_tensor, METH_VARARGS,
     "thrift_tensor(data, pos, compact, max_depth, budget) -> positions of a TensorValue or None (thrift_skip.c)"},
    {"thrift_skip", thrift_skip, METH_VARARGS,
     "thrift_skip(data, pos, compact, wire, depth, max_depth, budget) -> (end, values) or None (see thrift_skip.c)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "opwire.serde._cbuild",
                                    "opwire's model builder in C, driven by plans compiled from the IDL.", -1,
                                    methods};

PyMODINIT_FUNC PyInit__cbuild(void) {
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    CB_Fallback = PyErr_NewException("opwire.serde._cbuild.Fallback", NULL, NULL);
    CB_TooMany = PyErr_NewException("opwire.serde._cbuild.TooMany", NULL, NULL);
    if (CB_Fallback == NULL || CB_TooMany == NULL || PyModule_AddObjectRef(m, "Fallback", CB_Fallback) < 0 ||
        PyModule_AddObjectRef(m, "TooMany", CB_TooMany) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
