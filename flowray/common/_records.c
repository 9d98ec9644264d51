/* flowray.common._records: the C half of records' hot paths (rows and tuples).
 *
 * Row is a tuple subclass (rows are keys, and a Row key must be the same key as the tuple
 * of its values). In pure Python, its `[]` must be a Python method to take field names
 * (`row["name"]`), so `row[0]` costs about 8x a tuple's, and a row made with
 * `tuple.__new__(cls, values)` costs about 4x a tuple. This module gives Row a C base
 * type whose `[]` and attribute lookup take field names in C, the few batch operations
 * the data path runs per record (make rows; flatten a batch of tuples or rows of one shape
 * into one list of values for the wire, and back), and FieldChecks, the per-field type test of declared TUPLE and ROW types run
 * over a whole batch. flowray.common.types and flowray.common.type_conversion fall back
 * to a pure-Python twin of each when this module is not built (no C compiler where
 * flowray was installed) or FLOWRAY_PURE_PYTHON is set; both pass the same tests
 * (tests/unit/common/test_native_twins.py).
 *
 * The contract of each function is in its docstring below; the design note is
 * docs/internals/native.md.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "_records.h"

static PyTypeObject RowBase_Type;
static PyObject *str_fields; /* "_fields", interned */

static int check_row_class(PyObject *cls);

/* 0 when a function `name` of `expected` positional arguments got them; -1 and a
 * TypeError otherwise */
static int
check_nargs(const char *name, Py_ssize_t nargs, Py_ssize_t expected)
{
    if (nargs == expected) {
        return 0;
    }
    PyErr_Format(PyExc_TypeError, "%s() takes %zd arguments (%zd given)", name, expected,
                 nargs);
    return -1;
}

/* The field names of `self`: a new reference, or NULL with no error set when the row has
 * none (None). An error set means the lookup itself failed. */
static PyObject *
row_fields(PyObject *self)
{
    PyObject *fields = PyObject_GetAttr(self, str_fields);
    if (fields == NULL) {
        if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
            PyErr_Clear();
        }
        return NULL;
    }
    if (fields == Py_None) {
        Py_DECREF(fields);
        return NULL;
    }
    return fields;
}

/* The position of `name` in `fields` (compared with ==, as `name in fields`), -1 when it
 * is not there, -2 on an error. */
static Py_ssize_t
field_index(PyObject *fields, PyObject *name)
{
    if (PyTuple_CheckExact(fields)) {
        Py_ssize_t n = PyTuple_GET_SIZE(fields);
        for (Py_ssize_t i = 0; i < n; i++) {   /* identity first: names are interned */
            if (PyTuple_GET_ITEM(fields, i) == name) {
                return i;
            }
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            int eq = PyObject_RichCompareBool(PyTuple_GET_ITEM(fields, i), name, Py_EQ);
            if (eq < 0) {
                return -2;
            }
            if (eq) {
                return i;
            }
        }
        return -1;
    }
    int has = PySequence_Contains(fields, name);
    if (has <= 0) {
        return has < 0 ? -2 : -1;
    }
    return PySequence_Index(fields, name);
}

/* The value of field `name` (a new reference), or NULL with no error when the row has no
 * such field; NULL with an error set on a failure. */
static PyObject *
field_value(PyObject *self, PyObject *name)
{
    PyObject *fields = row_fields(self);
    if (fields == NULL) {
        return NULL;
    }
    Py_ssize_t i = field_index(fields, name);
    Py_DECREF(fields);
    if (i < 0) {
        return NULL;
    }
    if (i >= PyTuple_GET_SIZE(self)) {   /* more names than values: not a field */
        return NULL;
    }
    PyObject *v = PyTuple_GET_ITEM(self, i);
    Py_INCREF(v);
    return v;
}

/* row[item]: an int indexes as a tuple does (the common case: r[0] in a key selector); a
 * str is a field name (KeyError when the row has no such field); anything else (a slice,
 * an object with __index__) goes to the tuple's own subscript. */
