/* flowray.state._value_cache: the C half of RocksDBValueAccessor.fold_cached
 * (flowray.state.rocksdb.value_accessor; _fold_cached_py there is its pure-Python twin):
 * the keyed reduce's fold of a batch straight into the accessor's write-behind cache, when
 * every key of the batch is cached, the way fold_reduce (operators/_keyed.c) folds into
 * the heap backend's dicts.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* state/key_types.py's PLAIN_KEY_TYPES: str, int, bytes, bool, None (exact types) */
static inline int
is_plain_key(PyObject *k)
{
    return PyUnicode_CheckExact(k) || PyLong_CheckExact(k) || PyBytes_CheckExact(k)
        || PyBool_Check(k) || k == Py_None;
}

/* state/value_codec.py's _MSGPACK_TYPES: int, float, str, bytes, bool, None (exact) */
static inline int
is_scalar(PyObject *v)
{
    return PyLong_CheckExact(v) || PyUnicode_CheckExact(v) || PyFloat_CheckExact(v)
        || PyBytes_CheckExact(v) || PyBool_Check(v) || v == Py_None;
}

/* value_codec.is_plain_value: a scalar or an exact tuple of scalars */
static inline int
is_plain_value(PyObject *v)
{
    if (is_scalar(v)) {
        return 1;
    }
    if (!PyTuple_CheckExact(v)) {
        return 0;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(v); i++) {
        if (!is_scalar(PyTuple_GET_ITEM(v, i))) {
            return 0;
        }
    }
    return 1;
}

PyDoc_STRVAR(fold_cached_doc,
"fold_cached(records, key_groups, start, end, key_of, reduce, cache, dirty, absent,\n"
"            stored_type) -> (keys, values, plain)\n\n"
"keys is [key_of(r) for r in records] (zip()'s length with key_groups). The batch folds\n"
"only when every key is of a plain key type, every key group is in [start, end] and\n"
"every key has an entry in the dict cache that is not of stored_type; else nothing\n"
"changes and values is None. The fold, record by record in order: the key's entry is\n"
"absent (no value: the record is the value) or its value (the value becomes\n"
"reduce(value, r)); cache[k] is set to it (to absent when it is None), k is added to the\n"
"set dirty (unless dirty is None) and the value is appended to values. plain: every\n"
"value set is a plain value (value_codec.is_plain_value). An error raised by key_of ends the call with it and\n"
"changes nothing; one raised by reduce ends the fold with it, the records before it\n"
"folded (as the Python loop it stands for does).");

static PyObject *
fold_cached(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 10) {
        PyErr_Format(PyExc_TypeError, "fold_cached() takes 10 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *records = args[0], *key_groups = args[1];
    PyObject *key_of = args[4], *reduce = args[5], *cache = args[6], *dirty = args[7];
    PyObject *absent = args[8], *stored_type = args[9];
    Py_ssize_t start = PyNumber_AsSsize_t(args[2], PyExc_OverflowError);
    if (start == -1 && PyErr_Occurred()) {
        return NULL;
    }
    Py_ssize_t end = PyNumber_AsSsize_t(args[3], PyExc_OverflowError);
    if (end == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (!PyDict_Check(cache) || !(dirty == Py_None || PySet_Check(dirty))) {
        PyErr_SetString(PyExc_TypeError,
                        "fold_cached(): cache must be a dict, dirty a set or None");
        return NULL;
    }
    PyObject *recs = PySequence_Fast(records, "fold_cached(): records must be a sequence");
    if (recs == NULL) {
        return NULL;
    }
    PyObject *kgs = PySequence_Fast(key_groups, "fold_cached(): key_groups must be a sequence");
    if (kgs == NULL) {
        Py_DECREF(recs);
        return NULL;
    }
    PyObject *keys = NULL, *out = NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(recs);
    if (PySequence_Fast_GET_SIZE(kgs) < n) {
        n = PySequence_Fast_GET_SIZE(kgs);
    }
    keys = PyList_New(n);
    if (keys == NULL) {
        goto fail;
    }
    /* the keys, and whether the batch can fold in the cache */
    int foldable = 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *k = PyObject_CallOneArg(key_of, PySequence_Fast_GET_ITEM(recs, i));
        if (k == NULL) {
            goto fail;
        }
        PyList_SET_ITEM(keys, i, k);
        if (!foldable) {
            continue;
        }
        PyObject *kg = PySequence_Fast_GET_ITEM(kgs, i);
        Py_ssize_t g = PyLong_CheckExact(kg) ? PyLong_AsSsize_t(kg) : -1;
        if (g == -1 && PyErr_Occurred()) {
            PyErr_Clear();   /* not a group of the range: left to the Python path's check */
        }
        if (g < start || g > end || !is_plain_key(k)) {
            foldable = 0;
            continue;
        }
        PyObject *entry = PyDict_GetItemWithError(cache, k);
        if (entry == NULL) {
            if (PyErr_Occurred()) {
                goto fail;
            }
            foldable = 0;
        }
        else if (Py_IS_TYPE(entry, (PyTypeObject *)stored_type)) {
            foldable = 0;
        }
    }
    if (!foldable) {
        Py_DECREF(recs);
        Py_DECREF(kgs);
        return Py_BuildValue("(NOO)", keys, Py_None, Py_True);
    }
    out = PyList_New(0);
    if (out == NULL) {
        goto fail;
    }
    int plain = 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *r = PySequence_Fast_GET_ITEM(recs, i);
        PyObject *k = PyList_GET_ITEM(keys, i);
        PyObject *cur = PyDict_GetItemWithError(cache, k);
        if (cur == NULL) {
            if (!PyErr_Occurred()) {
                PyErr_Format(PyExc_RuntimeError,
                             "fold_cached(): key %R left the cache during the fold", k);
            }
            goto fail;
        }
        PyObject *value;
        if (cur == absent) {
            Py_INCREF(r);
            value = r;
        }
        else {
            Py_INCREF(cur);
            PyObject *pair[2] = {cur, r};
            value = PyObject_Vectorcall(reduce, pair, 2, NULL);
            Py_DECREF(cur);
            if (value == NULL) {
                goto fail;
            }
        }
        if (plain && !is_plain_value(value)) {
            plain = 0;
        }
        if (PyDict_SetItem(cache, k, value == Py_None ? absent : value) < 0
                || (dirty != Py_None && PySet_Add(dirty, k) < 0)
                || PyList_Append(out, value) < 0) {
            Py_DECREF(value);
            goto fail;
        }
        Py_DECREF(value);
    }
    Py_DECREF(recs);
    Py_DECREF(kgs);
    return Py_BuildValue("(NNO)", keys, out, plain ? Py_True : Py_False);
fail:
    Py_XDECREF(keys);
    Py_XDECREF(out);
    Py_DECREF(recs);
    Py_DECREF(kgs);
    return NULL;
}

static PyMethodDef value_cache_methods[] = {
    {"fold_cached", (PyCFunction)(void (*)(void))fold_cached, METH_FASTCALL, fold_cached_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef value_cache_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "flowray.state._value_cache",
    .m_doc = "The C half of RocksDBValueAccessor.fold_cached (see the source's header).",
    .m_size = -1,
    .m_methods = value_cache_methods,
};

PyMODINIT_FUNC
PyInit__value_cache(void)
{
    return PyModule_Create(&value_cache_module);
}
