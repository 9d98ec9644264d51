/* flowray.operators._field_sum: the C half of KeyedStream.sum(field) on tuples and rows.
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
    if ((PyTuple_CheckExact(b) || PyObject_TypeCheck(b, row_api->row_type))
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
    else if (PyObject_TypeCheck(a, row_api->row_type) && !row_api->has_own_attrs(a)) {
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
    .tp_name = "flowray.operators._field_sum.FieldSum",
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

static struct PyModuleDef field_sum_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "flowray.operators._field_sum",
    .m_doc = "The C half of KeyedStream.sum(field) on tuples and rows (see the source).",
    .m_size = -1,
};

PyMODINIT_FUNC
PyInit__field_sum(void)
{
    row_api = flowray_import_row_api();
    if (row_api == NULL) {
        return NULL;
    }
    if (PyType_Ready(&FieldSum_Type) < 0) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&field_sum_module);
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
