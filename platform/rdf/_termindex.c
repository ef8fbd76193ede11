/* The term index of a memory dictionary: ``linkstream.rdf._ntparse.TermIndex`` (see
 * _termindex.h for its layout).  linkstream.rdf.dictionary.MemoryDictionary keeps its
 * term -> id map here when the extension is built (a Python ``dict`` otherwise, with the
 * same ids), and the N-Triples scanner adds the terms of a file to it in place.
 *
 * Methods (``terms``: a sequence of ``str``; ``all``: the dictionary's id -> term list, to
 * which a new term is appended, its id being the list's length before):
 *   encode_many(terms, all) -> bytearray of int64 ids (new terms in the order they occur)
 *   lookup_many(terms) -> bytearray of int64 ids (0: unknown)
 *   encode(term, all) -> id;  get(term) -> id or 0;  put(term, id) -> the id it has now
 */
#include "_termindex.h"

/* the UTF-8 text of str s (*tmp: a bytes object to release, or NULL); NULL on error.
 * Lone surrogates are kept ("surrogatepass": still one text per str). */
static const char *
utf8_of(PyObject *s, Py_ssize_t *n, PyObject **tmp)
{
    *tmp = NULL;
    if (!PyUnicode_Check(s)) {
        PyErr_Format(PyExc_TypeError, "a term must be a str, not %.80s", Py_TYPE(s)->tp_name);
        return NULL;
    }
    if (PyUnicode_IS_COMPACT_ASCII(s)) {
        *n = PyUnicode_GET_LENGTH(s);
        return (const char *)PyUnicode_DATA(s);
    }
    if ((*tmp = PyUnicode_AsEncodedString(s, "utf-8", "surrogatepass")) == NULL)
        return NULL;
    *n = PyBytes_GET_SIZE(*tmp);
    return PyBytes_AS_STRING(*tmp);
}

