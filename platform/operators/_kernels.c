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

/* row a of the (k, na) table ta against row b of the (k, nb) table tb: -1, 0, 1 */
static inline int
cmp_two(const int64_t *ta, Py_ssize_t na, Py_ssize_t a, const int64_t *tb, Py_ssize_t nb, Py_ssize_t b,
        Py_ssize_t k)
{
    for (Py_ssize_t j = 0; j < k; j++) {
        const int64_t x = ta[j * na + a], y = tb[j * nb + b];
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


PyDoc_STRVAR(join_small_doc,
"join_small(probe, kp, n, p_idx, keys, m, extra, ke, probe_counts, rel_counts, out_cols, out_counts) -> int\n\n"
"Join the (kp, n) int64 table ``probe`` with a relation part of m rows whose key columns\n"
"are ``keys`` ((len(p_idx), m)) and whose other output columns are ``extra`` ((ke, m)):\n"
"the pairs (i, j) whose probe columns ``p_idx`` equal the key columns, i ascending then j\n"
"ascending.  Writes the t output rows (the probe's columns, then ``extra``'s) as a\n"
"(kp + ke, t) table into the first (kp + ke) * t items of ``out_cols``, their counts\n"
"(probe count times relation count) into ``out_counts[:t]``, and returns t; returns -1\n"
"and writes nothing when a probe key value is unbound (0).  The caller's output arrays\n"
"hold (kp + ke) * n * m and n * m items.");

static PyObject *
join_small(PyObject *self, PyObject *args)
{
    Py_buffer pb, ib, kb, eb, pcb, rcb, ocb, onb;
    Py_ssize_t kp, n, m, ke;
    if (!PyArg_ParseTuple(args, "y*nny*y*ny*ny*y*w*w*", &pb, &kp, &n, &ib, &kb, &m, &eb, &ke, &pcb, &rcb,
                          &ocb, &onb))
        return NULL;
    PyObject *res = NULL;
    const Py_ssize_t kr = ib.len / (Py_ssize_t)sizeof(int64_t);
    const Py_ssize_t ko = kp + ke;
    if (kp < 0 || n < 0 || m < 0 || ke < 0 || kr < 1 || check_size(&pb, kp * n, "probe") ||
        check_size(&ib, kr, "p_idx") || check_size(&kb, kr * m, "keys") || check_size(&eb, ke * m, "extra") ||
        check_size(&pcb, n, "probe_counts") || check_size(&rcb, m, "rel_counts") ||
        check_size(&ocb, ko * n * m, "out_cols") || check_size(&onb, n * m, "out_counts"))
        goto done;
    const int64_t *probe = (const int64_t *)pb.buf, *p_idx = (const int64_t *)ib.buf;
    const int64_t *keys = (const int64_t *)kb.buf, *extra = (const int64_t *)eb.buf;
    const int64_t *pc = (const int64_t *)pcb.buf, *rc = (const int64_t *)rcb.buf;
    int64_t *out = (int64_t *)ocb.buf, *oc = (int64_t *)onb.buf;
    for (Py_ssize_t r = 0; r < kr; r++) {
        if (p_idx[r] < 0 || p_idx[r] >= kp) {
            PyErr_Format(PyExc_ValueError, "p_idx: column %lld of %zd", (long long)p_idx[r], kp);
            goto done;
        }
        const int64_t *col = probe + p_idx[r] * n;
        for (Py_ssize_t i = 0; i < n; i++)
            if (!col[i]) {
                res = PyLong_FromSsize_t(-1);
                goto done;
            }
    }
    /* count the pairs, then write each column at its final place */
    Py_ssize_t t = 0;
    for (int pass = 0; pass < 2; pass++) {
        Py_ssize_t p = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            for (Py_ssize_t j = 0; j < m; j++) {
                Py_ssize_t r = 0;
                while (r < kr && probe[p_idx[r] * n + i] == keys[r * m + j])
                    r++;
                if (r < kr)
                    continue;
                if (pass) {
                    for (Py_ssize_t c = 0; c < kp; c++)
                        out[c * t + p] = probe[c * n + i];
                    for (Py_ssize_t c = 0; c < ke; c++)
                        out[(kp + c) * t + p] = extra[c * m + j];
                    oc[p] = pc[i] * rc[j];
                }
                p++;
            }
        }
        t = p;
        if (!t)
            break;
    }
    res = PyLong_FromSsize_t(t);
done:
    PyBuffer_Release(&pb);
    PyBuffer_Release(&ib);
    PyBuffer_Release(&kb);
    PyBuffer_Release(&eb);
    PyBuffer_Release(&pcb);
    PyBuffer_Release(&rcb);
    PyBuffer_Release(&ocb);
    PyBuffer_Release(&onb);
    return res;
}

PyDoc_STRVAR(count_merge_doc,
"count_merge(pk, pn, n, dk, dn, nd, out_k, out_n, ch_k, ch_s) -> (m, c) | None\n\n"
"Apply a delta of packed keys ``dk`` with signed counts ``dn`` (nd items, any order) to a\n"
"state of n distinct keys ``pk`` (ascending) with counts ``pn``: writes the new state (keys\n"
"ascending, zero counts left out) into ``out_k[:m]``/``out_n[:m]``, and the keys whose count\n"
"crossed from <= 0 to > 0 (sign 1) or back (sign -1), ascending, into ``ch_k[:c]``/\n"
"``ch_s[:c]``; returns (m, c), or None and writes nothing when no count changes.\n"
"``out_k``/``out_n`` hold n + nd items, ``ch_k``/``ch_s`` nd.");

static PyObject *
count_merge(PyObject *self, PyObject *args)
{
    Py_buffer kb, nb, dkb, dnb, okb, onb, ckb, csb;
    Py_ssize_t n, nd;
    if (!PyArg_ParseTuple(args, "y*y*ny*y*nw*w*w*w*", &kb, &nb, &n, &dkb, &dnb, &nd, &okb, &onb, &ckb, &csb))
        return NULL;
    PyObject *res = NULL;
    Py_ssize_t stack_idx[2 * STACK_ROWS];
    Py_ssize_t *idx = stack_idx;
    if (n < 0 || nd < 0 || check_size(&kb, n, "pk") || check_size(&nb, n, "pn") || check_size(&dkb, nd, "dk") ||
        check_size(&dnb, nd, "dn") || check_size(&okb, n + nd, "out_k") || check_size(&onb, n + nd, "out_n") ||
        check_size(&ckb, nd, "ch_k") || check_size(&csb, nd, "ch_s"))
        goto done;
    const int64_t *pk = (const int64_t *)kb.buf, *pn = (const int64_t *)nb.buf;
    const int64_t *dk = (const int64_t *)dkb.buf, *dn = (const int64_t *)dnb.buf;
    int64_t *ok = (int64_t *)okb.buf, *on = (int64_t *)onb.buf;
    int64_t *ck = (int64_t *)ckb.buf, *cs = (int64_t *)csb.buf;
    if (nd > STACK_ROWS) {
        idx = PyMem_Malloc(2 * (size_t)nd * sizeof(Py_ssize_t));
        if (!idx) {
            PyErr_NoMemory();
            goto done;
        }
    }
    for (Py_ssize_t j = 0; j < nd; j++)
        idx[j] = j;
    sort_rows(dk, 1, nd, idx, idx + nd);
    Py_ssize_t i = 0, j = 0, m = 0, c = 0;
    int any = 0;
    while (i < n || j < nd) {
        if (j >= nd || (i < n && pk[i] < dk[idx[j]])) {
            if (pn[i]) {
                ok[m] = pk[i];
                on[m++] = pn[i];
            }
            i++;
            continue;
        }
        const int64_t key = dk[idx[j]];
        int64_t sum = 0;
        while (j < nd && dk[idx[j]] == key)
            sum += dn[idx[j++]];
        const int64_t old = (i < n && pk[i] == key) ? pn[i++] : 0;
        const int64_t now = old + sum;
        if (now != old)
            any = 1;
        if (now) {
            ok[m] = key;
            on[m++] = now;
        }
        if (old <= 0 && now > 0) {
            ck[c] = key;
            cs[c++] = 1;
        } else if (old > 0 && now <= 0) {
            ck[c] = key;
            cs[c++] = -1;
        }
    }
    if (!any) {
        Py_INCREF(Py_None);
        res = Py_None;
    } else
        res = Py_BuildValue("(nn)", m, c);
done:
    if (idx != stack_idx)
        PyMem_Free(idx);
    PyBuffer_Release(&kb);
    PyBuffer_Release(&nb);
    PyBuffer_Release(&dkb);
    PyBuffer_Release(&dnb);
    PyBuffer_Release(&okb);
    PyBuffer_Release(&onb);
    PyBuffer_Release(&ckb);
    PyBuffer_Release(&csb);
    return res;
}

PyDoc_STRVAR(rows_merge_doc,
"rows_merge(cols, counts, n, dcols, dcounts, m, k, out_cols, out_counts, before) -> int\n\n"
"Apply a consolidated delta, the (k, m) int64 table ``dcols`` (C order) with signed\n"
"``dcounts``, to a consolidated state, the (k, n) table ``cols`` with ``counts`` (both\n"
"with rows strictly ascending, first column most significant): writes the new state's r\n"
"rows (ascending, rows whose count is or becomes 0 left out) as a (k, r) table into the first\n"
"k*r items of ``out_cols`` and into ``out_counts[:r]``, each delta row's count in the state\n"
"before into ``before[:m]``, and returns r.  Returns -1 (the outputs then unspecified) when\n"
"a value is 0 (unbound: compatible with every value, not only equal to it) or a table is\n"
"not strictly ascending.  The output arrays hold k*(n+m) and n+m items.");

static PyObject *
rows_merge(PyObject *self, PyObject *args)
{
    Py_buffer cb, nb, db, dnb, ocb, onb, bb;
    Py_ssize_t n, m, k;
    if (!PyArg_ParseTuple(args, "y*y*ny*y*nnw*w*w*", &cb, &nb, &n, &db, &dnb, &m, &k, &ocb, &onb, &bb))
        return NULL;
    PyObject *res = NULL;
    if (n < 0 || m < 0 || k < 1 || check_size(&cb, k * n, "cols") || check_size(&nb, n, "counts") ||
        check_size(&db, k * m, "dcols") || check_size(&dnb, m, "dcounts") ||
        check_size(&ocb, k * (n + m), "out_cols") || check_size(&onb, n + m, "out_counts") ||
        check_size(&bb, m, "before"))
        goto done;
    const int64_t *cols = (const int64_t *)cb.buf, *counts = (const int64_t *)nb.buf;
    const int64_t *dcols = (const int64_t *)db.buf, *dcounts = (const int64_t *)dnb.buf;
    int64_t *out = (int64_t *)ocb.buf, *oc = (int64_t *)onb.buf, *before = (int64_t *)bb.buf;
    /* merge, each output row written to its place in a (k, n + m) table (column q at
     * q * cap); the columns are moved together once the row count r is known.  Both
     * tables strictly ascending is checked on the way: every row taken (a pair of equal
     * rows once) must be above the row taken before it.  (A row of one table below its
     * predecessor is taken right after it: the other table's rows taken in between lie
     * above that predecessor.)  So is a 0 value, in the values each row taken is copied
     * or checked with (no separate pass over the tables). */
    const Py_ssize_t cap = n + m;
    Py_ssize_t i = 0, j = 0, r = 0;
    const int64_t *lt = NULL; /* the table of the row taken last, its row count and row */
    Py_ssize_t ln = 0, li = 0;
    int zero = 0; /* a value taken was 0 */
#define TAKEN(T, TN, I)                                                                   \
    do {                                                                                  \
        if (lt && cmp_two(lt, ln, li, (T), (TN), (I), k) >= 0)                            \
            goto refuse;                                                                  \
        lt = (T);                                                                         \
        ln = (TN);                                                                        \
        li = (I);                                                                         \
    } while (0)
#define COPY(T, TN, I)                                                                    \
    for (Py_ssize_t q = 0; q < k; q++) {                                                  \
        const int64_t v = (T)[q * (TN) + (I)];                                            \
        zero |= !v;                                                                       \
        out[q * cap + r] = v;                                                             \
    }
#define CHECK(T, TN, I)                                                                   \
    for (Py_ssize_t q = 0; q < k; q++)                                                    \
        zero |= !(T)[q * (TN) + (I)];
    while (i < n && j < m) {
        int c = 0;
        for (Py_ssize_t q = 0; q < k; q++) {
            const int64_t x = cols[q * n + i], y = dcols[q * m + j];
            if (x != y) {
                c = x < y ? -1 : 1;
                break;
            }
        }
        if (c < 0) {
            TAKEN(cols, n, i);
            if (counts[i]) {
                COPY(cols, n, i);
                oc[r++] = counts[i];
            } else
                CHECK(cols, n, i);
            i++;
        } else if (c > 0) {
            TAKEN(dcols, m, j);
            before[j] = 0;
            if (dcounts[j]) {
                COPY(dcols, m, j);
                oc[r++] = dcounts[j];
            } else
                CHECK(dcols, m, j);
            j++;
        } else {
            TAKEN(cols, n, i);
            before[j] = counts[i];
            const int64_t now = counts[i] + dcounts[j];
            if (now) {
                COPY(cols, n, i);
                oc[r++] = now;
            } else
                CHECK(cols, n, i);
            i++;
            j++;
        }
    }
    for (; i < n; i++) {
        TAKEN(cols, n, i);
        if (counts[i]) {
            COPY(cols, n, i);
            oc[r++] = counts[i];
        } else
            CHECK(cols, n, i);
    }
    for (; j < m; j++) {
        TAKEN(dcols, m, j);
        before[j] = 0;
        if (dcounts[j]) {
            COPY(dcols, m, j);
            oc[r++] = dcounts[j];
        } else
            CHECK(dcols, m, j);
    }
#undef TAKEN
#undef COPY
#undef CHECK
    if (zero)
        goto refuse;
    if (r < cap)
        for (Py_ssize_t q = 1; q < k; q++)
            memmove(out + q * r, out + q * cap, (size_t)r * sizeof(int64_t));
    res = PyLong_FromSsize_t(r);
    goto done;
refuse:
    res = PyLong_FromSsize_t(-1);
done:
    PyBuffer_Release(&cb);
    PyBuffer_Release(&nb);
    PyBuffer_Release(&db);
    PyBuffer_Release(&dnb);
    PyBuffer_Release(&ocb);
    PyBuffer_Release(&onb);
    PyBuffer_Release(&bb);
    return res;
}

PyDoc_STRVAR(probe_sorted_doc,
"probe_sorted(keys, m, probe, n, order, li, rj, cap) -> int\n\n"
"Equal-key pairs of n int64 ``probe`` keys against m ascending ``keys`` whose row numbers\n"
"are ``order`` (a sorted index): the pairs (i, order[p]) for each probe row i ascending and\n"
"each position p of a key equal to probe[i] ascending, written into ``li[:t]``/``rj[:t]``.\n"
"Returns t; when there are more than ``cap`` pairs (the room in ``li``/``rj``) the first\n"
"``cap`` are written and -t is returned (the caller asks again with room for t).");

static PyObject *
probe_sorted(PyObject *self, PyObject *args)
{
    Py_buffer kb, pb, ob, lb, rb;
    Py_ssize_t m, n, cap;
    if (!PyArg_ParseTuple(args, "y*ny*ny*w*w*n", &kb, &m, &pb, &n, &ob, &lb, &rb, &cap))
        return NULL;
    PyObject *res = NULL;
    if (m < 0 || n < 0 || cap < 0 || check_size(&kb, m, "keys") || check_size(&pb, n, "probe") ||
        check_size(&ob, m, "order") || check_size(&lb, cap, "li") || check_size(&rb, cap, "rj"))
        goto done;
    const int64_t *keys = (const int64_t *)kb.buf, *probe = (const int64_t *)pb.buf;
    const int64_t *order = (const int64_t *)ob.buf;
    int64_t *li = (int64_t *)lb.buf, *rj = (int64_t *)rb.buf;
    /* one pass: the pairs are written while they fit, and counted on past ``cap`` */
    Py_ssize_t p = 0, lo = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        const int64_t x = probe[i];
        Py_ssize_t hi = m;
        if (i && x >= probe[i - 1]) {
            /* ascending probes (often sorted): gallop from the last answer */
            Py_ssize_t step = 1;
            while (lo + step < m && keys[lo + step] < x) {
                lo += step;
                step *= 2;
            }
            hi = lo + step < m ? lo + step + 1 : m;
        } else
            lo = 0;
        while (lo < hi) {  /* first key >= x */
            const Py_ssize_t mid = lo + (hi - lo) / 2;
            if (keys[mid] < x)
                lo = mid + 1;
            else
                hi = mid;
        }
        for (Py_ssize_t q = lo; q < m && keys[q] == x; q++) {
            if (p < cap) {
                li[p] = i;
                rj[p] = order[q];
            }
            p++;
        }
    }
    res = PyLong_FromSsize_t(p > cap ? -p : p);
done:
    PyBuffer_Release(&kb);
    PyBuffer_Release(&pb);
    PyBuffer_Release(&ob);
    PyBuffer_Release(&lb);
    PyBuffer_Release(&rb);
    return res;
}

/* (for the component join's rest step, platform/operators/_chain_rest.c) */
void
ls_sort_rows(const int64_t *cols, Py_ssize_t k, Py_ssize_t n, Py_ssize_t *idx, Py_ssize_t *tmp)
{
    sort_rows(cols, k, n, idx, tmp);
}

int
ls_cmp_rows(const int64_t *cols, Py_ssize_t k, Py_ssize_t n, Py_ssize_t a, Py_ssize_t b)
{
    return cmp_rows(cols, k, n, a, b);
}

/* join_chain: platform/operators/_chain.c (compiled into this extension) */
extern PyObject *ls_join_chain(PyObject *self, PyObject *args);
extern const char ls_join_chain_doc[];

static PyMethodDef methods[] = {
    {"consolidate", consolidate, METH_VARARGS, consolidate_doc},
    {"join_small", join_small, METH_VARARGS, join_small_doc},
    {"count_merge", count_merge, METH_VARARGS, count_merge_doc},
    {"rows_merge", rows_merge, METH_VARARGS, rows_merge_doc},
    {"probe_sorted", probe_sorted, METH_VARARGS, probe_sorted_doc},
    {"join_chain", ls_join_chain, METH_VARARGS, ls_join_chain_doc},
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
