/* Shared by the compiled component join's sources (_chain.c, _chain_rest.c), compiled into
 * the extension ``linkstream.operators._kernels``: its tables, inputs and steps. */
#ifndef LS_CHAIN_H
#define LS_CHAIN_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* a growable int64 array (PyMem) */
typedef struct {
    int64_t *a;
    Py_ssize_t n, cap;
} vec64;

static inline int
vec_push2(vec64 *v, int64_t x, int64_t y)
{
    if (v->n + 2 > v->cap) {
        Py_ssize_t cap = v->cap ? 2 * v->cap : 256;
        int64_t *a = PyMem_Realloc(v->a, (size_t)cap * sizeof(int64_t));
        if (!a) {
            PyErr_NoMemory();
            return -1;
        }
        v->a = a;
        v->cap = cap;
    }
    v->a[v->n++] = x;
    v->a[v->n++] = y;
    return 0;
}

#define CHAIN_MAX_INPUTS 64
#define CHAIN_MAX_PARTS 2
#define CHAIN_MAX_VARS 63
/* a step of at most this many candidate pairs compares them all; above, a hash table on
 * the input part's key columns */
#define CHAIN_NESTED_PAIRS 1024
/* an input of more rows is joined by the caller (status 2) */
#define CHAIN_BIG_INPUT 2048
/* key indexes per input (the join plan kept: the keys its steps were joined on) */
#define CHAIN_MAX_IX 2

typedef struct {
    Py_buffer cols, counts;
    Py_ssize_t m;
    int held;
    /* the part's sorted key indexes on the input's index variables (chain_input.ix_vid):
     * the keys ascending and their rows (a stable argsort), where ix_held */
    Py_buffer ixk[CHAIN_MAX_IX], ixo[CHAIN_MAX_IX];
    int ix_held[CHAIN_MAX_IX];
} chain_part;

typedef struct {
    int nv;
    int vids[CHAIN_MAX_VARS];
    uint64_t vmask, certain;
    int nparts;
    chain_part parts[CHAIN_MAX_PARTS];
    Py_ssize_t size;
    /* the caller's sorted key indexes of the parts (nix of them): each one's variable id,
     * and the input's fan-out on it as the caller's loop last counted it (CHAIN_FAN_*):
     * low, the loop joins a plain step with the index even where it may join the rest as
     * one relation; high, it joins the rest as one relation there (ls_chain_rest) */
    int nix;
    int ix_vid[CHAIN_MAX_IX], ix_fan[CHAIN_MAX_IX];
} chain_input;

/* the current table: (k, n) column-major, PyMem-owned */
typedef struct {
    int k;
    int vids[CHAIN_MAX_VARS];
    uint64_t vmask;
    Py_ssize_t n;
    int64_t *cols, *counts;
} chain_table;

static inline void
table_free(chain_table *t)
{
    PyMem_Free(t->cols);
    PyMem_Free(t->counts);
    t->cols = t->counts = NULL;
}

static inline int
popcount64(uint64_t x)
{
    int c = 0;
    while (x) {
        x &= x - 1;
        c++;
    }
    return c;
}

/* the filters not in fdone that read only bound variables (fm: their variables' masks) */
static inline uint64_t
chain_ready(const uint64_t *fm, Py_ssize_t nf, uint64_t fdone, uint64_t bound)
{
    uint64_t ready = 0;
    for (Py_ssize_t f = 0; f < nf; f++)
        if (!(fdone >> f & 1) && (fm[f] & ~bound) == 0)
            ready |= (uint64_t)1 << f;
    return ready;
}

/* the input joined next: the smallest of ``remaining`` sharing a variable with the partial
 * result (variables ``vmask``), else the smallest; the first on ties */
static inline int
chain_next(const chain_input *ins, int nin, uint64_t remaining, uint64_t vmask)
{
    uint64_t pool = 0;
    for (int x = 0; x < nin; x++)
        if ((remaining >> x & 1) && (ins[x].vmask & vmask))
            pool |= (uint64_t)1 << x;
    if (!pool)
        pool = remaining;
    int j = -1;
    for (int x = 0; x < nin; x++)
        if ((pool >> x & 1) && (j < 0 || ins[x].size < ins[j].size))
            j = x;
    return j;
}

/* an input's fan-out on its index variable, as the caller's loop last counted it */
enum { CHAIN_FAN_UNKNOWN = 0, CHAIN_FAN_LOW = 1, CHAIN_FAN_HIGH = 2 };

/* _chain.c: cur joined with input in on the shared variables (p_idx in cur, r_idx in in),
 * in's columns extra added; through its parts' indexes ix_t on ix_pcol (a column of cur) if >= 0 */
int ls_chain_join(chain_table *cur, const chain_input *in, const int *p_idx, const int *r_idx, int ks,
                  const int *extra, int ke, vec64 *pairs, int ix_pcol, int ix_t);
/* _chain.c: the index of input in whose variable is the one of ``shared`` (a mask), -1 none */
int ls_chain_index_on(const chain_input *in, uint64_t shared);
/* _chain.c: *cur (empty) set to input in's rows */
int ls_chain_start(chain_table *cur, const chain_input *in);
/* _chain.c: one plain step, cur joined with input in (see there) */
int ls_chain_step(chain_table *cur, const chain_input *in, int rest_may, vec64 *pairs);
/* _chain_rest.c: the step that joins cur with the rest of the inputs as one relation */
int ls_chain_rest(const chain_input *ins, int nin, const uint64_t *fm, Py_ssize_t nf, uint64_t rest,
                  chain_table *cur, uint64_t *bound, uint64_t *fdone, Py_ssize_t rest_fanout,
                  Py_ssize_t component_max, vec64 *pairs);
int ls_chain_connected(const chain_input *ins, int nin, uint64_t set);
/* _kernels.c: a stable sort of row numbers by their rows (first column most significant) */
void ls_sort_rows(const int64_t *cols, Py_ssize_t k, Py_ssize_t n, Py_ssize_t *idx, Py_ssize_t *tmp);
int ls_cmp_rows(const int64_t *cols, Py_ssize_t k, Py_ssize_t n, Py_ssize_t a, Py_ssize_t b);

#endif