static PyObject *
row_subscript(PyObject *self, PyObject *item)
{
    if (PyLong_CheckExact(item)) {
        Py_ssize_t i = PyLong_AsSsize_t(item);
        if (i == -1 && PyErr_Occurred()) {   /* too big for an index: the tuple's error */
            PyErr_Clear();
        }
        else {
            Py_ssize_t n = PyTuple_GET_SIZE(self);
            if (i < 0) {
                i += n;
            }
            if (i < 0 || i >= n) {
                PyErr_SetString(PyExc_IndexError, "tuple index out of range");
                return NULL;
            }
            PyObject *v = PyTuple_GET_ITEM(self, i);
            Py_INCREF(v);
            return v;
        }
    }
    else if (PyUnicode_Check(item)) {
        PyObject *v = field_value(self, item);
        if (v == NULL && !PyErr_Occurred()) {
            PyErr_SetObject(PyExc_KeyError, item);
        }
        return v;
    }
    return PyTuple_Type.tp_as_mapping->mp_subscript(self, item);
}

/* row.name: the class's and the instance's attributes first, then a field of that name
 * (names starting with "_" are never fields, so private lookups fail fast). */
static PyObject *
row_getattro(PyObject *self, PyObject *name)
{
    PyObject *v = PyObject_GenericGetAttr(self, name);
    if (v != NULL || !PyErr_ExceptionMatches(PyExc_AttributeError) || !PyUnicode_Check(name)
            || PyUnicode_GET_LENGTH(name) == 0 || PyUnicode_READ_CHAR(name, 0) == '_') {
        return v;
    }
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    v = field_value(self, name);
    if (v != NULL || PyErr_Occurred()) {
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        return v;
    }
    PyErr_Restore(type, value, tb);
    return NULL;
}

/* Setting an attribute (a row's own field names or row kind) gives it an instance dict,
 * which may hold anything: a row the collector stopped tracking is tracked again first. */
static int
row_setattro(PyObject *self, PyObject *name, PyObject *value)
{
    if (!PyObject_GC_IsTracked(self)) {
        PyObject_GC_Track(self);
    }
    return PyObject_GenericSetAttr(self, name, value);
}

static PyMappingMethods row_as_mapping = {
    0,              /* mp_length: the tuple's */
    row_subscript,  /* mp_subscript */
    0,              /* mp_ass_subscript */
};

PyDoc_STRVAR(RowBase_doc,
"The C base of flowray's Row: a tuple whose [] and attributes also take field names.");

static PyTypeObject RowBase_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "flowray.common._records.RowBase",
    .tp_doc = RowBase_doc,
    .tp_basicsize = 0,   /* the tuple's, set when the type is readied */
    .tp_itemsize = 0,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_as_mapping = &row_as_mapping,
    .tp_getattro = row_getattro,
    .tp_setattro = row_setattro,
};

/* Whether `v` can never be part of a reference cycle (the test CPython's collector uses to
 * stop tracking a tuple: not a container, or a tuple it stopped tracking). */
static inline int
is_atomic(PyObject *v)
{
    return !PyObject_IS_GC(v) || (PyTuple_CheckExact(v) && !PyObject_GC_IsTracked(v));
}

/* -- a free list of rows, as CPython keeps one for tuples ------------------------------
 *
 * A row of a named class is allocated and freed through a heap type's generic paths:
 * PyType_GenericAlloc (a fresh block, zeroed, counted towards the next collection) and
 * subtype_dealloc. Rows are made and dropped several times per record (the map's output,
 * the channel's receiving side, each new sum), so the classes flowray makes (Row and one
 * per schema: fast_class below) take their rows from a free list per length and give
 * them back to it, as tuples do: no allocation, and, as for tuples, a row taken from it
 * does not count towards the collector's next collection. A user's subclass of a Row
 * class frees through subtype_dealloc, which calls row_dealloc for the part it knows;
 * its rows are freed, not kept. */

#define FREE_MAX_LEN 16      /* rows of up to 16 fields */
#define FREE_MAX_COUNT 2000  /* kept per length (tuples keep 2000 too) */

static PyObject *free_rows[FREE_MAX_LEN + 1];
static int free_count[FREE_MAX_LEN + 1];
static Py_ssize_t fast_basicsize = -1, fast_dictoffset;  /* the layout of fast classes */

static void row_dealloc(PyObject *self);
static void row_free(PyObject *self, PyTypeObject *type);

/* a row of `n` fields of `cls` taken from the free list (its fields NULL, untracked by
 * the collector), or NULL (no error) when the list has none */
