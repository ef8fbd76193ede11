/* The compiled component join of linkstream.operators.chain (``_kernels.join_chain``).
 *
 * Compiled into the extension ``linkstream.operators._kernels`` with _kernels.c (which
 * lists it among its methods); the same conventions: numpy arrays through the buffer
 * protocol, no numpy headers, no reference kept to a buffer after the call.  Its outputs
 * are new bytearrays (the result's size is known only at the end).
 */
#include "_chain.h"

/* a buffer of an int64 C-contiguous array of exactly items int64; 1 ok, 0 not usable (no
 * error set), -1 error */
static int
get_i64(PyObject *o, Py_buffer *b, Py_ssize_t items)
{
    if (PyObject_GetBuffer(o, b, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyErr_Clear();
        return 0;
    }
    const char *f = b->format ? b->format : "B";
    if (*f == '<' || *f == '=' || *f == '@')
        f++;
    if (b->itemsize != 8 || (strcmp(f, "l") && strcmp(f, "q")) || b->len != items * 8) {
        PyBuffer_Release(b);
        return 0;
    }
    return 1;
}

static uint64_t
mix64(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* cur joined with input in (every shared value bound on both sides, checked by the
 * caller): per part, the pairs (i, j) of equal shared values, i ascending then j
 * ascending; the probe's columns then the input's own ones.  Replaces *cur. */
int
ls_chain_join(chain_table *cur, const chain_input *in, const int *p_idx, const int *r_idx, int ks,
           const int *extra, int ke, vec64 *pairs, int ix_pcol, int ix_t)
{
    const Py_ssize_t n = cur->n;
    Py_ssize_t starts[CHAIN_MAX_PARTS + 1];
    pairs->n = 0;
    for (int p = 0; p < in->nparts; p++) {
        starts[p] = pairs->n / 2;
        const chain_part *pt = &in->parts[p];
        const Py_ssize_t m = pt->m;
        const int64_t *rc = (const int64_t *)pt->cols.buf;
        if (ix_pcol >= 0 && pt->ix_held[ix_t]) {
            /* the caller's sorted index (one key variable): per probe row, the run of its
             * key found by binary search, in index order (a stable sort: row ascending) --
             * the pairs of the caller's Relation.join on the same index */
            const int64_t *keys = (const int64_t *)pt->ixk[ix_t].buf, *order = (const int64_t *)pt->ixo[ix_t].buf;
            const int64_t *pc = cur->cols + (Py_ssize_t)ix_pcol * n;
            for (Py_ssize_t i = 0; i < n; i++) {
                const int64_t v = pc[i];
                Py_ssize_t lo = 0, hi = m;
                while (lo < hi) {
                    Py_ssize_t mid = lo + (hi - lo) / 2;
                    if (keys[mid] < v)
                        lo = mid + 1;
                    else
                        hi = mid;
                }
                for (; lo < m && keys[lo] == v; lo++) {
                    if (order[lo] < 0 || order[lo] >= m) { /* (not an index of this part) */
                        PyErr_SetString(PyExc_ValueError, "join_chain: an index row out of range");
                        return -1;
                    }
                    if (vec_push2(pairs, i, order[lo]) < 0)
                        return -1;
                }
            }
        } else if (n * m <= CHAIN_NESTED_PAIRS || ks == 0) {
            for (Py_ssize_t i = 0; i < n; i++)
                for (Py_ssize_t j = 0; j < m; j++) {
                    int r = 0;
                    while (r < ks && cur->cols[p_idx[r] * n + i] == rc[r_idx[r] * m + j])
                        r++;
                    if (r == ks && vec_push2(pairs, i, j) < 0)
                        return -1;
                }
        } else {
            Py_ssize_t size = 16;
            while (size < 2 * m)
                size *= 2;
            Py_ssize_t *head = PyMem_Malloc((size_t)(size + m) * sizeof(Py_ssize_t));
            if (!head) {
                PyErr_NoMemory();
                return -1;
            }
            Py_ssize_t *next = head + size;
            for (Py_ssize_t h = 0; h < size; h++)
                head[h] = -1;
            for (Py_ssize_t j = m - 1; j >= 0; j--) {
                uint64_t h = 0;
                for (int r = 0; r < ks; r++)
                    h = mix64(h ^ (uint64_t)rc[r_idx[r] * m + j]);
                h &= (uint64_t)(size - 1);
                next[j] = head[h];
                head[h] = j;
            }
            for (Py_ssize_t i = 0; i < n; i++) {
                uint64_t h = 0;
                for (int r = 0; r < ks; r++)
                    h = mix64(h ^ (uint64_t)cur->cols[p_idx[r] * n + i]);
                h &= (uint64_t)(size - 1);
                for (Py_ssize_t j = head[h]; j >= 0; j = next[j]) {
                    int r = 0;
                    while (r < ks && cur->cols[p_idx[r] * n + i] == rc[r_idx[r] * m + j])
                        r++;
                    if (r == ks && vec_push2(pairs, i, j) < 0) {
                        PyMem_Free(head);
                        return -1;
                    }
                }
            }
            PyMem_Free(head);
        }
    }
    starts[in->nparts] = pairs->n / 2;
    const Py_ssize_t t = pairs->n / 2;
    const int ko = cur->k + ke;
    int64_t *cols = PyMem_Malloc((size_t)(ko * t + 1) * sizeof(int64_t));
    int64_t *counts = PyMem_Malloc((size_t)(t + 1) * sizeof(int64_t));
    if (!cols || !counts) {
        PyMem_Free(cols);
        PyMem_Free(counts);
        PyErr_NoMemory();
        return -1;
    }
    for (int p = 0; p < in->nparts; p++) {
        const chain_part *pt = &in->parts[p];
        const Py_ssize_t m = pt->m;
        const int64_t *rc = (const int64_t *)pt->cols.buf, *rn = (const int64_t *)pt->counts.buf;
        for (Py_ssize_t q = starts[p]; q < starts[p + 1]; q++) {
            const Py_ssize_t i = pairs->a[2 * q], j = pairs->a[2 * q + 1];
            for (int c = 0; c < cur->k; c++)
                cols[c * t + q] = cur->cols[c * n + i];
            for (int c = 0; c < ke; c++)
                cols[(cur->k + c) * t + q] = rc[extra[c] * m + j];
            counts[q] = cur->counts[i] * rn[j];
        }
    }
    table_free(cur);
    cur->cols = cols;
    cur->counts = counts;
    cur->n = t;
    for (int c = 0; c < ke; c++) {
        cur->vids[cur->k + c] = in->vids[extra[c]];
        cur->vmask |= (uint64_t)1 << in->vids[extra[c]];
    }
    cur->k = ko;
    return 0;
}

int
ls_chain_index_on(const chain_input *in, uint64_t shared)
{
    for (int t = 0; t < in->nix; t++)
        if (shared == (uint64_t)1 << in->ix_vid[t])
            return t;
    return -1;
}

/* *cur (empty) set to input in's rows, its parts one after the other; -1 on no memory */
int
ls_chain_start(chain_table *cur, const chain_input *in)
{
    cur->k = in->nv;
    memcpy(cur->vids, in->vids, sizeof(int) * (size_t)in->nv);
    cur->vmask = in->vmask;
    cur->n = in->size;
    cur->cols = PyMem_Malloc((size_t)(cur->k * cur->n + 1) * sizeof(int64_t));
    cur->counts = PyMem_Malloc((size_t)(cur->n + 1) * sizeof(int64_t));
    if (!cur->cols || !cur->counts) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t at = 0;
    for (int p = 0; p < in->nparts; p++) {
        const chain_part *pt = &in->parts[p];
        const int64_t *pc = (const int64_t *)pt->cols.buf;
        for (int c = 0; c < cur->k; c++)
            memcpy(cur->cols + c * cur->n + at, pc + c * pt->m, (size_t)pt->m * sizeof(int64_t));
        memcpy(cur->counts + at, pt->counts.buf, (size_t)pt->m * sizeof(int64_t));
        at += pt->m;
    }
    return 0;
}

/* One plain step: cur joined with input in, as the caller's loop joins it (rest_may: the
 * loop may join the rest as one relation at this step).  1 joined (replaces *cur), 0 not
 * (the caller's step: a large input without a usable index, a shared value unbound), -1
 * error. */
int
ls_chain_step(chain_table *cur, const chain_input *in, int rest_may, vec64 *pairs)
{
    /* (a large input: the caller's relation keeps a sorted key index for it, which a
     * hash table built here at every call would not beat; when the caller gave that
     * index and its key is this step's one shared variable, the step is a plain join
     * on it -- unless the caller's loop may join the rest as one relation instead) */
    int ix_pcol = -1, ix_t = -1;
    if (rest_may || in->size > CHAIN_BIG_INPUT) {
        ix_t = ls_chain_index_on(in, in->vmask & cur->vmask);
        if (ix_t >= 0 && (!rest_may || in->ix_fan[ix_t] == CHAIN_FAN_LOW)) {
            for (int c = 0; c < cur->k; c++)
                if (cur->vids[c] == in->ix_vid[ix_t])
                    ix_pcol = c;
            const int64_t *pc = cur->cols + (Py_ssize_t)ix_pcol * cur->n;
            for (Py_ssize_t i = 0; i < cur->n && ix_pcol >= 0; i++)
                if (!pc[i])
                    ix_pcol = -1; /* (unbound: the caller's general path) */
        }
        if (ix_pcol < 0)
            return 0;
    }
    int p_idx[CHAIN_MAX_VARS], r_idx[CHAIN_MAX_VARS], extra[CHAIN_MAX_VARS], ks = 0, ke = 0;
    for (int c = 0; c < cur->k; c++)
        for (int v = 0; v < in->nv; v++)
            if (in->vids[v] == cur->vids[c]) {
                p_idx[ks] = c;
                r_idx[ks++] = v;
            }
    for (int v = 0; v < in->nv; v++)
        if (!(cur->vmask >> in->vids[v] & 1))
            extra[ke++] = v;
    for (int r = 0; r < ks; r++) {
        const int64_t *col = cur->cols + p_idx[r] * cur->n;
        for (Py_ssize_t i = 0; i < cur->n && ix_pcol < 0; i++)
            if (!col[i])
                return 0;
        for (int p = 0; p < in->nparts; p++) {
            if (ix_pcol >= 0 && in->parts[p].ix_held[ix_t]) /* (the caller's index: every key bound) */
                continue;
            const Py_ssize_t m = in->parts[p].m;
            const int64_t *rc = (const int64_t *)in->parts[p].cols.buf + r_idx[r] * m;
            for (Py_ssize_t i = 0; i < m; i++)
                if (!rc[i])
                    return 0;
        }
    }
    if (ls_chain_join(cur, in, p_idx, r_idx, ks, extra, ke, pairs, ix_pcol, ix_t) < 0)
        return -1;
    return 1;
}

enum { CHAIN_DONE = 0, CHAIN_FILTER = 1, CHAIN_STEP = 2, CHAIN_UNUSABLE = 3 };

const char ls_join_chain_doc[] =
"join_chain(inputs, fmasks, cur, cur_vars, bound, remaining, fdone, rest_fanout[, component_max])\n"
"-> tuple\n\n"
"The join of a connected component of a multiway join's inputs, in the order and with the\n"
"stops of MJoinOperator._component_join (linkstream.operators.chain has the Python\n"
"meaning).  ``inputs``: per input, (var ids, certain-variables mask, parts[, index]), parts a\n"
"tuple of its non-empty parts' (cols (k, m) int64, counts (m,) int64), index None or (var\n"
"id, fan-out 0 unknown / 1 low / 2 high, per part None or (its keys on that variable\n"
"ascending, their rows)): a large input whose one shared variable is the index's is joined\n"
"here through it (not handed back) unless the step may join the rest as one relation and\n"
"the fan-out is not low; where it is high and ``component_max`` is given, the rest is joined\n"
"here as one relation (_chain_rest.c) unless that join or its smallest input is larger.\n"
"``fmasks``: per filter,\n"
"the mask of its variables.  ``cur``: None (start from the smallest remaining input) or\n"
"(cols, counts) over ``cur_vars``.  ``bound``, ``remaining`` (inputs, by position) and\n"
"``fdone`` (filters) are bit masks.  Joins while the partial result is not empty: the next\n"
"input is the smallest remaining one sharing a variable with it (else the smallest), and\n"
"the rows of each step are the pairs of equal shared values, probe row ascending, then the\n"
"input's part, then its row.  Returns (status, j, cols, counts, n, cur_vars, bound,\n"
"remaining, fdone), cols and counts as bytearrays of the (k, n) int64 table and its\n"
"counts, and status 0 (done: every input joined, or the result empty), 1 (a filter not in\n"
"fdone reads only bound variables: apply it), 2 (input j is next and is large next to the\n"
"partial result or has more than 2,048 rows, or a shared value is unbound: the caller does\n"
"that step) or 3 (an\n"
"argument it does not read, nothing done).";

PyObject *
ls_join_chain(PyObject *self, PyObject *args)
{
    PyObject *inputs, *fmasks_o, *cur_o, *cur_vars_o;
    unsigned long long bound_a, rem_a, fdone_a;
    Py_ssize_t rest_fanout, component_max = -1;
    if (!PyArg_ParseTuple(args, "O!O!OOKKKn|n", &PyTuple_Type, &inputs, &PyTuple_Type, &fmasks_o, &cur_o,
                          &cur_vars_o, &bound_a, &rem_a, &fdone_a, &rest_fanout, &component_max))
        return NULL;
    uint64_t bound = bound_a, remaining = rem_a, fdone = fdone_a;
    PyObject *res = NULL;
    int status = CHAIN_UNUSABLE, nj = -1;
    const Py_ssize_t nin = PyTuple_GET_SIZE(inputs), nf = PyTuple_GET_SIZE(fmasks_o);
    chain_input *ins = NULL;
    uint64_t fm[64];
    chain_table cur = {0};
    vec64 pairs = {0};
    Py_buffer ccb, cnb;
    int cur_held = 0;
    if (nin < 1 || nin > CHAIN_MAX_INPUTS || nf > 64)
        goto unusable;
    for (Py_ssize_t f = 0; f < nf; f++) {
        fm[f] = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(fmasks_o, f));
        if (fm[f] == (uint64_t)-1 && PyErr_Occurred())
            goto done;
    }
    ins = PyMem_Calloc((size_t)nin, sizeof(chain_input));
    if (!ins) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t x = 0; x < nin; x++) {
        PyObject *t = PyTuple_GET_ITEM(inputs, x);
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) < 3 || PyTuple_GET_SIZE(t) > 3 + CHAIN_MAX_IX)
            goto unusable;
        PyObject *vs = PyTuple_GET_ITEM(t, 0), *ps = PyTuple_GET_ITEM(t, 2);
        chain_input *in = &ins[x];
        if (!PyTuple_Check(vs) || !PyTuple_Check(ps) || PyTuple_GET_SIZE(vs) > CHAIN_MAX_VARS ||
            PyTuple_GET_SIZE(ps) > CHAIN_MAX_PARTS)
            goto unusable;
        in->certain = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(t, 1));
        if (in->certain == (uint64_t)-1 && PyErr_Occurred())
            goto done;
        in->nv = (int)PyTuple_GET_SIZE(vs);
        for (int v = 0; v < in->nv; v++) {
            long id = PyLong_AsLong(PyTuple_GET_ITEM(vs, v));
            if (id < 0 || id >= CHAIN_MAX_VARS) {
                PyErr_Clear();
                goto unusable;
            }
            in->vids[v] = (int)id;
            in->vmask |= (uint64_t)1 << id;
        }
        for (Py_ssize_t p = 0; p < PyTuple_GET_SIZE(ps); p++) {
            PyObject *pp = PyTuple_GET_ITEM(ps, p);
            if (!PyTuple_Check(pp) || PyTuple_GET_SIZE(pp) != 2)
                goto unusable;
            chain_part *pt = &in->parts[in->nparts];
            PyObject *cn = PyTuple_GET_ITEM(pp, 1);
            Py_ssize_t m = PyObject_Length(cn);
            if (m < 0) {
                PyErr_Clear();
                goto unusable;
            }
            if (get_i64(cn, &pt->counts, m) != 1)
                goto unusable;
            if (get_i64(PyTuple_GET_ITEM(pp, 0), &pt->cols, in->nv * m) != 1) {
                PyBuffer_Release(&pt->counts);
                goto unusable;
            }
            pt->m = m;
            pt->held = 1;
            in->nparts++;
            in->size += m;
        }
        for (Py_ssize_t q = 3; q < PyTuple_GET_SIZE(t); q++) {
            PyObject *ix = PyTuple_GET_ITEM(t, q);
            if (ix == Py_None)
                continue;
            /* (key variable id, fan-out, per part None or (sorted keys, their rows)) */
            const int it = in->nix;
            if (!PyTuple_Check(ix) || PyTuple_GET_SIZE(ix) != 3)
                goto unusable;
            PyObject *ixp = PyTuple_GET_ITEM(ix, 2);
            long vid = PyLong_AsLong(PyTuple_GET_ITEM(ix, 0));
            long fan = PyLong_AsLong(PyTuple_GET_ITEM(ix, 1));
            if (vid < 0 || vid >= CHAIN_MAX_VARS || fan < CHAIN_FAN_UNKNOWN || fan > CHAIN_FAN_HIGH ||
                !(in->vmask >> vid & 1) || !PyTuple_Check(ixp) || PyTuple_GET_SIZE(ixp) != in->nparts) {
                PyErr_Clear();
                goto unusable;
            }
            for (int p = 0; p < in->nparts; p++) {
                PyObject *pp = PyTuple_GET_ITEM(ixp, p);
                chain_part *pt = &in->parts[p];
                if (pp == Py_None) /* (a part without: joined as the other inputs are) */
                    continue;
                if (!PyTuple_Check(pp) || PyTuple_GET_SIZE(pp) != 2)
                    goto unusable;
                if (get_i64(PyTuple_GET_ITEM(pp, 0), &pt->ixk[it], pt->m) != 1)
                    goto unusable;
                if (get_i64(PyTuple_GET_ITEM(pp, 1), &pt->ixo[it], pt->m) != 1) {
                    PyBuffer_Release(&pt->ixk[it]);
                    goto unusable;
                }
                pt->ix_held[it] = 1;
            }
            in->ix_vid[it] = (int)vid;
            in->ix_fan[it] = (int)fan;
            in->nix++;
        }
    }
    /* the partial result to start from */
    if (cur_o == Py_None) {
        int first = -1;
        for (int x = 0; x < nin; x++)
            if ((remaining >> x & 1) && (first < 0 || ins[x].size < ins[first].size))
                first = x;
        if (first < 0)
            goto unusable;
        if (ls_chain_start(&cur, &ins[first]) < 0)
            goto done;
        remaining &= ~((uint64_t)1 << first);
        bound = ins[first].vmask & ins[first].certain;
    } else {
        if (!PyTuple_Check(cur_o) || PyTuple_GET_SIZE(cur_o) != 2 || !PyTuple_Check(cur_vars_o) ||
            PyTuple_GET_SIZE(cur_vars_o) > CHAIN_MAX_VARS)
            goto unusable;
        cur.k = (int)PyTuple_GET_SIZE(cur_vars_o);
        for (int v = 0; v < cur.k; v++) {
            long id = PyLong_AsLong(PyTuple_GET_ITEM(cur_vars_o, v));
            if (id < 0 || id >= CHAIN_MAX_VARS) {
                PyErr_Clear();
                goto unusable;
            }
            cur.vids[v] = (int)id;
            cur.vmask |= (uint64_t)1 << id;
        }
        PyObject *cn = PyTuple_GET_ITEM(cur_o, 1);
        Py_ssize_t n = PyObject_Length(cn);
        if (n < 0) {
            PyErr_Clear();
            goto unusable;
        }
        if (get_i64(cn, &cnb, n) != 1)
            goto unusable;
        if (get_i64(PyTuple_GET_ITEM(cur_o, 0), &ccb, cur.k * n) != 1) {
            PyBuffer_Release(&cnb);
            goto unusable;
        }
        cur_held = 1;
        cur.n = n;
        cur.cols = PyMem_Malloc((size_t)(cur.k * n + 1) * sizeof(int64_t));
        cur.counts = PyMem_Malloc((size_t)(n + 1) * sizeof(int64_t));
        if (!cur.cols || !cur.counts) {
            PyErr_NoMemory();
            goto done;
        }
        memcpy(cur.cols, ccb.buf, (size_t)(cur.k * n) * sizeof(int64_t));
        memcpy(cur.counts, cnb.buf, (size_t)n * sizeof(int64_t));
    }
    status = CHAIN_DONE;
    for (;;) {
        /* filters that read only bound variables (marked done at once on an empty result) */
        const uint64_t ready = chain_ready(fm, nf, fdone, bound);
        if (ready) {
            if (cur.n) {
                status = CHAIN_FILTER;
                break;
            }
            fdone |= ready;
        }
        if (!remaining || !cur.n)
            break;
        const int j = chain_next(ins, (int)nin, remaining, cur.vmask);
        const chain_input *in = &ins[j];
        const int rest_may = popcount64(remaining) > 1 && in->size > rest_fanout * cur.n;
        int got = ls_chain_step(&cur, in, rest_may, &pairs);
        if (got < 0)
            goto done;
        const int ix_t = got ? -1 : ls_chain_index_on(in, in->vmask & cur.vmask);
        if (!got && rest_may && component_max >= 0 && ix_t >= 0 && in->ix_fan[ix_t] == CHAIN_FAN_HIGH &&
            ls_chain_connected(ins, (int)nin, remaining)) {
            /* (the caller's loop joins the partial result with the rest's own join here) */
            got = ls_chain_rest(ins, (int)nin, fm, nf, remaining, &cur, &bound, &fdone, rest_fanout, component_max,
                                &pairs);
            if (got < 0)
                goto done;
            if (got) {
                remaining = 0;
                continue;
            }
        }
        if (!got) {
            status = CHAIN_STEP;
            nj = j;
            break;
        }
        remaining &= ~((uint64_t)1 << j);
        bound |= in->certain;
    }
    {
        PyObject *cb = PyByteArray_FromStringAndSize((const char *)cur.cols,
                                                     (Py_ssize_t)(cur.k * cur.n) * (Py_ssize_t)sizeof(int64_t));
        PyObject *nb2 = PyByteArray_FromStringAndSize((const char *)cur.counts,
                                                      cur.n * (Py_ssize_t)sizeof(int64_t));
        PyObject *vt = PyTuple_New(cur.k);
        if (!cb || !nb2 || !vt) {
            Py_XDECREF(cb);
            Py_XDECREF(nb2);
            Py_XDECREF(vt);
            goto done;
        }
        for (int c = 0; c < cur.k; c++)
            PyTuple_SET_ITEM(vt, c, PyLong_FromLong(cur.vids[c]));
        res = Py_BuildValue("(iiNNnNKKK)", status, nj, cb, nb2, cur.n, vt, (unsigned long long)bound,
                            (unsigned long long)remaining, (unsigned long long)fdone);
    }
    goto done;
unusable:
    PyErr_Clear();
    res = Py_BuildValue("(iiOOnOKKK)", CHAIN_UNUSABLE, -1, Py_None, Py_None, (Py_ssize_t)0, Py_None,
                        bound_a, rem_a, fdone_a);
done:
    if (ins) {
        for (Py_ssize_t x = 0; x < nin; x++)
            for (int p = 0; p < ins[x].nparts; p++)
            {
                if (ins[x].parts[p].held) {
                    PyBuffer_Release(&ins[x].parts[p].cols);
                    PyBuffer_Release(&ins[x].parts[p].counts);
                }
                for (int t = 0; t < CHAIN_MAX_IX; t++)
                    if (ins[x].parts[p].ix_held[t]) {
                        PyBuffer_Release(&ins[x].parts[p].ixk[t]);
                        PyBuffer_Release(&ins[x].parts[p].ixo[t]);
                    }
            }
        PyMem_Free(ins);
    }
    if (cur_held) {
        PyBuffer_Release(&ccb);
        PyBuffer_Release(&cnb);
    }
    table_free(&cur);
    PyMem_Free(pairs.a);
    return res;
}
