/* flowray.operators._keyed: the C half of flowray.operators.keyed (the keyed reduce).
 *
 * fold_reduce(...) is KeyedReduceOperator's fold of a batch into the heap backend's dicts
 * (see its docstring below), the loop its Python twin runs.
 *
 * FieldSum(field, general, name, reduce) is the reduce function behind `sum(field)` for
 * an int `field` (flowray.operators.keyed.field_aggregator builds it): called with the
 * key's value `a` and a new record `b`, it returns `a` with field `field` replaced by
 * `a[field] + b[field]`:
 *
 *   - `a` a plain tuple: a new tuple;
 *   - `a` a Row keeping no field names or row kind of its own (they are its class's): a
 *     new row of its class (so the same names and kind);
 *   - `field` 0 and `a` a plain int or float (a stream of numbers): `a + b`;
 *   - anything else (a field out of range, a dict, a row with names of its own...):
 *     `general(a, b)`, the pure-Python function that does what all of the above do.
 *
 * So FieldSum(field, general, ...)(a, b) == general(a, b) always; it only skips the
 * Python-level call on the cases a running sum meets per record. `reduce` is what it
 * pickles as (the call that builds it again, where the C half may be missing).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include "../flowray/common/_records.h"

static FlowrayRowAPI *row_api;

typedef struct {
    PyObject_HEAD
    Py_ssize_t field;
    PyObject *general;
    PyObject *name;
    PyObject *reduce;
    vectorcallfunc vectorcall;
} FieldSum;

/* b[i] as Python's `b[i]` gives it (a new reference) */
static PyObject *
item_of(PyObject *b, Py_ssize_t i)
{
    if ((PyTuple_CheckExact(b) || flowray_is_row(row_api, b))
            && i < PyTuple_GET_SIZE(b)) {
        PyObject *v = PyTuple_GET_ITEM(b, i);
        Py_INCREF(v);
        return v;
    }
    PyObject *index = PyLong_FromSsize_t(i);
    if (index == NULL) {
        return NULL;
    }
    PyObject *v = PyObject_GetItem(b, index);
    Py_DECREF(index);
    return v;
}

#define SMALL 16

/* `a` (a tuple or a row of class `cls`; cls NULL: a plain tuple) with field `i` summed;
 * NULL and no error: leave it to `general` */
static PyObject *
summed(FieldSum *self, PyTypeObject *cls, PyObject *a, PyObject *b)
{
    Py_ssize_t n = PyTuple_GET_SIZE(a);
    Py_ssize_t i = self->field < 0 ? self->field + n : self->field;
    if (i < 0 || i >= n) {
        return NULL;   /* general raises the IndexError */
    }
    PyObject *bv = item_of(b, i);
    if (bv == NULL) {
        return NULL;
    }
    PyObject *s = PyNumber_Add(PyTuple_GET_ITEM(a, i), bv);
    Py_DECREF(bv);
    if (s == NULL) {
        return NULL;
    }
    PyObject *out;
    if (cls == NULL) {
        out = PyTuple_New(n);
        if (out != NULL) {
            for (Py_ssize_t j = 0; j < n; j++) {
                PyObject *v = j == i ? s : PyTuple_GET_ITEM(a, j);
                Py_INCREF(v);
                PyTuple_SET_ITEM(out, j, v);
            }
        }
    }
    else {
        PyObject *small[SMALL];
        PyObject **items = n <= SMALL ? small : PyMem_Malloc(n * sizeof(PyObject *));
        if (items == NULL) {
            Py_DECREF(s);
            return PyErr_NoMemory();
        }
        memcpy(items, ((PyTupleObject *)a)->ob_item, n * sizeof(PyObject *));
        items[i] = s;
        out = row_api->row_from_items(cls, items, n);
        if (items != small) {
            PyMem_Free(items);
        }
    }
    Py_DECREF(s);
    return out;
}

static PyObject *
fieldsum_call2(FieldSum *self, PyObject *a, PyObject *b)
{
    PyObject *out = NULL;
    if (PyTuple_CheckExact(a)) {
        out = summed(self, NULL, a, b);
    }
    else if (flowray_is_row(row_api, a) && !row_api->has_own_attrs(a)) {
        out = summed(self, Py_TYPE(a), a, b);
    }
    else if (self->field == 0 && (PyLong_CheckExact(a) || PyFloat_CheckExact(a))) {
        return PyNumber_Add(a, b);
    }
    if (out != NULL || PyErr_Occurred()) {
        return out;
    }
    PyObject *args[2] = {a, b};
    return PyObject_Vectorcall(self->general, args, 2, NULL);
}

