/* Compiled report rendering of linkstream.engine (the extension ``linkstream.engine._render``).
 *
 * Built by ``pip install`` with the system C compiler (pyproject.toml, [tool.setuptools]
 * ext-modules, optional): without it, linkstream.engine.render does the same in Python
 * (``render.use_native(False)`` turns this module off; both give the same text).
 *
 * A report is megabytes of ASCII made of many small strings (each query's block of
 * lines, each line a head and a rendered row).  The functions here build the whole text
 * with one allocation and one copy, instead of joins, slices and a byte round trip per
 * report.  They handle ASCII strings only and return ``None`` when one is not (the
 * caller then takes the Python path, whose text is the same).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

/* the ASCII characters of str ``o`` and their number; 0 when ``o`` is not an ASCII str */
static int
ascii_of(PyObject *o, const char **data, Py_ssize_t *n)
{
    if (!PyUnicode_Check(o) || PyUnicode_READY(o) < 0 || !PyUnicode_IS_ASCII(o))
        return 0;
    *data = (const char *)PyUnicode_DATA(o);
    *n = PyUnicode_GET_LENGTH(o);
    return 1;
}

PyDoc_STRVAR(join_timed_doc,
"join_timed(parts, t) -> str | None\n\n"
"The strings of ``parts`` (a sequence of str) joined, with every NUL character (the\n"
"report-time mark) replaced by ``t``: ``''.join(parts).replace('\\0', t)``.  ``None`` when\n"
"a part or ``t`` is not an ASCII str.");

static PyObject *
join_timed(PyObject *self, PyObject *args)
{
    PyObject *seq_in, *t;
    if (!PyArg_ParseTuple(args, "OU:join_timed", &seq_in, &t))
        return NULL;
    const char *tdata;
    Py_ssize_t tn;
    if (!ascii_of(t, &tdata, &tn))
        Py_RETURN_NONE;
    PyObject *seq = PySequence_Fast(seq_in, "join_timed: parts must be a sequence");
    if (seq == NULL)
        return NULL;
    const Py_ssize_t np = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    /* the parts' characters (every part checked first: the text is built only when all are
     * ASCII); the marks are found while copying, into a text sized for a mark per 64
     * characters and resized when it needs more (a resize of a large text moves no
     * characters) and at the end to its length */
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < np; i++) {
        const char *d;
        Py_ssize_t n;
        if (!ascii_of(items[i], &d, &n)) {
            Py_DECREF(seq);
            Py_RETURN_NONE;
        }
        total += n;
    }
    Py_ssize_t cap = total + (tn > 1 ? (tn - 1) * (total / 64 + 16) : 0);
    PyObject *res = PyUnicode_New(cap, 127);
    if (res == NULL) {
        Py_DECREF(seq);
        return NULL;
    }
    char *base = (char *)PyUnicode_DATA(res);
    Py_ssize_t used = 0, left = total; /* ``left``: input characters not copied yet */
    for (Py_ssize_t i = 0; i < np; i++) {
        const char *d = (const char *)PyUnicode_DATA(items[i]);
        const char *end = d + PyUnicode_GET_LENGTH(items[i]);
        while (d < end) {
            const char *m = memchr(d, 0, (size_t)(end - d));
            const char *stop = m == NULL ? end : m;
            Py_ssize_t k = stop - d;
            /* room for this piece, the mark's text and every character still to come */
            Py_ssize_t need = used + (left - k) + k + (m == NULL ? 0 : tn);
            if (need > cap) {
                Py_ssize_t grown = cap + cap / 2 > need ? cap + cap / 2 : need;
                if (PyUnicode_Resize(&res, grown) < 0) {
                    Py_DECREF(seq);
                    return NULL;
                }
                cap = grown;
                base = (char *)PyUnicode_DATA(res);
            }
            memcpy(base + used, d, (size_t)k);
            used += k;
            left -= k;
            if (m == NULL)
                break;
            memcpy(base + used, tdata, (size_t)tn);
            used += tn;
            left -= 1;
            d = m + 1;
        }
    }
    Py_DECREF(seq);
    if (used != cap && PyUnicode_Resize(&res, used) < 0)
        return NULL;
    return res;
}

PyDoc_STRVAR(blocks_doc,
"blocks(heads, lines, bodies) -> list[str] | None\n\n"
"One block per member: member ``i`` has ``lines[i]`` lines, each ``heads[i]`` followed by\n"
"the next of ``bodies`` (taken in order) and a newline.  ``heads`` and ``bodies`` are\n"
"sequences of str, ``lines`` a sequence of int with ``sum(lines) == len(bodies)``.\n"
"``None`` when a string is not ASCII.");