static inline PyObject *
take_free_row(PyTypeObject *cls, Py_ssize_t n)
{
    if (n <= 0 || n > FREE_MAX_LEN || free_rows[n] == NULL) {
        return NULL;
    }
    PyObject *op = free_rows[n];
    free_rows[n] = PyTuple_GET_ITEM(op, 0);
    PyTuple_SET_ITEM(op, 0, NULL);
    free_count[n]--;
    Py_SET_TYPE(op, cls);
    Py_INCREF(cls);        /* a heap type's instance holds its class */
    _Py_NewReference(op);
    return op;
}

static PyObject *
row_alloc(PyTypeObject *cls, Py_ssize_t n)
{
    PyObject *op = take_free_row(cls, n);
    if (op != NULL) {
        PyObject_GC_Track(op); /* as PyType_GenericAlloc gives it */
        return op;
    }
    return PyType_GenericAlloc(cls, n);
}

/* the slot of row `self`'s instance dict. A fast class's rows keep it at the offset all
 * fast classes share (fast_class checked it: counted back from the row's end, as for
 * every tuple subclass with a __dict__), found here without _PyObject_GetDictPtr's
 * lookups; any other row's is CPython's to find. */
static inline PyObject **
row_dict_ptr(PyObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    if (type->tp_dealloc == row_dealloc) {
        return (PyObject **)((char *)self + _PyObject_VAR_SIZE(type, Py_SIZE(self))
                             + fast_dictoffset);
    }
    return _PyObject_GetDictPtr(self);
}

/* A row the collector does not track holds only atomic values (row_from_items untracks
 * only those; row_setattro tracks a row again before its dict can hold anything): freeing
 * them cannot recurse through this row, so only tracked rows go through the trashcan,
 * which bounds that recursion for chains of rows in rows. */
static void
row_dealloc(PyObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    if (PyObject_GC_IsTracked(self)) {
        PyObject_GC_UnTrack(self);
        Py_TRASHCAN_BEGIN(self, row_dealloc)
        row_free(self, type);
        Py_TRASHCAN_END
    }
    else {
        row_free(self, type);
    }
}

/* row_dealloc's work on an untracked row: its dict and values released, the row kept on
 * the free list or freed */
static void
row_free(PyObject *self, PyTypeObject *type)
{
    PyObject **dictptr = row_dict_ptr(self);
    if (dictptr != NULL) {
        Py_CLEAR(*dictptr);
    }
    Py_ssize_t n = Py_SIZE(self);
    for (Py_ssize_t i = n; --i >= 0;) {
        Py_CLEAR(((PyTupleObject *)self)->ob_item[i]);
    }
    if (type->tp_dealloc == row_dealloc && n > 0 && n <= FREE_MAX_LEN
            && free_count[n] < FREE_MAX_COUNT) {
        PyTuple_SET_ITEM(self, 0, free_rows[n]);
        free_rows[n] = self;
        free_count[n]++;
    }
    else {
        type->tp_free(self);
    }
    Py_DECREF(type);   /* subtype_dealloc leaves it to this dealloc of a heap type */
}

PyDoc_STRVAR(fast_class_doc,
"fast_class(cls): make the Row class cls (flowray's own: Row and its classes per schema)\n"
"take its rows from a free list and give them back to it. Raises TypeError for a class\n"
"whose layout differs (slots of its own, a finalizer) or that is not a Row class.");

static PyObject *
records_fast_class(PyObject *module, PyObject *arg)
{
    if (check_row_class(arg) < 0) {
        return NULL;
    }
    PyTypeObject *cls = (PyTypeObject *)arg;
    if (!(cls->tp_flags & Py_TPFLAGS_HEAPTYPE) || cls->tp_finalize != NULL
            || cls->tp_del != NULL || cls->tp_weaklistoffset != 0 || Py_SIZE(cls) != 0
            || cls->tp_dictoffset >= 0 || (cls->tp_flags & Py_TPFLAGS_MANAGED_DICT)
            || (fast_basicsize >= 0 && (cls->tp_basicsize != fast_basicsize
                                        || cls->tp_dictoffset != fast_dictoffset))) {
        PyErr_Format(PyExc_TypeError, "fast_class(): %R has another layout", arg);
        return NULL;
    }
    fast_basicsize = cls->tp_basicsize;
    fast_dictoffset = cls->tp_dictoffset;
    cls->tp_alloc = row_alloc;
    cls->tp_dealloc = row_dealloc;
    PyType_Modified(cls);
    Py_RETURN_NONE;
}

