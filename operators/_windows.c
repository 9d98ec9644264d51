/* flowray.operators._windows: the C half of the window operator's batch path
 * (flowray.operators.windowing.aligned_panes: AlignedPanes._fold_tumbling and
 * _fold_sliding are its pure-Python twins, and their contract is fold_aligned's).
 *
 * fold_aligned folds a batch of records into the panes of tumbling or sliding event-time
 * windows kept in the heap backend's dicts (window first: maps[key group][window][key] ->
 * contents, flowray.state.heap_table.NamespaceFirstTable), and gives the panes it created; the user's
 * functions (fold, combine) and the window cache (window) are called as the twins call
 * them. Timestamps it cannot do in 64-bit arithmetic (not an int, or too near the ends of
 * int64) make it give None before it touches anything: the caller then runs the twin.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* the largest |timestamp| (and size, slide, offset) done here: far from int64's ends */
#define SAFE ((long long)1 << 61)

static int
as_safe_ll(PyObject *v, long long *out)
{
    if (!PyLong_CheckExact(v)) {
        return 0;
    }
    int overflow;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || x <= -SAFE || x >= SAFE) {
        return 0;
    }
    *out = x;
    return 1;
}

/* the dict maps[kg] as Python's by_group[kg] indexes the list (borrowed), or NULL */
static PyObject *
map_of(PyObject *maps, PyObject *kg)
{
    Py_ssize_t g = PyNumber_AsSsize_t(kg, PyExc_IndexError);
    if (g == -1 && PyErr_Occurred()) {
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(maps);
    if (g < 0) {
        g += n;
    }
    if (g < 0 || g >= n) {
        PyErr_SetString(PyExc_IndexError, "list index out of range");
        return NULL;
    }
    PyObject *m = PyList_GET_ITEM(maps, g);
    if (!PyDict_Check(m)) {   /* as the twin's m.get(k) on what is not a dict */
        PyErr_Format(PyExc_AttributeError, "'%.100s' object has no attribute 'get'",
                     Py_TYPE(m)->tp_name);
        return NULL;
    }
    return m;
}

/* the window starting at `s`: the cache's, or window(s)'s (a new reference) */
static PyObject *
window_at(PyObject *windows, PyObject *window, long long s)
{
    PyObject *start = PyLong_FromLongLong(s);
    if (start == NULL) {
        return NULL;
    }
    PyObject *w = PyDict_GetItemWithError(windows, start);
    if (w != NULL) {
        Py_INCREF(w);
    }
    else if (!PyErr_Occurred()) {
        w = PyObject_CallOneArg(window, start);
    }
    Py_DECREF(start);
    return w;
}

/* how combine folds a record into contents that are not None (fold_aligned's `how`) */
enum { CONTENTS_FIRST = 0, RECORD_FIRST = 1, APPEND = 2 };

/* the dict of keys of window w in the key group's dict m (borrowed), made and put in m
 * first if m has none (or None) for w, as the twins' m.get(w) and m[w] = {}; NULL on an
 * error */
static PyObject *
keys_of_window(PyObject *m, PyObject *w, Py_hash_t whash)
{
    PyObject *d = _PyDict_GetItem_KnownHash(m, w, whash);
    if (d == NULL && PyErr_Occurred()) {
        return NULL;
    }
    if (d != NULL && d != Py_None) {
        if (!PyDict_Check(d)) {   /* as the twins' d.get(k) on what is not a dict */
            PyErr_Format(PyExc_AttributeError, "'%.100s' object has no attribute 'get'",
                         Py_TYPE(d)->tp_name);
            return NULL;
        }
        return d;
    }
    d = PyDict_New();
    if (d == NULL) {
        return NULL;
    }
    int err = _PyDict_SetItem_KnownHash(m, w, d, whash);
    Py_DECREF(d);   /* m holds it */
    return err < 0 ? NULL : d;
}

/* fold record r into key k's contents in `keyed` (window w's dict of key -> contents, of
 * key group kg); -1 on an error. A pane created is appended to `created` as (k, kg, w). */
static int
fold_pane(PyObject *keyed, PyObject *k, Py_hash_t khash, PyObject *r, PyObject *kg,
          PyObject *w, PyObject *fold, PyObject *combine, int how, PyObject *created)
{
    PyObject *cur = _PyDict_GetItem_KnownHash(keyed, k, khash);
    PyObject *value;
    if (cur == NULL) {
        if (PyErr_Occurred()) {
            return -1;
        }
        PyObject *entry = PyTuple_Pack(3, k, kg, w);
        if (entry == NULL || PyList_Append(created, entry) < 0) {
            Py_XDECREF(entry);
            return -1;
        }
        Py_DECREF(entry);
        PyObject *args[2] = {Py_None, r};
        value = PyObject_Vectorcall(fold, args, 2, NULL);
    }
    else if (how == APPEND && PyList_CheckExact(cur)) {
        return PyList_Append(cur, r);   /* the contents stay the pane's */
    }
    else {
        Py_INCREF(cur);
        PyObject *args[2] = {cur, r};
        PyObject *callee = fold;
        if (cur != Py_None && combine != Py_None) {
            callee = combine;
            if (how == RECORD_FIRST) {
                args[0] = r;
                args[1] = cur;
            }
        }
        value = PyObject_Vectorcall(callee, args, 2, NULL);
        Py_DECREF(cur);
        if (value == cur) {   /* contents changed in place (an accumulator's add): the
                               * pane holds them already, no store */
            Py_DECREF(value);
            return 0;
        }
    }
    if (value == NULL) {
        return -1;
    }
    int err = _PyDict_SetItem_KnownHash(keyed, k, value, khash);
    Py_DECREF(value);
    return err;
}

/* fold r into key k's pane of window w in key group dict m (window first); -1 on an
 * error */
static int
fold_into_window(PyObject *m, PyObject *w, Py_hash_t whash, PyObject *k, Py_hash_t khash,
                 PyObject *r, PyObject *kg, PyObject *fold, PyObject *combine, int how,
                 PyObject *created)
{
    PyObject *keyed = keys_of_window(m, w, whash);
    if (keyed == NULL) {
        return -1;
    }
    Py_INCREF(keyed);   /* the user's functions may change m */
    int err = fold_pane(keyed, k, khash, r, kg, w, fold, combine, how, created);
    Py_DECREF(keyed);
    return err;
}

/* the windows of the latest start `first` and the starts slide, 2 slides, ... before it,
 * with their hashes: a sliding window's records mostly share their windows with the
 * record before them */
#define SLIDE_CACHE 16
typedef struct {
    long long first;
    int have;       /* whether `first` is set */
    int n;          /* windows[0..n) are held */
    PyObject *windows[SLIDE_CACHE];
    Py_hash_t hashes[SLIDE_CACHE];
} WindowRun;

static void
window_run_clear(WindowRun *run)
{
    for (int j = 0; j < run->n; j++) {
        Py_CLEAR(run->windows[j]);
    }
    run->n = 0;
}

/* the j-th window back from `first` (a new reference) and its hash; NULL on an error */
static PyObject *
window_run_get(WindowRun *run, PyObject *windows, PyObject *window, long long first,
               long long slide, int j, Py_hash_t *hash)
{
    if (!run->have || run->first != first) {
        window_run_clear(run);
        run->first = first;
        run->have = 1;
    }
    if (j < run->n) {
        *hash = run->hashes[j];
        Py_INCREF(run->windows[j]);
        return run->windows[j];
    }
    PyObject *w = window_at(windows, window, first - (long long)j * slide);
    if (w == NULL) {
        return NULL;
    }
    *hash = PyObject_Hash(w);
    if (*hash == -1) {
        Py_DECREF(w);
        return NULL;
    }
    if (j == run->n && j < SLIDE_CACHE) {
        Py_INCREF(w);
        run->windows[j] = w;
        run->hashes[j] = *hash;
        run->n = j + 1;
    }
    return w;
}

PyDoc_STRVAR(fold_aligned_doc,
"fold_aligned(maps, records, keys, key_groups, timestamps, size, slide, offset,\n"
"             windows, window, fold, combine, how) -> list of (key, key group, window),\n"
"             or None\n\n"
"AlignedPanes._fold_tumbling (size == slide) or _fold_sliding: fold each record into its\n"
"windows' panes in maps[key group][window][key] (window first: a key group's dict of\n"
"window -> {key: contents}, a window's dict made when it has none), latest window\n"
"first, with fold(None, r) for a new pane; for contents that are not None, by how:\n"
"0: combine(contents, r) (a reduce function), 1: combine(r, contents) (an aggregate\n"
"function's add), each when combine is not None; 2: contents.append(r) when the contents\n"
"are a list (the pane keeps them); fold(contents, r) otherwise. Each must equal\n"
"fold(contents, r), which the twins call. windows[start] (or\n"
"window(start)) is the window of a start. Gives the panes created, in order; None, and\n"
"nothing done, when a timestamp is not an int within 2**61 (the twin does it).");

static PyObject *
fold_aligned(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 13) {
        PyErr_Format(PyExc_TypeError, "fold_aligned() takes 13 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *maps = args[0], *windows = args[8], *window = args[9];
    PyObject *fold = args[10], *combine = args[11];
    long how_l = PyLong_AsLong(args[12]);
    if (how_l == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (how_l < CONTENTS_FIRST || how_l > APPEND) {
        PyErr_Format(PyExc_ValueError, "fold_aligned(): how must be 0, 1 or 2, not %ld", how_l);
        return NULL;
    }
    int how = (int)how_l;
    long long size, slide, offset;
    if (!PyList_Check(maps) || !PyDict_Check(windows)) {
        PyErr_SetString(PyExc_TypeError, "fold_aligned(): maps must be a list, windows a dict");
        return NULL;
    }
    if (!as_safe_ll(args[5], &size) || !as_safe_ll(args[6], &slide)
            || !as_safe_ll(args[7], &offset) || slide <= 0 || size <= 0) {
        Py_RETURN_NONE;
    }
    PyObject *recs = NULL, *keys = NULL, *kgs = NULL, *stamps = NULL, *created = NULL;
    long long *ts = NULL;
    PyObject *result = NULL;
    WindowRun run = {0};  /* sliding: the windows of the record before */
    recs = PySequence_Fast(args[1], "fold_aligned(): records must be a sequence");
    keys = recs ? PySequence_Fast(args[2], "fold_aligned(): keys must be a sequence") : NULL;
    kgs = keys ? PySequence_Fast(args[3], "fold_aligned(): key_groups must be a sequence") : NULL;
    stamps = kgs ? PySequence_Fast(args[4], "fold_aligned(): timestamps must be a sequence")
                 : NULL;
    if (stamps == NULL) {
        goto done;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(recs);   /* zip()'s length */
    if (PySequence_Fast_GET_SIZE(keys) < n) n = PySequence_Fast_GET_SIZE(keys);
    if (PySequence_Fast_GET_SIZE(kgs) < n) n = PySequence_Fast_GET_SIZE(kgs);
    if (PySequence_Fast_GET_SIZE(stamps) < n) n = PySequence_Fast_GET_SIZE(stamps);
    ts = PyMem_Malloc((n ? n : 1) * sizeof(long long));
    if (ts == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!as_safe_ll(PySequence_Fast_GET_ITEM(stamps, i), &ts[i])) {
            Py_INCREF(Py_None);
            result = Py_None;   /* the twin's */
            goto done;
        }
    }
    created = PyList_New(0);
    if (created == NULL) {
        goto done;
    }
    int tumbling = size == slide;
    long long last = 0;
    int have_last = 0;
    PyObject *w = NULL;   /* the window of `last` (tumbling) */
    Py_hash_t whash = 0;  /* and its hash */
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *r = PySequence_Fast_GET_ITEM(recs, i);
        PyObject *k = PySequence_Fast_GET_ITEM(keys, i);
        PyObject *kg = PySequence_Fast_GET_ITEM(kgs, i);
        long long rem = (ts[i] - offset) % slide;
        if (rem < 0) {
            rem += slide;   /* Python's %: the sign of the divisor */
        }
        long long first = ts[i] - rem;   /* the latest window's start */
        if (tumbling && (!have_last || first != last)) {
            Py_XDECREF(w);
            w = window_at(windows, window, first);
            if (w == NULL) {
                goto fail;
            }
            whash = PyObject_Hash(w);
            if (whash == -1) {
                goto fail;
            }
            last = first;
            have_last = 1;
        }
        PyObject *m = map_of(maps, kg);
        if (m == NULL) {
            goto fail;
        }
        Py_hash_t khash = PyObject_Hash(k);
        if (khash == -1) {
            goto fail;
        }
        Py_INCREF(m);   /* the user's functions may replace maps[kg] */
        if (tumbling) {
            int err = fold_into_window(m, w, whash, k, khash, r, kg, fold, combine, how,
                                       created);
            Py_DECREF(m);
            if (err < 0) {
                goto fail;
            }
            continue;
        }
        int j = 0;
        for (long long s = first; s > ts[i] - size; s -= slide, j++) {
            Py_hash_t sh;
            PyObject *sw = window_run_get(&run, windows, window, first, slide, j, &sh);
            int err = sw == NULL ? -1
                      : fold_into_window(m, sw, sh, k, khash, r, kg, fold, combine, how,
                                         created);
            Py_XDECREF(sw);
            if (err < 0) {
                Py_DECREF(m);
                goto fail;
            }
        }
        Py_DECREF(m);
    }
    Py_XDECREF(w);
    result = created;
    created = NULL;
    goto done;
fail:
    Py_XDECREF(w);
done:
    window_run_clear(&run);
    PyMem_Free(ts);
    Py_XDECREF(created);
    Py_XDECREF(recs);
    Py_XDECREF(keys);
    Py_XDECREF(kgs);
    Py_XDECREF(stamps);
    return result;
}

static PyMethodDef windows_methods[] = {
    {"fold_aligned", (PyCFunction)(void (*)(void))fold_aligned, METH_FASTCALL,
     fold_aligned_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef windows_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "flowray.operators._windows",
    .m_doc = "The C half of the window operator's batch path (see the source's header).",
    .m_size = -1,
    .m_methods = windows_methods,
};

PyMODINIT_FUNC
PyInit__windows(void)
{
    return PyModule_Create(&windows_module);
}