static PyObject *
blocks(PyObject *self, PyObject *args)
{
    PyObject *heads_in, *lines_in, *bodies_in;
    if (!PyArg_ParseTuple(args, "OOO:blocks", &heads_in, &lines_in, &bodies_in))
        return NULL;
    PyObject *heads = NULL, *lines = NULL, *bodies = NULL, *res = NULL;
    heads = PySequence_Fast(heads_in, "blocks: heads must be a sequence");
    if (heads == NULL)
        goto done;
    lines = PySequence_Fast(lines_in, "blocks: lines must be a sequence");
    if (lines == NULL)
        goto done;
    bodies = PySequence_Fast(bodies_in, "blocks: bodies must be a sequence");
    if (bodies == NULL)
        goto done;
    const Py_ssize_t nm = PySequence_Fast_GET_SIZE(heads), nb = PySequence_Fast_GET_SIZE(bodies);
    if (PySequence_Fast_GET_SIZE(lines) != nm) {
        PyErr_SetString(PyExc_ValueError, "blocks: heads and lines differ in length");
        goto done;
    }
    PyObject **hs = PySequence_Fast_ITEMS(heads), **ls = PySequence_Fast_ITEMS(lines);
    PyObject **bs = PySequence_Fast_ITEMS(bodies);
    for (Py_ssize_t j = 0; j < nb; j++) {
        const char *d;
        Py_ssize_t n;
        if (!ascii_of(bs[j], &d, &n)) {
            res = Py_None;
            Py_INCREF(res);
            goto done;
        }
    }
    res = PyList_New(nm);
    if (res == NULL)
        goto done;
    Py_ssize_t at = 0;
    for (Py_ssize_t i = 0; i < nm; i++) {
        const char *hd;
        Py_ssize_t hn;
        if (!ascii_of(hs[i], &hd, &hn)) {
            Py_DECREF(res);
            res = Py_None;
            Py_INCREF(res);
            goto done;
        }
        const Py_ssize_t k = PyLong_AsSsize_t(ls[i]);
        if (k == -1 && PyErr_Occurred())
            goto fail;
        if (k < 0 || k > nb - at) {
            PyErr_SetString(PyExc_ValueError, "blocks: line counts do not match the bodies");
            goto fail;
        }
        Py_ssize_t size = k * (hn + 1);
        for (Py_ssize_t j = at; j < at + k; j++)
            size += PyUnicode_GET_LENGTH(bs[j]);
        PyObject *blk = PyUnicode_New(size, 127);
        if (blk == NULL)
            goto fail;
        char *out = (char *)PyUnicode_DATA(blk);
        for (Py_ssize_t j = at; j < at + k; j++) {
            const Py_ssize_t bn = PyUnicode_GET_LENGTH(bs[j]);
            memcpy(out, hd, (size_t)hn);
            out += hn;
            memcpy(out, PyUnicode_DATA(bs[j]), (size_t)bn);
            out += bn;
            *out++ = '\n';
        }
        PyList_SET_ITEM(res, i, blk);
        at += k;
    }
    if (at != nb) {
        PyErr_SetString(PyExc_ValueError, "blocks: line counts do not match the bodies");
        goto fail;
    }
    goto done;
fail:
    Py_CLEAR(res);
done:
    Py_XDECREF(heads);
    Py_XDECREF(lines);
    Py_XDECREF(bodies);
    return res;
}

PyDoc_STRVAR(put_doc,
"put(target, at, values) -> None\n\n"
"``target[at[i]] = values[i]`` for every ``i`` (``target`` a list, ``at`` a sequence of\n"
"int, ``values`` a sequence as long as ``at``).");

static PyObject *
put(PyObject *self, PyObject *args)
{
    PyObject *target, *at_in, *values_in;
    if (!PyArg_ParseTuple(args, "O!OO:put", &PyList_Type, &target, &at_in, &values_in))
        return NULL;
    PyObject *at = PySequence_Fast(at_in, "put: at must be a sequence");
    if (at == NULL)
        return NULL;
    PyObject *values = PySequence_Fast(values_in, "put: values must be a sequence");
    if (values == NULL) {
        Py_DECREF(at);
        return NULL;
    }
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(at), size = PyList_GET_SIZE(target);
    PyObject *res = NULL;
    if (PySequence_Fast_GET_SIZE(values) != n) {
        PyErr_SetString(PyExc_ValueError, "put: at and values differ in length");
        goto done;
    }
    PyObject **as = PySequence_Fast_ITEMS(at), **vs = PySequence_Fast_ITEMS(values);
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t p = PyLong_AsSsize_t(as[i]);
        if (p == -1 && PyErr_Occurred())
            goto done;
        if (p < 0 || p >= size) {
            PyErr_SetString(PyExc_IndexError, "put: position out of range");
            goto done;
        }
        PyObject *old = PyList_GET_ITEM(target, p);
        Py_INCREF(vs[i]);
        PyList_SET_ITEM(target, p, vs[i]);
        Py_DECREF(old);
    }
    res = Py_None;
    Py_INCREF(res);
done:
    Py_DECREF(at);
    Py_DECREF(values);
    return res;
}

static PyMethodDef methods[] = {
    {"join_timed", join_timed, METH_VARARGS, join_timed_doc},
    {"blocks", blocks, METH_VARARGS, blocks_doc},
    {"put", put, METH_VARARGS, put_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_render", "Compiled report rendering of linkstream.engine.", -1, methods,
};

PyMODINIT_FUNC
PyInit__render(void)
{
    return PyModule_Create(&module);
}