/* a new instance of `cls` (a RowBase subtype) holding `items[0..n)` (new references).
 *
 * A row of atomic values (strings, numbers, None...) is not tracked by the cyclic garbage
 * collector, as CPython's collector stops tracking such plain tuples: nothing it holds can
 * lead back to it (its class, which it holds too, never refers to its instances). Rows in
 * batches and in state then cost the collector nothing; without this, every batch of rows
 * set off a collection that walked all of them, and the state's rows in every full one. */
static PyObject *
row_from_items(PyTypeObject *cls, PyObject *const *items, Py_ssize_t n)
{
    int atomic = 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!is_atomic(items[i])) {
            atomic = 0;
            break;
        }
    }
    PyObject *row = cls->tp_alloc == row_alloc ? take_free_row(cls, n) : NULL;
    if (row != NULL) {         /* untracked, as an atomic row stays */
        if (!atomic) {
            PyObject_GC_Track(row);
        }
    }
    else {
        row = cls->tp_alloc(cls, n);
        if (row == NULL) {
            return NULL;
        }
        if (atomic) {
            PyObject_GC_UnTrack(row);
        }
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_INCREF(items[i]);
        PyTuple_SET_ITEM(row, i, items[i]);
    }
    return row;
}

/* a new instance of `cls` holding the items of tuple `values` */
static PyObject *
new_row(PyTypeObject *cls, PyObject *values)
{
    return row_from_items(cls, ((PyTupleObject *)values)->ob_item, PyTuple_GET_SIZE(values));
}

static int
check_row_class(PyObject *cls)
{
    if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, &RowBase_Type)) {
        PyErr_Format(PyExc_TypeError, "expected a Row class, got %R", cls);
        return -1;
    }
    return 0;
}

/* [one(ctx, item) for item in seq] (a new list), or NULL at the first error */
static PyObject *
map_list(PyObject *seq_obj, const char *not_a_sequence,
         PyObject *(*one)(void *ctx, PyObject *item), void *ctx)
{
    PyObject *seq = PySequence_Fast(seq_obj, not_a_sequence);
    if (seq == NULL) {
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    PyObject *out = PyList_New(n);
    if (out != NULL) {
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *r = one(ctx, items[i]);
            if (r == NULL) {
                Py_CLEAR(out);
                break;
            }
            PyList_SET_ITEM(out, i, r);
        }
    }
    Py_DECREF(seq);
    return out;
}

/* a row of class ctx made of `values` (a tuple, or any iterable) */
static PyObject *
row_of(void *ctx, PyObject *values)
{
    if (PyTuple_Check(values)) {
        return new_row((PyTypeObject *)ctx, values);
    }
    PyObject *t = PySequence_Tuple(values);
    if (t == NULL) {
        return NULL;
    }
    PyObject *row = new_row((PyTypeObject *)ctx, t);
    Py_DECREF(t);
    return row;
}

PyDoc_STRVAR(make_doc,
"make(cls, values) -> a row of class cls holding the values (a tuple, or any iterable).\n\n"
"The same row as tuple.__new__(cls, values), made without the Python-level call.");

static PyObject *
records_make(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (check_nargs("make", nargs, 2) < 0) {
        return NULL;
    }
    if (check_row_class(args[0]) < 0) {
        return NULL;
    }
    return row_of(args[0], args[1]);
}

PyDoc_STRVAR(from_tuples_doc,
"from_tuples(cls, tuples) -> [make(cls, t) for t in tuples] (tuples: a list of tuples).");

static PyObject *
records_from_tuples(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (check_nargs("from_tuples", nargs, 2) < 0) {
        return NULL;
    }
    if (check_row_class(args[0]) < 0) {
        return NULL;
    }
    return map_list(args[1], "from_tuples() needs a sequence of tuples", row_of, args[0]);
}

/* Whether row `r` keeps attributes of its own (field names or a row kind set on it, in
 * its instance dict): 0 means that its class's are its. */
static int
has_own_attrs(PyObject *r)
{
    PyObject **dictptr = row_dict_ptr(r);
    return dictptr != NULL && *dictptr != NULL && PyDict_GET_SIZE(*dictptr) != 0;
}

