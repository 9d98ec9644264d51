/* flowray.operators._timers: the C half of the timer service's batch paths
 * (flowray.operators.timers: _register_timers_py and _take_due_timers_py are the
 * pure-Python twins, and their docstrings are the contract of both).
 *
 * register_timers adds a batch of event-time timers to the live set, the per-timestamp
 * FIFOs and the heap backend's timer dicts; take_due_timers takes one timestamp's due
 * timers out of the live set and the dicts. Where a key group's dict is held by a pending
 * snapshot (or out of range), both call back into Python (put / remove), as the twins do.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* maps[off] when 0 <= off < len(maps) and shared[off] is None (borrowed), else NULL with
 * no error; NULL with an error when kg is not an int */
static PyObject *
writable_map(PyObject *maps, PyObject *shared, Py_ssize_t first, PyObject *kg, int *err)
{
    *err = 0;
    Py_ssize_t g = PyNumber_AsSsize_t(kg, NULL);   /* clipped: out of range either way */
    if (g == -1 && PyErr_Occurred()) {
        *err = 1;
        return NULL;
    }
    Py_ssize_t off = g - first;
    if (off < 0 || off >= PyList_GET_SIZE(maps) || off >= PyList_GET_SIZE(shared)
            || PyList_GET_ITEM(shared, off) != Py_None) {
        return NULL;
    }
    PyObject *m = PyList_GET_ITEM(maps, off);
    if (!PyDict_Check(m)) {
        PyErr_Format(PyExc_TypeError, "a timer dict is a %.100s, not a dict",
                     Py_TYPE(m)->tp_name);
        *err = 1;
        return NULL;
    }
    return m;
}

/* The FIFOs a batch appends to, a few at a time (a sliding window's new panes alternate
 * between the ends of its windows): per FIFO its timestamp and the timers for it, added
 * in one extend when the slot is reused or the batch ends. Order within a FIFO is the
 * batch's; different FIFOs are independent. */
#define FIFO_SLOTS 4
typedef struct {
    PyObject *ts;        /* NULL: the slot is free */
    PyObject *bucket;
    PyObject *pending;   /* a list */
} FifoSlot;

/* slot's pending timers into its FIFO, and the slot freed; -1 on an error (freed too) */
static int
slot_flush(FifoSlot *slot)
{
    int err = 0;
    if (slot->ts != NULL && PyList_GET_SIZE(slot->pending) > 0) {
        PyObject *r = PyObject_CallMethod(slot->bucket, "extend", "O", slot->pending);
        if (r == NULL) {
            err = -1;
        }
        Py_XDECREF(r);
    }
    Py_CLEAR(slot->ts);
    Py_CLEAR(slot->bucket);
    Py_CLEAR(slot->pending);
    return err;
}

/* every slot flushed; on an error the first error is kept and the rest still flushed */
static int
slots_flush(FifoSlot *slots)
{
    int err = 0;
    for (int j = 0; j < FIFO_SLOTS; j++) {
        if (err) {
            PyObject *type, *value, *tb;
            PyErr_Fetch(&type, &value, &tb);
            if (slot_flush(&slots[j]) < 0) {
                PyErr_Clear();
            }
            PyErr_Restore(type, value, tb);
        }
        else if (slot_flush(&slots[j]) < 0) {
            err = -1;
        }
    }
    return err;
}

/* the pending list of ts's FIFO (borrowed; the FIFO made and its timestamp pushed on
 * `times` when new), or NULL on an error */
static PyObject *
slot_for(FifoSlot *slots, int *next, PyObject *ts, PyObject *buckets, PyObject *times,
         PyObject *heappush, PyObject *deque_type)
{
    for (int j = 0; j < FIFO_SLOTS; j++) {
        if (slots[j].ts == NULL) {
            continue;
        }
        int same = slots[j].ts == ts ? 1 : PyObject_RichCompareBool(ts, slots[j].ts, Py_EQ);
        if (same < 0) {
            return NULL;
        }
        if (same) {
            return slots[j].pending;
        }
    }
    FifoSlot *slot = &slots[*next];
    *next = (*next + 1) % FIFO_SLOTS;
    if (slot_flush(slot) < 0) {
        return NULL;
    }
    PyObject *b = PyDict_GetItemWithError(buckets, ts);   /* _TimerQueue.add */
    if (b != NULL) {
        Py_INCREF(b);
    }
    else {
        if (PyErr_Occurred()) {
            return NULL;
        }
        b = PyObject_CallNoArgs(deque_type);
        if (b == NULL || PyDict_SetItem(buckets, ts, b) < 0) {
            Py_XDECREF(b);
            return NULL;
        }
        PyObject *hargs[2] = {times, ts};
        PyObject *r = PyObject_Vectorcall(heappush, hargs, 2, NULL);
        if (r == NULL) {
            Py_DECREF(b);
            return NULL;
        }
        Py_DECREF(r);
    }
    PyObject *pending = PyList_New(0);
    if (pending == NULL) {
        Py_DECREF(b);
        return NULL;
    }
    Py_INCREF(ts);
    slot->ts = ts;
    slot->bucket = b;
    slot->pending = pending;
    return pending;
}