static int
ti_grow(TermIndex *ix)
{
    const size_t cap = (ix->mask + 1) * 2;
    TermSlot *s = PyMem_Calloc(cap, sizeof(TermSlot));
    if (s == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (size_t i = 0; i <= ix->mask; i++) {
        const TermSlot *o = &ix->slots[i];
        if (o->id == 0)
            continue;
        uint32_t len;
        memcpy(&len, ix->arena + o->off, 4);
        size_t j = hash_bytes(ix->arena + o->off + 4, len) & (cap - 1);
        while (s[j].id != 0)
            j = (j + 1) & (cap - 1);
        s[j] = *o;
    }
    PyMem_Free(ix->slots);
    ix->slots = s;
    ix->mask = cap - 1;
    return 0;
}

/* *buf (of *cap bytes) grown, by doubling from `first`, to hold at least `need` bytes */
static int
room_for(char **buf, size_t *cap, size_t need, size_t first)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : first;
    while (need > c)
        c *= 2;
    char *g = PyMem_Realloc(*buf, c);
    if (g == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    *buf = g;
    *cap = c;
    return 0;
}

int
ti_add(TermIndex *ix, size_t at, const char *p, Py_ssize_t n, uint64_t h, Py_ssize_t id)
{
    if (id <= 0 || id > (Py_ssize_t)UINT32_MAX || n > (Py_ssize_t)UINT32_MAX) {
        PyErr_Format(PyExc_OverflowError, "term index: id %zd or term length %zd out of range", id, n);
        return -1;
    }
    if (room_for(&ix->arena, &ix->cap, ix->used + (size_t)n + 4, 1 << 16) < 0)
        return -1;
    const uint32_t len = (uint32_t)n;
    memcpy(ix->arena + ix->used, &len, 4);
    memcpy(ix->arena + ix->used + 4, p, (size_t)n);
    TermSlot *s = &ix->slots[at];
    s->tag = (uint32_t)(h >> 32);
    s->id = (uint32_t)id;
    s->off = ix->used;
    ix->used += (size_t)n + 4;
    ix->n++;
    if ((size_t)ix->n * 5 > (ix->mask + 1) * 3) /* load 0.6 */
        return ti_grow(ix);
    return 0;
}

int
batch_add(TermBatch *b, const char *p, Py_ssize_t n, uint64_t h, int ascii, int copy)
{
    if (b->n == b->cap) {
        const Py_ssize_t cap = b->cap ? 2 * b->cap : 1024;
        const char **pp = PyMem_Realloc(b->p, cap * sizeof(*pp));
        if (pp != NULL)
            b->p = pp;
        Py_ssize_t *len = pp == NULL ? NULL : PyMem_Realloc(b->len, cap * sizeof(*len));
        if (len != NULL)
            b->len = len;
        uint64_t *hh = len == NULL ? NULL : PyMem_Realloc(b->h, cap * sizeof(*hh));
        if (hh != NULL)
            b->h = hh;
        unsigned char *how = hh == NULL ? NULL : PyMem_Realloc(b->how, (size_t)cap);
        if (how == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        b->how = how;
        b->cap = cap;
    }
    if (copy) {
        if (room_for(&b->text, &b->room, b->used + (size_t)n, 1 << 14) < 0)
            return -1;
        memcpy(b->text + b->used, p, (size_t)n);
        p = (const char *)(uintptr_t)b->used; /* an offset until ti_resolve */
        b->used += (size_t)n;
    }
    b->p[b->n] = p;
    b->len[b->n] = n;
    b->h[b->n] = h;
    b->how[b->n++] = (unsigned char)((ascii ? 1 : 0) | (copy ? 2 : 0));
    return 0;
}

void
batch_free(TermBatch *b)
{
    PyMem_Free(b->p);
    PyMem_Free(b->len);
    PyMem_Free(b->h);
    PyMem_Free(b->how);
    PyMem_Free(b->text);
}

#define AHEAD 8 /* the slots prefetched this many texts ahead, the texts they hold half as far */

int
ti_resolve(TermIndex *ix, TermBatch *b, PyObject *all, int64_t *out)
{
    const Py_ssize_t n = b->n;
    for (Py_ssize_t k = 0; k < n; k++)
        if (b->how[k] & 2)
            b->p[k] = b->text + (uintptr_t)b->p[k];
    for (Py_ssize_t k = 0; k < n; k++) {
        if (k + AHEAD < n)
            __builtin_prefetch(&ix->slots[b->h[k + AHEAD] & ix->mask]);
        if (k + AHEAD / 2 < n) {
            const TermSlot *s = &ix->slots[b->h[k + AHEAD / 2] & ix->mask];
            if (s->id != 0)
                __builtin_prefetch(ix->arena + s->off);
        }
        size_t at;
        Py_ssize_t id = ti_find(ix, b->p[k], b->len[k], b->h[k], &at);
        if (id == 0) {
            PyObject *u = text_str(b->p[k], b->len[k], b->how[k] & 1);
            id = PyList_GET_SIZE(all);
            const int bad = u == NULL || PyList_Append(all, u) < 0 || ti_add(ix, at, b->p[k], b->len[k], b->h[k], id) < 0;
            Py_XDECREF(u);
            if (bad)
                return -1;
        }
        out[k] = id;
    }
    return 0;
}

/* the id of term s; a new one (appended to list all) when all is given, else 0 */
static Py_ssize_t
ti_term(TermIndex *ix, PyObject *s, PyObject *all)
{
    Py_ssize_t n;
    PyObject *tmp;
    const char *p = utf8_of(s, &n, &tmp);
    if (p == NULL)
        return -1;
    const uint64_t h = hash_bytes(p, n);
    size_t at;
    Py_ssize_t id = ti_find(ix, p, n, h, &at);
    if (id == 0 && all != NULL) {
        id = PyList_GET_SIZE(all);
        if (PyList_Append(all, s) < 0 || ti_add(ix, at, p, n, h, id) < 0)
            id = -1;
    }
    Py_XDECREF(tmp);
    return id;
}

static PyObject *
ti_many(TermIndex *ix, PyObject *terms, PyObject *all)
{
    if (all != NULL && !PyList_Check(all))
        return PyErr_Format(PyExc_TypeError, "all must be a list");
    PyObject *seq = PySequence_Fast(terms, "terms must be a sequence of str");
    if (seq == NULL)
        return NULL;
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject *out = PyByteArray_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(int64_t));
    if (out != NULL) {
        int64_t *o = (int64_t *)PyByteArray_AS_STRING(out);
        PyObject **items = PySequence_Fast_ITEMS(seq);
        for (Py_ssize_t i = 0; i < n; i++) {
            if ((o[i] = ti_term(ix, items[i], all)) < 0) {
                Py_CLEAR(out);
                break;
            }
        }
    }
    Py_DECREF(seq);
    return out;
}

static PyObject *
ti_encode_many(TermIndex *ix, PyObject *args)
{
    PyObject *terms, *all;
    if (!PyArg_ParseTuple(args, "OO!", &terms, &PyList_Type, &all))
        return NULL;
    return ti_many(ix, terms, all);
}

static PyObject *
ti_lookup_many(TermIndex *ix, PyObject *terms)
{
    return ti_many(ix, terms, NULL);
}

static PyObject *
ti_encode(TermIndex *ix, PyObject *args)
{
    PyObject *term, *all;
    if (!PyArg_ParseTuple(args, "OO!", &term, &PyList_Type, &all))
        return NULL;
    const Py_ssize_t id = ti_term(ix, term, all);
    return id < 0 ? NULL : PyLong_FromSsize_t(id);
}

static PyObject *
ti_get(TermIndex *ix, PyObject *term)
{
    const Py_ssize_t id = ti_term(ix, term, NULL);
    return id < 0 ? NULL : PyLong_FromSsize_t(id);
}

static PyObject *
ti_put(TermIndex *ix, PyObject *args)
{
    PyObject *s, *tmp;
    Py_ssize_t id, n;
    if (!PyArg_ParseTuple(args, "On", &s, &id))
        return NULL;
    const char *p = utf8_of(s, &n, &tmp);
    if (p == NULL)
        return NULL;
    const uint64_t h = hash_bytes(p, n);
    size_t at;
    const Py_ssize_t old = ti_find(ix, p, n, h, &at);
    const int bad = old == 0 && ti_add(ix, at, p, n, h, id) < 0;
    Py_XDECREF(tmp);
    return bad ? NULL : PyLong_FromSsize_t(old ? old : id);
}

static PyObject *
ti_sizeof(TermIndex *ix, PyObject *Py_UNUSED(ignored))
{
    return PyLong_FromSize_t(sizeof(TermIndex) + (ix->mask + 1) * sizeof(TermSlot) + ix->cap);
}

static Py_ssize_t
ti_len(TermIndex *ix)
{
    return ix->n;
}

static PyObject *
ti_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    if (PyTuple_GET_SIZE(args) || (kw != NULL && PyDict_GET_SIZE(kw)))
        return PyErr_Format(PyExc_TypeError, "TermIndex() takes no arguments");
    TermIndex *ix = (TermIndex *)type->tp_alloc(type, 0);
    if (ix == NULL)
        return NULL;
    ix->mask = 1023;
    ix->slots = PyMem_Calloc(ix->mask + 1, sizeof(TermSlot));
    if (ix->slots == NULL) {
        Py_DECREF(ix);
        return PyErr_NoMemory();
    }
    return (PyObject *)ix;
}

