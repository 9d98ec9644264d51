/* What flowray.common._records offers other C modules, through its capsule
 * flowray.common._records._C_API (import it with flowray_import_row_api()). */
#ifndef FLOWRAY_RECORDS_H
#define FLOWRAY_RECORDS_H

#include <Python.h>

#define FLOWRAY_ROW_API_NAME "flowray.common._records._C_API"

typedef struct {
    /* RowBase: the C base of every Row class */
    PyTypeObject *row_type;
    /* a new row of class `cls` (a RowBase subtype) holding items[0..n) (new references
     * taken); untracked by the cyclic collector when they are all atomic */
    PyObject *(*row_from_items)(PyTypeObject *cls, PyObject *const *items, Py_ssize_t n);
    /* whether row `r` keeps field names or a row kind of its own (not its class's) */
    int (*has_own_attrs)(PyObject *r);
    /* the tp_dealloc of flowray's own Row classes (those fast_class() made) */
    destructor fast_dealloc;
} FlowrayRowAPI;

/* whether `o` is a row (an instance of a RowBase subtype): one compare for a row of
 * flowray's own classes, a walk of the MRO for anything else */
static inline int
flowray_is_row(const FlowrayRowAPI *api, PyObject *o)
{
    return Py_TYPE(o)->tp_dealloc == api->fast_dealloc || PyObject_TypeCheck(o, api->row_type);
}

/* the API, or NULL with an exception set */
static inline FlowrayRowAPI *
flowray_import_row_api(void)
{
    return (FlowrayRowAPI *)PyCapsule_Import(FLOWRAY_ROW_API_NAME, 0);
}

#endif
