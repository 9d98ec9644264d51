/* flowray.state._key_groups: the C half of KeyGroupAssigner.assign_batch for batches of
 * str or int keys (flowray.state.key_groups: _str_key_groups and _int_key_groups are its
 * pure-Python twins, CRC-32 in zlib and the finalizer in numpy).
 *
 * A key's group is fmix32(stable_hash(key)) % max_parallelism, where stable_hash is the
 * CRC-32 (zlib's: reflected 0xEDB88320) of a str's UTF-8 bytes, and (k ^ (k >> 32)) &
 * 0xFFFFFFFF for an int k in 64 bits. These values place the key groups of every
 * checkpoint ever written: they must never change (tests/unit/state compare both halves
 * with assign_to_key_group key by key).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

static uint32_t crc_table[256];

static void
init_crc_table(void)
{
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++) {
            c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        }
        crc_table[n] = c;
    }
}

static inline uint32_t
crc32_of(const unsigned char *p, Py_ssize_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    for (Py_ssize_t i = 0; i < n; i++) {
        c = crc_table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
    }
    return c ^ 0xFFFFFFFFu;
}

/* MurmurHash3's finalizer (state/key_groups.py's _fmix32) */
static inline uint32_t
fmix32(uint32_t h)
{
    h ^= h >> 16;
    h *= 0x85EBCA6Bu;
    h ^= h >> 13;
    h *= 0xC2B2AE35u;
    h ^= h >> 16;
    return h;
}

static int
parse(PyObject *const *args, Py_ssize_t nargs, const char *name, PyObject **seq,
      long *max_parallelism)
{
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "%s() takes 2 arguments (%zd given)", name, nargs);
        return -1;
    }
    *max_parallelism = PyLong_AsLong(args[1]);
    if (*max_parallelism == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (*max_parallelism <= 0) {
        PyErr_Format(PyExc_ValueError, "%s(): max_parallelism must be positive", name);
        return -1;
    }
    *seq = PySequence_Fast(args[0], "keys must be a sequence");
    return *seq == NULL ? -1 : 0;
}

/* the hash of one key: 1 and *h set, 0 when the key is not this function's to hash (the
 * caller then goes key by key), -1 on an error */
typedef int (*key_hash)(PyObject *k, uint32_t *h);

static int
str_hash(PyObject *k, uint32_t *h)
{
    if (!PyUnicode_CheckExact(k)) {
        return 0;
    }
    Py_ssize_t size;
    const char *utf8 = PyUnicode_AsUTF8AndSize(k, &size);
    if (utf8 == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) {
            return -1;
        }
        PyErr_Clear();   /* a lone surrogate: stable_hash's surrogatepass, key by key */
        return 0;
    }
    *h = crc32_of((const unsigned char *)utf8, size);
    return 1;
}

static int
int_hash(PyObject *k, uint32_t *h)
{
    if (!PyLong_CheckExact(k)) {
        return 0;
    }
    int overflow;
    long long v = PyLong_AsLongLongAndOverflow(k, &overflow);
    if (overflow) {
        return 0;
    }
    /* the fold of stable_hash: (k ^ (k >> 32)) & 0xFFFFFFFF, >> arithmetic as Python's */
    int64_t a = (int64_t)v;
    int64_t shifted = a < 0 ? ~((~a) >> 32) : a >> 32;
    *h = (uint32_t)((uint64_t)(a ^ shifted) & 0xFFFFFFFFu);
    return 1;
}

/* the key groups of keys (args[0]) at max parallelism args[1], or None */
static PyObject *
key_groups(PyObject *const *args, Py_ssize_t nargs, const char *name, key_hash hash)
{
    PyObject *seq;
    long maxp;
    if (parse(args, nargs, name, &seq, &maxp) < 0) {
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **keys = PySequence_Fast_ITEMS(seq);
    PyObject *out = PyList_New(n);
    if (out == NULL) {
        Py_DECREF(seq);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        uint32_t h;
        int ok = hash(keys[i], &h);
        if (ok <= 0) {
            Py_DECREF(out);
            Py_DECREF(seq);
            if (ok < 0) {
                return NULL;
            }
            Py_RETURN_NONE;
        }
        PyList_SET_ITEM(out, i, PyLong_FromUnsignedLong(fmix32(h) % (unsigned long)maxp));
    }
    Py_DECREF(seq);
    return out;
}

PyDoc_STRVAR(str_key_groups_doc,
"str_key_groups(keys, max_parallelism) -> list of key groups, or None\n\n"
"The key group of every key of keys, all of them str exactly; None when a key is not a\n"
"str or has no UTF-8 form (a lone surrogate): the caller then goes key by key.");

static PyObject *
str_key_groups(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    return key_groups(args, nargs, "str_key_groups", str_hash);
}

PyDoc_STRVAR(int_key_groups_doc,
"int_key_groups(keys, max_parallelism) -> list of key groups, or None\n\n"
"The key group of every key of keys, all of them int exactly (not bool) within 64 bits;\n"
"None otherwise: the caller then goes key by key.");

static PyObject *
int_key_groups(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    return key_groups(args, nargs, "int_key_groups", int_hash);
}

static PyMethodDef key_groups_methods[] = {
    {"str_key_groups", (PyCFunction)(void (*)(void))str_key_groups, METH_FASTCALL,
     str_key_groups_doc},
    {"int_key_groups", (PyCFunction)(void (*)(void))int_key_groups, METH_FASTCALL,
     int_key_groups_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef key_groups_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "flowray.state._key_groups",
    .m_doc = "The C half of KeyGroupAssigner.assign_batch for str and int keys.",
    .m_size = -1,
    .m_methods = key_groups_methods,
};

PyMODINIT_FUNC
PyInit__key_groups(void)
{
    init_crc_table();
    return PyModule_Create(&key_groups_module);
}
