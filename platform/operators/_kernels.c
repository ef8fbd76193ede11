/* Compiled kernels of linkstream.operators (the extension ``linkstream.operators._kernels``).
 *
 * Built by ``pip install`` with the system C compiler (pyproject.toml, [tool.setuptools]
 * ext-modules, optional): when no compiler is there, the package works the same through
 * its numpy code (linkstream.operators.native says which one runs).
 *
 * The kernels take numpy arrays through the buffer protocol (no numpy headers are needed
 * to build): int64, C-contiguous, with their shapes passed as arguments and checked
 * against the buffers' sizes.  Output arrays are allocated by the caller.  Nothing here
 * keeps a reference to a buffer after it returns.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* rows a and b of a (k, n) column-major table: -1, 0, 1 (first column most significant) */
static inline int
cmp_rows(const int64_t *cols, Py_ssize_t k, Py_ssize_t n, Py_ssize_t a, Py_ssize_t b)
{
    for (Py_ssize_t j = 0; j < k; j++) {
        const int64_t x = cols[j * n + a], y = cols[j * n + b];
        if (x != y)
            return x < y ? -1 : 1;
    }
    return 0;
}

/* stable sort of the row numbers idx[0..n) by their rows (insertion sort for short runs,
 * then bottom-up merges through tmp) */
#define RUN 16

static void
sort_rows(const int64_t *cols, Py_ssize_t k, Py_ssize_t n, Py_ssize_t *idx, Py_ssize_t *tmp)
{
    for (Py_ssize_t lo = 0; lo < n; lo += RUN) {
        const Py_ssize_t hi = lo + RUN < n ? lo + RUN : n;
        for (Py_ssize_t i = lo + 1; i < hi; i++) {
            const Py_ssize_t v = idx[i];
            Py_ssize_t p = i;
            while (p > lo && cmp_rows(cols, k, n, idx[p - 1], v) > 0) {
                idx[p] = idx[p - 1];
                p--;
            }
            idx[p] = v;
        }
    }
    Py_ssize_t *src = idx, *dst = tmp;
    for (Py_ssize_t width = RUN; width < n; width *= 2) {
        for (Py_ssize_t lo = 0; lo < n; lo += 2 * width) {
            const Py_ssize_t mid = lo + width < n ? lo + width : n;
            const Py_ssize_t hi = lo + 2 * width < n ? lo + 2 * width : n;
            Py_ssize_t a = lo, b = mid, o = lo;
            while (a < mid && b < hi)
                dst[o++] = cmp_rows(cols, k, n, src[b], src[a]) < 0 ? src[b++] : src[a++];
            while (a < mid)
                dst[o++] = src[a++];
            while (b < hi)
                dst[o++] = src[b++];
        }
        Py_ssize_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != idx)
        memcpy(idx, src, (size_t)n * sizeof(Py_ssize_t));
}

static int
check_size(const Py_buffer *buf, Py_ssize_t items, const char *what)
{
    if (buf->len != items * (Py_ssize_t)sizeof(int64_t)) {
        PyErr_Format(PyExc_ValueError, "%s: %zd bytes, expected %zd int64", what, buf->len, items);
        return -1;
    }
    return 0;
}

#define STACK_ROWS 256

PyDoc_STRVAR(consolidate_doc,
"consolidate(cols, counts, k, n, out_cols, out_counts) -> int\n\n"
"Merge the equal rows of the (k, n) int64 table ``cols`` (C order) by summing their\n"
"``counts`` and leave out rows whose sum is 0.  Writes the m result rows sorted\n"
"lexicographically (first column most significant) into the first k*m items of\n"
"``out_cols`` as a (k, m) table and into ``out_counts[:m]``, and returns m; returns -1\n"
"and writes nothing when the input is already consolidated (rows strictly ascending,\n"
"no zero count).");

static PyObject *
consolidate(PyObject *self, PyObject *args)
{
    Py_buffer cb, nb, ocb, onb;
    Py_ssize_t k, n;
    if (!PyArg_ParseTuple(args, "y*y*nnw*w*", &cb, &nb, &k, &n, &ocb, &onb))
        return NULL;
    PyObject *res = NULL;
    Py_ssize_t stack_idx[2 * STACK_ROWS];
    Py_ssize_t *idx = stack_idx;
    if (k < 0 || n < 0 || check_size(&cb, k * n, "cols") || check_size(&nb, n, "counts") ||
        check_size(&ocb, k * n, "out_cols") || check_size(&onb, n, "out_counts"))
        goto done;
    const int64_t *cols = (const int64_t *)cb.buf;
    const int64_t *counts = (const int64_t *)nb.buf;
    int64_t *ocols = (int64_t *)ocb.buf;
    int64_t *ocounts = (int64_t *)onb.buf;

    /* already consolidated? (the common case of a relation's state re-read) */
    int done_already = 1;
    for (Py_ssize_t i = 0; i < n && done_already; i++)
        if (counts[i] == 0 || (i && cmp_rows(cols, k, n, i - 1, i) >= 0))
            done_already = 0;
    if (done_already) {
        res = PyLong_FromSsize_t(-1);
        goto done;
    }
    if (n > STACK_ROWS) {
        idx = PyMem_Malloc(2 * (size_t)n * sizeof(Py_ssize_t));
        if (!idx) {
            PyErr_NoMemory();
            goto done;
        }
    }
    for (Py_ssize_t i = 0; i < n; i++)
        idx[i] = i;
    sort_rows(cols, k, n, idx, idx + n);
    /* group equal rows; keep (first row, summed count) of each nonzero group: the kept
     * row numbers go back into idx[0..m) */
    Py_ssize_t m = 0;
    for (Py_ssize_t i = 0; i < n;) {
        const Py_ssize_t first = idx[i];
        int64_t total = counts[first];
        Py_ssize_t j = i + 1;
        while (j < n && cmp_rows(cols, k, n, first, idx[j]) == 0)
            total += counts[idx[j++]];
        if (total) {
            ocounts[m] = total;
            idx[m++] = first;
        }
        i = j;
    }
    for (Py_ssize_t j = 0; j < k; j++) {
        const int64_t *src = cols + j * n;
        int64_t *dst = ocols + j * m;
        for (Py_ssize_t i = 0; i < m; i++)
            dst[i] = src[idx[i]];
    }
    res = PyLong_FromSsize_t(m);
done:
    if (idx != stack_idx)
        PyMem_Free(idx);
    PyBuffer_Release(&cb);
    PyBuffer_Release(&nb);
    PyBuffer_Release(&ocb);
    PyBuffer_Release(&onb);
    return res;
}

static PyMethodDef methods[] = {
    {"consolidate", consolidate, METH_VARARGS, consolidate_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_kernels", "Compiled kernels of linkstream.operators.", -1, methods,
};

PyMODINIT_FUNC
PyInit__kernels(void)
{
    return PyModule_Create(&module);
}