PyDoc_STRVAR(flatten_doc,
"flatten(records, cls) -> (width, values), or None\n\n"
"A batch of records of one shape as the values of all its records, record after record:\n"
"for cls None, records that are plain tuples of one length (width, at least 1); for a\n"
"Row class, rows of exactly that class keeping nothing of their own (no field names or\n"
"row kind set on the row itself: they are the class's). None for any other batch. A\n"
"channel sends such a batch as one flat list (about half the pickling of its tuples).");

static PyObject *
records_flatten(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (check_nargs("flatten", nargs, 2) < 0) {
        return NULL;
    }
    PyObject *records = args[0], *cls = args[1];
    if (!PyList_Check(records) || PyList_GET_SIZE(records) == 0) {
        Py_RETURN_NONE;
    }
    Py_ssize_t n = PyList_GET_SIZE(records);
    PyTypeObject *want = cls == Py_None ? &PyTuple_Type : (PyTypeObject *)cls;
    PyObject *first = PyList_GET_ITEM(records, 0);
    if (Py_TYPE(first) != want) {
        Py_RETURN_NONE;
    }
    Py_ssize_t width = PyTuple_GET_SIZE(first);
    if (width == 0) {
        Py_RETURN_NONE;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *r = PyList_GET_ITEM(records, i);
        if (Py_TYPE(r) != want || PyTuple_GET_SIZE(r) != width
                || (cls != Py_None && has_own_attrs(r))) {
            Py_RETURN_NONE;
        }
    }
    PyObject *flat = PyList_New(n * width);
    if (flat == NULL) {
        return NULL;
    }
    PyObject **out = ((PyListObject *)flat)->ob_item;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject **items = ((PyTupleObject *)PyList_GET_ITEM(records, i))->ob_item;
        for (Py_ssize_t j = 0; j < width; j++) {
            Py_INCREF(items[j]);
            *out++ = items[j];
        }
    }
    PyObject *result = Py_BuildValue("(nN)", width, flat);
    return result;
}

PyDoc_STRVAR(unflatten_doc,
"unflatten(cls, width, values) -> list: flatten's records again, from its values: plain\n"
"tuples of width values (cls None), or rows of the Row class cls. ValueError when the\n"
"values are not a whole number of records.");

static PyObject *
records_unflatten(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (check_nargs("unflatten", nargs, 3) < 0) {
        return NULL;
    }
    PyObject *cls = args[0];
    if (cls != Py_None && check_row_class(cls) < 0) {
        return NULL;
    }
    Py_ssize_t width = PyNumber_AsSsize_t(args[1], PyExc_OverflowError);
    if (width == -1 && PyErr_Occurred()) {
        return NULL;
    }
    PyObject *seq = PySequence_Fast(args[2], "unflatten() needs a list of values");
    if (seq == NULL) {
        return NULL;
    }
    Py_ssize_t total = PySequence_Fast_GET_SIZE(seq);
    if (width <= 0 || total % width != 0) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "unflatten(): %zd values are not records of %zd",
                     total, width);
        return NULL;
    }
    Py_ssize_t n = total / width;
    PyObject **items = PySequence_Fast_ITEMS(seq);
    PyObject *out = PyList_New(n);
    if (out == NULL) {
        Py_DECREF(seq);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *r;
        if (cls == Py_None) {
            r = PyTuple_New(width);
            if (r != NULL) {
                for (Py_ssize_t j = 0; j < width; j++) {
                    PyObject *v = items[i * width + j];
                    Py_INCREF(v);
                    PyTuple_SET_ITEM(r, j, v);
                }
            }
        }
        else {
            r = row_from_items((PyTypeObject *)cls, items + i * width, width);
        }
        if (r == NULL) {
            Py_DECREF(out);
            Py_DECREF(seq);
            return NULL;
        }
        PyList_SET_ITEM(out, i, r);
    }
    Py_DECREF(seq);
    return out;
}

/* -- FieldChecks: a declared TUPLE or ROW type's per-field test, over a batch ---------- */

typedef struct {
    PyObject *type;     /* the exact type a value must have; NULL: any value */
    int is_int;         /* an int in [lo, hi] */
    long long lo, hi;
    int nullable;       /* None passes */
} FieldSpec;

typedef struct {
    PyObject_HEAD
    Py_ssize_t n;
    FieldSpec *specs;
    PyObject *general;  /* the per-record converter: for whatever the test does not pass */
    PyObject *cls;      /* the Row class made of a passing tuple; NULL: the tuple itself */
    PyObject *spec_tuple;
} FieldChecks;

