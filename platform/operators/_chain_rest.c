/* The rest step of the compiled component join (``_kernels.join_chain``, _chain.c).
 *
 * Where MJoinOperator.join_step meets a large input whose fan-out on its one shared
 * variable is high (more than ``rest_fanout`` rows per key) and the inputs left form one
 * connected piece, it does not join the partial result through that input: it joins the
 * partial result with the rest's own join (_component_relation: the component join of
 * the inputs left, consolidated into a relation), none when that join or the rest's
 * smallest input has more than ``component_max`` rows.  ls_chain_rest does the same here,
 * the rest's join by the component join's own steps (ls_chain_step: the same order, rows
 * and stops), then consolidated (the rows sorted, first column most significant, equal
 * rows' counts summed, zeros left out) and probed with the partial result, the pairs in
 * Relation.join's order (probe row ascending, then the relation's row).  It declines (0:
 * the caller hands the step back to Python, as before) wherever the Python loop would do
 * something the kernel does not: a filter to evaluate within the rest's join, a step of
 * that join the kernel hands back, a shared value unbound.
 */
#include "_chain.h"

/* whether the inputs of ``set`` (a bit mask) are one connected piece (shared variables) */
int
ls_chain_connected(const chain_input *ins, int nin, uint64_t set)
{
    uint64_t got = 0, vm = 0;
    for (int x = 0; x < nin && !got; x++)
        if (set >> x & 1) {
            got = (uint64_t)1 << x;
            vm = ins[x].vmask;
        }
    for (int grew = 1; grew;) {
        grew = 0;
        for (int x = 0; x < nin; x++)
            if ((set >> x & 1) && !(got >> x & 1) && (ins[x].vmask & vm)) {
                got |= (uint64_t)1 << x;
                vm |= ins[x].vmask;
                grew = 1;
            }
    }
    return got == set;
}

/* the join of the inputs ``rest`` from the smallest, as MJoinOperator._component_join does
 * it (rt is empty on entry): 1 done (*fdone_r: the filters marked done on an empty result),
 * 0 declined, -1 error */
static int
rest_join(const chain_input *ins, int nin, const uint64_t *fm, Py_ssize_t nf, uint64_t rest,
          chain_table *rt, uint64_t *fdone_r, Py_ssize_t rest_fanout, vec64 *pairs)
{
    int first = -1;
    for (int x = 0; x < nin; x++)
        if ((rest >> x & 1) && (first < 0 || ins[x].size < ins[first].size))
            first = x;
    if (ls_chain_start(rt, &ins[first]) < 0)
        return -1;
    uint64_t rem = rest & ~((uint64_t)1 << first), bound = ins[first].vmask & ins[first].certain, fd = 0;
    for (;;) {
        const uint64_t ready = chain_ready(fm, nf, fd, bound);
        if (ready) {
            if (rt->n)
                return 0; /* (a filter to evaluate: Python's) */
            fd |= ready;
        }
        if (!rem || !rt->n)
            break;
        const int j = chain_next(ins, nin, rem, rt->vmask);
        const int rest_may = popcount64(rem) > 1 && ins[j].size > rest_fanout * rt->n;
        const int got = ls_chain_step(rt, &ins[j], rest_may, pairs);
        if (got <= 0)
            return got;
        rem &= ~((uint64_t)1 << j);
        bound |= ins[j].certain;
    }
    *fdone_r = fd;
    return 1;
}