static PyObject *
fieldsum_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs != 2 || (kwnames != NULL && PyTuple_GET_SIZE(kwnames) != 0)) {
        PyErr_Format(PyExc_TypeError, "a field sum takes 2 positional arguments (%zd given)",
                     nargs);
        return NULL;
    }
    return fieldsum_call2((FieldSum *)self, args[0], args[1]);
}

static PyObject *
fieldsum_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    Py_ssize_t field;
    PyObject *general, *name, *reduce;
    static char *kwlist[] = {"field", "general", "name", "reduce", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "nOUO:FieldSum", kwlist,
                                     &field, &general, &name, &reduce)) {
        return NULL;
    }
    if (!PyCallable_Check(general)) {
        PyErr_SetString(PyExc_TypeError, "FieldSum: general must be callable");
        return NULL;
    }
    FieldSum *self = (FieldSum *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->field = field;
    Py_INCREF(general);
    self->general = general;
    Py_INCREF(name);
    self->name = name;
    Py_INCREF(reduce);
    self->reduce = reduce;
    self->vectorcall = fieldsum_vectorcall;
    return (PyObject *)self;
}

static int
fieldsum_traverse(FieldSum *self, visitproc visit, void *arg)
{
    Py_VISIT(self->general);
    Py_VISIT(self->reduce);
    return 0;
}

static int
fieldsum_clear(FieldSum *self)
{
    Py_CLEAR(self->general);
    Py_CLEAR(self->reduce);
    Py_CLEAR(self->name);
    return 0;
}