static int
field_passes(const FieldSpec *spec, PyObject *v)
{
    if (spec->type == NULL) {
        return 1;
    }
    if (v == Py_None) {
        return spec->nullable;
    }
    if ((PyObject *)Py_TYPE(v) != spec->type) {
        return 0;
    }
    if (spec->is_int) {
        int overflow;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow) {
            return 0;
        }
        if (x == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
        return spec->lo <= x && x <= spec->hi;
    }
    return 1;
}

static int
fields_pass(FieldChecks *self, PyObject *t)
{
    if (PyTuple_GET_SIZE(t) != self->n) {
        return 0;
    }
    for (Py_ssize_t i = 0; i < self->n; i++) {
        if (!field_passes(&self->specs[i], PyTuple_GET_ITEM(t, i))) {
            return 0;
        }
    }
    return 1;
}

/* whether row `v` has field names of its own (in its instance dict) */
static int
has_own_fields(PyObject *v)
{
    PyObject **dictptr = row_dict_ptr(v);
    return dictptr != NULL && *dictptr != NULL
        && PyDict_GetItemWithError(*dictptr, str_fields) != NULL;
}

/* one record converted: a new reference, or NULL with an error */
static PyObject *
checks_one(FieldChecks *self, PyObject *v)
{
    if (PyTuple_CheckExact(v)) {
        if (fields_pass(self, v)) {
            if (self->cls == NULL) {
                Py_INCREF(v);
                return v;
            }
            return new_row((PyTypeObject *)self->cls, v);
        }
    }
    else if (self->cls != NULL && (PyObject *)Py_TYPE(v) == self->cls) {
        int own = has_own_fields(v);
        if (own < 0 || PyErr_Occurred()) {
            return NULL;
        }
        if (!own && fields_pass(self, v)) {
            Py_INCREF(v);
            return v;
        }
    }
    return PyObject_CallOneArg(self->general, v);
}

static PyObject *
checks_one_of(void *self, PyObject *v)
{
    return checks_one((FieldChecks *)self, v);
}