int
ls_chain_rest(const chain_input *ins, int nin, const uint64_t *fm, Py_ssize_t nf, uint64_t rest,
              chain_table *cur, uint64_t *bound, uint64_t *fdone, Py_ssize_t rest_fanout,
              Py_ssize_t component_max, vec64 *pairs)
{
    uint64_t certain = 0;
    Py_ssize_t smallest = -1;
    for (int x = 0; x < nin; x++)
        if (rest >> x & 1) {
            certain |= ins[x].certain;
            if (smallest < 0 || ins[x].size < smallest)
                smallest = ins[x].size;
        }
    if (smallest < 0 || smallest > component_max)
        return 0;
    chain_table rt = {0};
    uint64_t fd = 0;
    Py_ssize_t *idx = NULL;
    int64_t *rcols = NULL, *rcounts = NULL;
    int ret = rest_join(ins, nin, fm, nf, rest, &rt, &fd, rest_fanout, pairs);
    if (ret <= 0 || rt.n > component_max) {
        ret = ret < 0 ? -1 : 0;
        goto out;
    }
    if (rt.n) {
        /* the rest's join consolidated (Relation.replace), then probed with cur */
        const Py_ssize_t n = rt.n, k = rt.k;
        idx = PyMem_Malloc((size_t)(2 * n) * sizeof(Py_ssize_t));
        rcols = PyMem_Malloc((size_t)(k * n + 1) * sizeof(int64_t));
        rcounts = PyMem_Malloc((size_t)(n + 1) * sizeof(int64_t));
        if (!idx || !rcols || !rcounts) {
            PyErr_NoMemory();
            ret = -1;
            goto out;
        }
        for (Py_ssize_t i = 0; i < n; i++)
            idx[i] = i;
        ls_sort_rows(rt.cols, k, n, idx, idx + n);
        Py_ssize_t m = 0;
        for (Py_ssize_t i = 0; i < n;) {
            const Py_ssize_t row = idx[i];
            int64_t total = rt.counts[row];
            Py_ssize_t j = i + 1;
            while (j < n && ls_cmp_rows(rt.cols, k, n, row, idx[j]) == 0)
                total += rt.counts[idx[j++]];
            if (total) {
                rcounts[m] = total;
                idx[m++] = row;
            }
            i = j;
        }
        for (Py_ssize_t c = 0; c < k; c++)
            for (Py_ssize_t i = 0; i < m; i++)
                rcols[c * m + i] = rt.cols[c * n + idx[i]];
        /* the relation as an input of one part, joined on every variable it shares with cur
         * (Relation.join's direct path: every shared value bound on both sides) */
        chain_input rel;
        memset(&rel, 0, sizeof rel);
        rel.nv = rt.k;
        memcpy(rel.vids, rt.vids, sizeof(int) * (size_t)rt.k);
        rel.vmask = rt.vmask;
        rel.nparts = 1;
        rel.parts[0].cols.buf = rcols;
        rel.parts[0].counts.buf = rcounts;
        rel.parts[0].m = m;
        rel.size = m;
        int p_idx[CHAIN_MAX_VARS], r_idx[CHAIN_MAX_VARS], extra[CHAIN_MAX_VARS], ks = 0, ke = 0;
        for (int c = 0; c < cur->k; c++)
            for (int v = 0; v < rel.nv; v++)
                if (rel.vids[v] == cur->vids[c]) {
                    p_idx[ks] = c;
                    r_idx[ks++] = v;
                }
        for (int v = 0; v < rel.nv; v++)
            if (!(cur->vmask >> rel.vids[v] & 1))
                extra[ke++] = v;
        for (int r = 0; r < ks; r++) {
            for (Py_ssize_t i = 0; i < cur->n; i++)
                if (!cur->cols[p_idx[r] * cur->n + i]) {
                    ret = 0; /* (unbound: Relation.join's general path) */
                    goto out;
                }
            for (Py_ssize_t i = 0; i < m; i++)
                if (!rcols[r_idx[r] * m + i]) {
                    ret = 0;
                    goto out;
                }
        }
        if (ls_chain_join(cur, &rel, p_idx, r_idx, ks, extra, ke, pairs, -1, -1) < 0) {
            ret = -1;
            goto out;
        }
    } else {
        cur->n = 0; /* (the rest's join is empty: so is the result) */
    }
    *bound |= certain;
    *fdone |= fd;
    ret = 1;
out:
    table_free(&rt);
    PyMem_Free(idx);
    PyMem_Free(rcols);
    PyMem_Free(rcounts);
    return ret;
}
