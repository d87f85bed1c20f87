/* opwire's model builder in C: shared declarations (see plan.c for why this exists at all). */
#ifndef OPWIRE_CBUILD_H
#define OPWIRE_CBUILD_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* IDL type kinds, as opwire/serde/_cplan.py numbers them */
enum {
    K_BOOL = 1, K_I8, K_I16, K_I32, K_I64, K_DOUBLE, K_STRING, K_BINARY, K_ENUM, K_STRUCT, K_LIST, K_MAP, K_EXPR
};

/* default of a field the input leaves out */
enum { D_CONST = 0, D_FACTORY = 1, D_DEEPCOPY = 2 };

typedef struct {
    int kind;
    int a, b;            /* K_STRUCT: struct index; K_LIST: item type; K_MAP: key and value types */
    PyObject *enum_map;  /* K_ENUM: dict int -> member */
    long long least;     /* the fewest values one value of this type spends in a Thrift decode (a lower bound) */
} TypeNode;

typedef struct {
    PyObject *name;      /* interned field name */
    int type;            /* index into Plan.types */
    int required;        /* absent input: refused */
    int nullable;        /* JSON null taken (optional and not required) */
    int dkind;           /* D_CONST / D_FACTORY / D_DEEPCOPY */
    PyObject *dflt;      /* the default, its factory, or the value deepcopied */
    int id;              /* Thrift field id */
    int thrift_absent_ok;/* absent on the wire is canonical (the default is None) */
} FieldPlan;

#define MAX_FIELDS 128 /* per struct (the IDL has at most 33): bounds read_struct's stack frame */

typedef struct {
    PyObject *cls;       /* the pydantic model class */
    int is_union;
    int nfields;
    FieldPlan *fields;   /* in IDL (= field id) order */
    PyObject *names;     /* set of every field name (fields set when all are present) */
    PyObject *tmpl;      /* union: dict of every member -> None */
    PyObject *members;   /* union: dict member name -> field index (int) */
    int max_id;
    int *by_id;          /* Thrift: field id -> field index or -1, 0..max_id */
    int *order;          /* Thrift: field indices by increasing id (the wire's order) */
    PyObject *plain_cls; /* thrift_plain: the class of its plain objects (fast.py's `_plain`) */
    int plain_decline;   /* thrift_plain: declined wherever it occurs (its strings go through opwire's grammar) */
    int settled;         /* thrift_plain: field index declined when present (serde/_padding.py), or -1 */
} StructPlan;

typedef struct {
    int ntypes, nstructs;
    TypeNode *types;
    StructPlan *structs;
    PyObject *binary_cb;   /* str -> bytes (base64, strict) or raises */
    PyObject *expr_cb;     /* str -> str through opwire's grammar, or raises */
    PyObject *deepcopy;
    PyObject *inf, *ninf, *nan;          /* the float objects opwire's models hold */
    PyObject *s_inf, *s_ninf, *s_nan;    /* "Infinity", "-Infinity", "NaN" */
    PyObject *d_dict, *d_fields, *d_extra, *d_private;  /* BaseModel's slot descriptors */
} Plan;

extern PyObject *CB_Fallback;  /* the input is not taken: the checking path decides */
extern PyObject *CB_TooMany;   /* past the values budget of a Thrift decode */

Plan *plan_get(PyObject *capsule);
/* the plan in `capsule`, or NULL with an error set (not a plan; `si` not one of its structs) */
Plan *plan_struct(PyObject *capsule, int si);
PyObject *plan_compile(PyObject *self, PyObject *args);
PyObject *cb_fallback(void);
PyObject *model_new(Plan *p, StructPlan *sp, PyObject *dict, PyObject *fields_set);
PyObject *field_default(Plan *p, FieldPlan *f);

/* untracked building: see gc.c */
typedef struct {
    PyObject **items;
    Py_ssize_t n, cap;
} Untracked;
int untracked_add(Untracked *u, PyObject *o);
void untracked_finish(Untracked *u);

PyObject *json_parse(const char *data, Py_ssize_t n, Untracked *u);
PyObject *json_build(PyObject *self, PyObject *args);
PyObject *thrift_build(PyObject *self, PyObject *args);
PyObject *thrift_plain(PyObject *self, PyObject *args);
PyObject *json_write(PyObject *self, PyObject *args);
PyObject *thrift_skip(PyObject *self, PyObject *args);
PyObject *thrift_tensor(PyObject *self, PyObject *args);
PyObject *thrift_check(PyObject *self, PyObject *args);

#endif