static PyObject *
checks_call(PyObject *op, PyObject *args, PyObject *kwds)
{
    FieldChecks *self = (FieldChecks *)op;
    PyObject *records;
    if (kwds != NULL && PyDict_GET_SIZE(kwds) != 0) {
        PyErr_SetString(PyExc_TypeError, "FieldChecks takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_UnpackTuple(args, "FieldChecks", 1, 1, &records)) {
        return NULL;
    }
    return map_list(records, "FieldChecks needs a list of records", checks_one_of, self);
}

static PyObject *
checks_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *specs, *general, *cls;
    static char *kwlist[] = {"specs", "general", "cls", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!OO:FieldChecks", kwlist,
                                     &PyTuple_Type, &specs, &general, &cls)) {
        return NULL;
    }
    if (!PyCallable_Check(general)) {
        PyErr_SetString(PyExc_TypeError, "FieldChecks: general must be callable");
        return NULL;
    }
    if (cls != Py_None && check_row_class(cls) < 0) {
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(specs);
    FieldChecks *self = (FieldChecks *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->specs = PyMem_Calloc(n ? n : 1, sizeof(FieldSpec));
    if (self->specs == NULL) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    self->n = n;
    Py_INCREF(specs);
    self->spec_tuple = specs;
    for (Py_ssize_t i = 0; i < n; i++) {
        /* (exact type or None, lo or None, hi or None, nullable) */
        PyObject *spec = PyTuple_GET_ITEM(specs, i);
        PyObject *t, *lo, *hi;
        int nullable;
        if (!PyArg_ParseTuple(spec, "OOOp:FieldChecks spec", &t, &lo, &hi, &nullable)) {
            Py_DECREF(self);
            return NULL;
        }
        FieldSpec *fs = &self->specs[i];
        fs->type = t == Py_None ? NULL : t;   /* kept alive by spec_tuple */
        fs->nullable = nullable;
        if (lo != Py_None || hi != Py_None) {
            fs->is_int = 1;
            fs->lo = PyLong_AsLongLong(lo);
            fs->hi = PyLong_AsLongLong(hi);
            if (PyErr_Occurred()) {
                Py_DECREF(self);
                return NULL;
            }
        }
        if (fs->type != NULL && !PyType_Check(fs->type)) {
            PyErr_Format(PyExc_TypeError, "FieldChecks: %R is not a type", t);
            Py_DECREF(self);
            return NULL;
        }
    }
    Py_INCREF(general);
    self->general = general;
    if (cls != Py_None) {
        Py_INCREF(cls);
        self->cls = cls;
    }
    return (PyObject *)self;
}

static int
checks_traverse(FieldChecks *self, visitproc visit, void *arg)
{
    Py_VISIT(self->general);
    Py_VISIT(self->cls);
    Py_VISIT(self->spec_tuple);
    return 0;
}

static int
checks_clear(FieldChecks *self)
{
    Py_CLEAR(self->general);
    Py_CLEAR(self->cls);
    Py_CLEAR(self->spec_tuple);
    return 0;
}

static void
checks_dealloc(FieldChecks *self)
{
    PyObject_GC_UnTrack(self);
    checks_clear(self);
    PyMem_Free(self->specs);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

PyDoc_STRVAR(checks_doc,
"FieldChecks(specs, general, cls): a declared TUPLE or ROW type applied to a list.\n\n"
"Called with a list of records, gives the list of general(record) for each, without\n"
"calling general where the per-field test passes: a plain tuple of len(specs) fields\n"
"whose every field passes (gives the tuple itself, or a row of class cls made of it),\n"
"or a row of class cls exactly, with no field names of its own, whose fields pass\n"
"(gives the row itself). specs: one (type, lo, hi, nullable) per field, a value\n"
"passing when it is None and nullable, or its type is `type` exactly (None: any value)\n"
"and, for an int, lo <= it <= hi (lo and hi None for other types). An error that\n"
"general raises for a record ends the call with it.");

static PyTypeObject FieldChecks_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "flowray.common._records.FieldChecks",
    .tp_doc = checks_doc,
    .tp_basicsize = sizeof(FieldChecks),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = checks_new,
    .tp_call = checks_call,
    .tp_dealloc = (destructor)checks_dealloc,
    .tp_traverse = (traverseproc)checks_traverse,
    .tp_clear = (inquiry)checks_clear,
};

static PyMethodDef records_methods[] = {
    {"make", (PyCFunction)(void (*)(void))records_make, METH_FASTCALL, make_doc},
    {"from_tuples", (PyCFunction)(void (*)(void))records_from_tuples, METH_FASTCALL,
     from_tuples_doc},
    {"flatten", (PyCFunction)(void (*)(void))records_flatten, METH_FASTCALL, flatten_doc},
    {"unflatten", (PyCFunction)(void (*)(void))records_unflatten, METH_FASTCALL,
     unflatten_doc},
    {"fast_class", records_fast_class, METH_O, fast_class_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef records_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "flowray.common._records",
    .m_doc = "The C half of records' hot paths: rows and tuples (see the source's header).",
    .m_size = -1,
    .m_methods = records_methods,
};

PyMODINIT_FUNC
PyInit__records(void)
{
    str_fields = PyUnicode_InternFromString("_fields");
    if (str_fields == NULL) {
        return NULL;
    }
    RowBase_Type.tp_base = &PyTuple_Type;
    if (PyType_Ready(&RowBase_Type) < 0) {
        return NULL;
    }
    if (PyType_Ready(&FieldChecks_Type) < 0) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&records_module);
    if (m == NULL) {
        return NULL;
    }
    Py_INCREF(&RowBase_Type);
    if (PyModule_AddObject(m, "RowBase", (PyObject *)&RowBase_Type) < 0) {
        Py_DECREF(&RowBase_Type);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&FieldChecks_Type);
    if (PyModule_AddObject(m, "FieldChecks", (PyObject *)&FieldChecks_Type) < 0) {
        Py_DECREF(&FieldChecks_Type);
        Py_DECREF(m);
        return NULL;
    }
    static FlowrayRowAPI api;   /* for other C modules: see _records.h */
    api.row_type = &RowBase_Type;
    api.row_from_items = row_from_items;
    api.has_own_attrs = has_own_attrs;
    api.fast_dealloc = row_dealloc;
    PyObject *capsule = PyCapsule_New(&api, FLOWRAY_ROW_API_NAME, NULL);
    if (capsule == NULL || PyModule_AddObject(m, "_C_API", capsule) < 0) {
        Py_XDECREF(capsule);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