static void
ti_dealloc(TermIndex *ix)
{
    PyMem_Free(ix->slots);
    PyMem_Free(ix->arena);
    Py_TYPE(ix)->tp_free((PyObject *)ix);
}

static PyMethodDef ti_methods[] = {
    {"encode_many", (PyCFunction)ti_encode_many, METH_VARARGS, "encode_many(terms, all) -> bytearray of int64 ids"},
    {"lookup_many", (PyCFunction)ti_lookup_many, METH_O, "lookup_many(terms) -> bytearray of int64 ids (0: unknown)"},
    {"encode", (PyCFunction)ti_encode, METH_VARARGS, "encode(term, all) -> id"},
    {"get", (PyCFunction)ti_get, METH_O, "get(term) -> id, or 0"},
    {"put", (PyCFunction)ti_put, METH_VARARGS, "put(term, id) -> the id term has now"},
    {"__sizeof__", (PyCFunction)ti_sizeof, METH_NOARGS, "bytes held"},
    {NULL, NULL, 0, NULL},
};

static PySequenceMethods ti_as_sequence = {.sq_length = (lenfunc)ti_len};

PyTypeObject TermIndexType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "linkstream.rdf._ntparse.TermIndex",
    .tp_basicsize = sizeof(TermIndex),
    .tp_dealloc = (destructor)ti_dealloc,
    .tp_as_sequence = &ti_as_sequence,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A memory dictionary's term -> id index (UTF-8 text -> id, ids from 1).",
    .tp_methods = ti_methods,
    .tp_new = ti_new,
};