PyDoc_STRVAR(register_timers_doc,
"register_timers(timers, live, maps, shared, first, buckets, times, heappush, put)\n"
"    -> (key, key group) or None\n\n"
"timers._register_timers_py: the same arguments, effects and result.");

static PyObject *
register_timers(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 9) {
        PyErr_Format(PyExc_TypeError, "register_timers() takes 9 arguments (%zd given)",
                     nargs);
        return NULL;
    }
    PyObject *live = args[1], *maps = args[2], *shared = args[3];
    PyObject *buckets = args[5], *times = args[6], *heappush = args[7], *put = args[8];
    if (!PySet_Check(live) || !PyList_Check(maps) || !PyList_Check(shared)
            || !PyDict_Check(buckets)) {
        PyErr_SetString(PyExc_TypeError,
                        "register_timers(): live must be a set, maps and shared lists, "
                        "buckets a dict");
        return NULL;
    }
    Py_ssize_t first = PyNumber_AsSsize_t(args[4], PyExc_OverflowError);
    if (first == -1 && PyErr_Occurred()) {
        return NULL;
    }
    PyObject *seq = PySequence_Fast(args[0], "register_timers(): timers must be a sequence");
    if (seq == NULL) {
        return NULL;
    }
    FifoSlot slots[FIFO_SLOTS] = {{0}};
    int next_slot = 0;
    PyObject *newest = NULL, *result = NULL;
    PyObject *deque_type = PyObject_GetAttrString(module, "_deque");
    if (deque_type == NULL) {
        goto done;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *t = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 4) {
            PyErr_SetString(PyExc_ValueError,
                            "a timer is (key, key group, namespace, timestamp)");
            goto done;
        }
        PyObject *key = PyTuple_GET_ITEM(t, 0), *kg = PyTuple_GET_ITEM(t, 1);
        PyObject *ns = PyTuple_GET_ITEM(t, 2), *ts = PyTuple_GET_ITEM(t, 3);
        PyObject *entry = PyTuple_Pack(3, ts, key, ns);
        if (entry == NULL) {
            goto done;
        }
        int known = PySet_Contains(live, entry);
        if (known != 0) {
            Py_DECREF(entry);
            if (known < 0) {
                goto done;
            }
            continue;
        }
        int err;
        PyObject *m = writable_map(maps, shared, first, kg, &err);
        if (err) {
            Py_DECREF(entry);
            goto done;
        }
        if (m != NULL) {
            PyObject *name = PyTuple_Pack(2, ts, ns);
            PyObject *d = name == NULL ? NULL : PyDict_GetItemWithError(m, key);
            int bad = name == NULL || (d == NULL && PyErr_Occurred());
            if (!bad && d != NULL && d != Py_None) {
                if (!PyDict_Check(d)) {   /* as the twin's d[...] = None on a non-dict */
                    bad = PyObject_SetItem(d, name, Py_None) < 0;
                }
                else {
                    bad = PyDict_SetItem(d, name, Py_None) < 0;
                }
            }
            else if (!bad) {
                PyObject *nd = PyDict_New();
                bad = nd == NULL || PyDict_SetItem(nd, name, Py_None) < 0
                      || PyDict_SetItem(m, key, nd) < 0;
                Py_XDECREF(nd);
            }
            Py_XDECREF(name);
            if (bad) {
                Py_DECREF(entry);
                goto done;
            }
            Py_XDECREF(newest);
            newest = PyTuple_Pack(2, key, kg);
            if (newest == NULL) {
                Py_DECREF(entry);
                goto done;
            }
        }
        else {
            /* the backend's own path (it writes the state, never the FIFOs) */
            PyObject *pargs[4] = {key, kg, ts, ns};
            PyObject *r = PyObject_Vectorcall(put, pargs, 4, NULL);
            if (r == NULL) {
                Py_DECREF(entry);
                goto done;
            }
            Py_DECREF(r);
            Py_CLEAR(newest);
        }
        int added = PySet_Add(live, entry);
        Py_DECREF(entry);
        if (added < 0) {
            goto done;
        }
        PyObject *pending = slot_for(slots, &next_slot, ts, buckets, times, heappush,
                                     deque_type);
        PyObject *timer = pending == NULL ? NULL : PyTuple_Pack(3, key, kg, ns);
        if (timer == NULL || PyList_Append(pending, timer) < 0) {
            Py_XDECREF(timer);
            goto done;
        }
        Py_DECREF(timer);
    }
    if (slots_flush(slots) < 0) {
        goto done;
    }
    if (newest != NULL) {
        result = newest;
        newest = NULL;
    }
    else {
        result = Py_None;
        Py_INCREF(result);
    }
