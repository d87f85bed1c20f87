/* Building without feeding the cyclic garbage collector, and without touching any process-wide setting.
 *
 * Every model, list and set a build creates is untracked by the collector as soon as it exists, every dict
 * once it is filled (storing a container in a dict tracks the dict again), each held here meanwhile: the
 * young-generation passes that the allocations trigger find almost nothing to scan and promote nothing to the
 * old generations (whose full passes walk every object of the process, torch's too). When the build ends,
 * whether it succeeded or not, each is tracked again (but dicts whose values cannot hold a cycle, which CPython
 * itself leaves untracked until such a value is stored): from then on the collector sees what it would have
 * seen, cycles a user creates later included.
 */
#include "cbuild.h"

int untracked_add(Untracked *u, PyObject *o) {
    if (u == NULL || !PyObject_IS_GC(o))
        return 0;
    if (u->n == u->cap) {
        Py_ssize_t cap = u->cap ? u->cap * 2 : 1024;
        PyObject **items = PyMem_Realloc(u->items, cap * sizeof(PyObject *));
        if (items == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        u->items = items;
        u->cap = cap;
    }
    if (PyObject_GC_IsTracked(o))
        PyObject_GC_UnTrack(o);
    Py_INCREF(o);
    u->items[u->n++] = o;
    return 0;
}

/* Whether CPython would keep dict `d` tracked: it untracks a dict whose values cannot hold a reference cycle
   (no value the collector may track) and tracks it again itself when such a value is stored in it. */
static int dict_needs_tracking(PyObject *d) {
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyDict_Next(d, &pos, &k, &v))
        if (PyObject_IS_GC(k) || (PyObject_IS_GC(v) && (!PyTuple_CheckExact(v) || PyObject_GC_IsTracked(v))))
            return 1;
    return 0;
}

void untracked_finish(Untracked *u) {
    for (Py_ssize_t i = 0; i < u->n; i++) {
        PyObject *o = u->items[i];
        if (Py_REFCNT(o) == 1 || PyObject_GC_IsTracked(o))
            continue; /* held only here (it dies below, untracked), or tracked already */
        if (PyDict_CheckExact(o) && !dict_needs_tracking(o))
            continue;
        PyObject_GC_Track(o);
    }
    /* released only once all are tracked again: a dealloc may run Python code (none of ours does) */
    for (Py_ssize_t i = 0; i < u->n; i++)
        Py_DECREF(u->items[i]);
    PyMem_Free(u->items);
    u->items = NULL;
    u->n = u->cap = 0;
}