static void
fieldsum_dealloc(FieldSum *self)
{
    PyObject_GC_UnTrack(self);
    fieldsum_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
fieldsum_reduce(FieldSum *self, PyObject *unused)
{
    Py_INCREF(self->reduce);
    return self->reduce;
}

static PyObject *
fieldsum_repr(FieldSum *self)
{
    return PyUnicode_FromFormat("<field sum %U>", self->name);
}

static PyMethodDef fieldsum_methods[] = {
    {"__reduce__", (PyCFunction)fieldsum_reduce, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef fieldsum_members[] = {
    {"__name__", T_OBJECT, offsetof(FieldSum, name), READONLY, NULL},
    {"field", T_PYSSIZET, offsetof(FieldSum, field), READONLY, NULL},
    {"general", T_OBJECT, offsetof(FieldSum, general), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

PyDoc_STRVAR(fieldsum_doc,
"FieldSum(field, general, name, reduce): sum(field)'s reduce function (see the module).");

static PyTypeObject FieldSum_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "flowray.operators._keyed.FieldSum",
    .tp_doc = fieldsum_doc,
    .tp_basicsize = sizeof(FieldSum),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = fieldsum_new,
    .tp_dealloc = (destructor)fieldsum_dealloc,
    .tp_traverse = (traverseproc)fieldsum_traverse,
    .tp_clear = (inquiry)fieldsum_clear,
    .tp_vectorcall_offset = offsetof(FieldSum, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_repr = (reprfunc)fieldsum_repr,
    .tp_methods = fieldsum_methods,
    .tp_members = fieldsum_members,
};


/* -- fold_reduce: the keyed reduce's fold of a batch into the heap backend's dicts ------ */

/* whether `k` is of a type whose keys are kept as they are (state/key_types.py's
 * PLAIN_KEY_TYPES: str, int, bytes, bool, None) */
static inline int
is_plain_key(PyObject *k)
{
    return PyUnicode_CheckExact(k) || PyLong_CheckExact(k) || PyBytes_CheckExact(k)
        || PyBool_Check(k) || k == Py_None;
}

PyDoc_STRVAR(fold_reduce_doc,
"fold_reduce(records, key_groups, maps, start, key_of, reduce, canonical_key) -> list\n\n"
"Fold each record into its key's value, in order, and give the new values (the records\n"
"the reduce emits). For each record r and its key group kg: k = key_of(r); the dict\n"
"m = maps[kg - start] holds the key group's values; when k is not in m and is not of a\n"
"plain key type, k = canonical_key(k) (the form the backend keeps it in) and m is asked\n"
"again; a value there becomes reduce(value, r); m[k] is set to it (or to r, for a new\n"
"key). An error raised by key_of, reduce or canonical_key ends the fold with it, the\n"
"records before it folded (as the Python loop it stands for does).");

static PyObject *
fold_reduce(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7) {
        PyErr_Format(PyExc_TypeError, "fold_reduce() takes 7 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *records = args[0], *key_groups = args[1], *maps = args[2];
    PyObject *key_of = args[4], *reduce = args[5], *canonical = args[6];
    Py_ssize_t start = PyNumber_AsSsize_t(args[3], PyExc_OverflowError);
    if (start == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (!PyList_Check(maps)) {
        PyErr_SetString(PyExc_TypeError, "fold_reduce(): maps must be a list of dicts");
        return NULL;
    }
    PyObject *recs = PySequence_Fast(records, "fold_reduce(): records must be a sequence");
    if (recs == NULL) {
        return NULL;
    }
    PyObject *kgs = PySequence_Fast(key_groups, "fold_reduce(): key_groups must be a sequence");
    if (kgs == NULL) {
        Py_DECREF(recs);
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(recs);
    if (PySequence_Fast_GET_SIZE(kgs) < n) {
        n = PySequence_Fast_GET_SIZE(kgs);   /* zip()'s length */
    }
    PyObject *out = PyList_New(0);
    if (out == NULL) {
        goto fail;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *r = PySequence_Fast_GET_ITEM(recs, i);
        PyObject *kg = PySequence_Fast_GET_ITEM(kgs, i);
        PyObject *k = PyObject_CallOneArg(key_of, r);
        if (k == NULL) {
            goto fail;
        }
        Py_ssize_t g = PyNumber_AsSsize_t(kg, PyExc_IndexError);
        if (g == -1 && PyErr_Occurred()) {
            Py_DECREF(k);
            goto fail;
        }
        g -= start;
        Py_ssize_t nmaps = PyList_GET_SIZE(maps);
        if (g < 0) {
            g += nmaps;   /* as maps[kg - start] in Python */
        }
        if (g < 0 || g >= nmaps) {
            PyErr_SetString(PyExc_IndexError, "list index out of range");
            Py_DECREF(k);
            goto fail;
        }
        PyObject *m = PyList_GET_ITEM(maps, g);
        if (!PyDict_Check(m)) {
            PyErr_SetString(PyExc_TypeError, "fold_reduce(): maps must be a list of dicts");
            Py_DECREF(k);
            goto fail;
        }
        Py_INCREF(m);
        PyObject *cur = PyDict_GetItemWithError(m, k);
        if (cur == NULL && !PyErr_Occurred() && !is_plain_key(k)) {
            PyObject *ck = PyObject_CallOneArg(canonical, k);
            Py_DECREF(k);
            if (ck == NULL) {
                Py_DECREF(m);
                goto fail;
            }
            k = ck;
            cur = PyDict_GetItemWithError(m, k);
        }
        if (cur == NULL && PyErr_Occurred()) {
            Py_DECREF(k);
            Py_DECREF(m);
            goto fail;
        }
        PyObject *value;
        if (cur != NULL) {
            Py_INCREF(cur);
            PyObject *pair[2] = {cur, r};
            value = PyObject_Vectorcall(reduce, pair, 2, NULL);
            Py_DECREF(cur);
            if (value == NULL) {
                Py_DECREF(k);
                Py_DECREF(m);
                goto fail;
            }
        }
        else {
            Py_INCREF(r);
            value = r;
        }
        int err = PyDict_SetItem(m, k, value);
        Py_DECREF(k);
        Py_DECREF(m);
        if (err < 0 || PyList_Append(out, value) < 0) {
            Py_DECREF(value);
            goto fail;
        }
        Py_DECREF(value);
    }
    Py_DECREF(recs);
    Py_DECREF(kgs);
    return out;
fail:
    Py_XDECREF(out);
    Py_DECREF(recs);
    Py_DECREF(kgs);
    return NULL;
}

static PyMethodDef keyed_methods[] = {
    {"fold_reduce", (PyCFunction)(void (*)(void))fold_reduce, METH_FASTCALL, fold_reduce_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef keyed_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "flowray.operators._keyed",
    .m_doc = "The C half of flowray.operators.keyed (see the source's header).",
    .m_size = -1,
    .m_methods = keyed_methods,
};

PyMODINIT_FUNC
PyInit__keyed(void)
{
    row_api = flowray_import_row_api();
    if (row_api == NULL) {
        return NULL;
    }
    if (PyType_Ready(&FieldSum_Type) < 0) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&keyed_module);
    if (m == NULL) {
        return NULL;
    }
    Py_INCREF(&FieldSum_Type);
    if (PyModule_AddObject(m, "FieldSum", (PyObject *)&FieldSum_Type) < 0) {
        Py_DECREF(&FieldSum_Type);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