done:
    /* what went into `live` before an error goes into its FIFO too, as the twin's */
    if (result == NULL) {
        slots_flush(slots);
    }
    Py_XDECREF(deque_type);
    Py_XDECREF(newest);
    Py_DECREF(seq);
    return result;
}

PyDoc_STRVAR(take_due_timers_doc,
"take_due_timers(timestamp, timers, live, maps, shared, first, remove)\n"
"    -> list of (key, key group, namespace)\n\n"
"timers._take_due_timers_py: the same arguments, effects and result.");

static PyObject *
take_due_timers(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7) {
        PyErr_Format(PyExc_TypeError, "take_due_timers() takes 7 arguments (%zd given)",
                     nargs);
        return NULL;
    }
    PyObject *ts = args[0], *live = args[2], *maps = args[3], *shared = args[4];
    PyObject *remove = args[6];
    if (!PySet_Check(live) || !PyList_Check(maps) || !PyList_Check(shared)) {
        PyErr_SetString(PyExc_TypeError,
                        "take_due_timers(): live must be a set, maps and shared lists");
        return NULL;
    }
    Py_ssize_t first = PyNumber_AsSsize_t(args[5], PyExc_OverflowError);
    if (first == -1 && PyErr_Occurred()) {
        return NULL;
    }
    PyObject *seq = PySequence_Fast(args[1], "take_due_timers(): timers must be a sequence");
    if (seq == NULL) {
        return NULL;
    }
    PyObject *due = PyList_New(0);
    if (due == NULL) {
        Py_DECREF(seq);
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *timer = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyTuple_Check(timer) || PyTuple_GET_SIZE(timer) != 3) {
            PyErr_SetString(PyExc_ValueError, "a due timer is (key, key group, namespace)");
            goto fail;
        }
        PyObject *key = PyTuple_GET_ITEM(timer, 0), *kg = PyTuple_GET_ITEM(timer, 1);
        PyObject *ns = PyTuple_GET_ITEM(timer, 2);
        PyObject *entry = PyTuple_Pack(3, ts, key, ns);
        if (entry == NULL) {
            goto fail;
        }
        int gone = PySet_Discard(live, entry);   /* 1: it was live */
        Py_DECREF(entry);
        if (gone < 0) {
            goto fail;
        }
        if (gone == 0) {
            continue;   /* deleted */
        }
        if (PyList_Append(due, timer) < 0) {
            goto fail;
        }
        int err;
        PyObject *m = writable_map(maps, shared, first, kg, &err);
        if (err) {
            goto fail;
        }
        if (m == NULL) {
            PyObject *rargs[4] = {key, kg, ts, ns};
            PyObject *r = PyObject_Vectorcall(remove, rargs, 4, NULL);
            if (r == NULL) {
                goto fail;
            }
            Py_DECREF(r);
            continue;
        }
        PyObject *d = PyDict_GetItemWithError(m, key);   /* HeapMapState.remove */
        if (d == NULL) {
            if (PyErr_Occurred()) {
                goto fail;
            }
            continue;
        }
        if (d == Py_None) {
            continue;
        }
        if (!PyDict_Check(d)) {
            PyErr_Format(PyExc_TypeError, "a key's timers are a %.100s, not a dict",
                         Py_TYPE(d)->tp_name);
            goto fail;
        }
        PyObject *name = PyTuple_Pack(2, ts, ns);
        if (name == NULL) {
            goto fail;
        }
        int has = PyDict_Contains(d, name);
        Py_INCREF(d);
        int bad = has < 0 || (has == 1 && (PyDict_DelItem(d, name) < 0
                                           || (PyDict_GET_SIZE(d) == 0
                                               && PyDict_DelItem(m, key) < 0)));
        Py_DECREF(name);
        Py_DECREF(d);
        if (bad) {
            goto fail;
        }
    }
    Py_DECREF(seq);
    return due;
fail:
    Py_DECREF(seq);
    Py_DECREF(due);
    return NULL;
}

static PyMethodDef timers_methods[] = {
    {"register_timers", (PyCFunction)(void (*)(void))register_timers, METH_FASTCALL,
     register_timers_doc},
    {"take_due_timers", (PyCFunction)(void (*)(void))take_due_timers, METH_FASTCALL,
     take_due_timers_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef timers_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "flowray.operators._timers",
    .m_doc = "The C half of the timer service's batch paths (see the source's header).",
    .m_size = -1,
    .m_methods = timers_methods,
};

PyMODINIT_FUNC
PyInit__timers(void)
{
    PyObject *m = PyModule_Create(&timers_module);
    if (m == NULL) {
        return NULL;
    }
    PyObject *collections = PyImport_ImportModule("collections");
    PyObject *deque_type = collections == NULL ? NULL
                           : PyObject_GetAttrString(collections, "deque");
    Py_XDECREF(collections);
    if (deque_type == NULL || PyModule_AddObject(m, "_deque", deque_type) < 0) {
        Py_XDECREF(deque_type);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
