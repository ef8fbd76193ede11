/* The term index of a memory dictionary (``_ntparse.TermIndex``, platform/rdf/_termindex.c),
 * shared with the N-Triples scanner (platform/rdf/_ntparse.c), which fills it in place.
 *
 * An open-addressing table from a term's UTF-8 text to its id (ids start at 1; 0 marks an
 * empty slot, as it means "unbound" everywhere else).  A slot is 16 bytes: 32 bits of the
 * hash, the id, and the offset of the term's text in an arena owned by the index.  A lookup
 * reads one slot and the text it points to: two cache lines, where a Python ``dict`` of
 * ``str`` reads three (its index, its entry, the key object). */
#ifndef LS_TERMINDEX_H
#define LS_TERMINDEX_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    uint32_t tag; /* the hash's high 32 bits */
    uint32_t id;  /* 0: empty */
    uint64_t off; /* the text in the arena: a uint32 length, then the bytes */
} TermSlot;

typedef struct {
    PyObject_HEAD
    TermSlot *slots;
    size_t mask;
    Py_ssize_t n;
    char *arena;
    size_t used, cap;
} TermIndex;

extern PyTypeObject TermIndexType;

/* the bytes hashed 8 at a time (it was half of a scan byte by byte, FNV-1a) */
static inline uint64_t
hash_bytes(const char *p, Py_ssize_t n)
{
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ (uint64_t)n, w = 0;
    for (; n >= 8; p += 8, n -= 8, h ^= h >> 32, w = 0) {
        memcpy(&w, p, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdULL;
    }
    memcpy(&w, p, (size_t)n); /* (w is 0 here: the last bytes fill its low end) */
    h = (h ^ w) * 0xc4ceb9fe1a85ec53ULL;
    return h ^ (h >> 29);
}

/* the id of text [p, p + n) with hash h, or 0; *at is the slot where it would go */
static inline uint32_t
ti_find(const TermIndex *ix, const char *p, Py_ssize_t n, uint64_t h, size_t *at)
{
    const uint32_t tag = (uint32_t)(h >> 32);
    size_t j = h & ix->mask;
    for (;;) {
        const TermSlot *s = &ix->slots[j];
        if (s->id == 0)
            break;
        if (s->tag == tag) {
            uint32_t len;
            memcpy(&len, ix->arena + s->off, 4);
            if (len == (uint64_t)n && memcmp(ix->arena + s->off + 4, p, (size_t)n) == 0)
                return s->id;
        }
        j = (j + 1) & ix->mask;
    }
    *at = j;
    return 0;
}

/* the str of UTF-8 text [p, p + n); ascii: it is ASCII (copied, not decoded) */
static inline PyObject *
text_str(const char *p, Py_ssize_t n, int ascii)
{
    if (!ascii)
        return PyUnicode_DecodeUTF8(p, n, "strict");
    PyObject *u = PyUnicode_New(n, 127);
    if (u != NULL)
        memcpy(PyUnicode_1BYTE_DATA(u), p, (size_t)n);
    return u;
}

/* the texts a scan did not find in its buffer's table yet, resolved to ids in one pass
 * (ti_resolve) that prefetches the slots and texts it will read a few terms ahead: the
 * lookups' cache misses overlap instead of following one another */
typedef struct {
    const char **p;    /* the text, in the scanned buffer or (copied) at offset p in text */
    Py_ssize_t *len;
    uint64_t *h;
    unsigned char *how; /* 1: ASCII, its str made by copy; 2: the text is in text */
    Py_ssize_t n, cap;
    char *text; /* copies of the texts that are not bytes of the buffer */
    size_t used, room;
} TermBatch;

/* a scan's table of the distinct terms of its buffer (platform/rdf/_ntparse.c): raw bytes -> index */
typedef struct {
    uint64_t hash;
    const char *start;
    Py_ssize_t len;
    Py_ssize_t index; /* -1: empty slot */
} Slot;

typedef struct {
    Slot *slots;
    size_t mask;
    Py_ssize_t n;
    PyObject *terms;  /* list: the distinct terms (when ix is NULL) */
    PyObject *prefix; /* bytes: the blank node prefix */
    TermIndex *ix;    /* the term index of a memory dictionary, or NULL */
    char *scratch;    /* a term's canonical text when it is not its bytes in the buffer */
    size_t room;
    TermBatch batch;  /* with ix: the distinct terms, resolved to ids at the end */
} Table;

static inline int
table_grow(Table *tb)
{
    const size_t cap = (tb->mask + 1) * 2;
    Slot *s = PyMem_Calloc(cap, sizeof(Slot));
    if (s == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (size_t i = 0; i < cap; i++)
        s[i].index = -1;
    for (size_t i = 0; i <= tb->mask; i++) {
        Slot *o = &tb->slots[i];
        if (o->index < 0)
            continue;
        size_t j = o->hash & (cap - 1);
        while (s[j].index >= 0)
            j = (j + 1) & (cap - 1);
        s[j] = *o;
    }
    PyMem_Free(tb->slots);
    tb->slots = s;
    tb->mask = cap - 1;
    return 0;
}

/* append text [p, p + n) (hash h): copied when copy, else it must outlive the batch */
int batch_add(TermBatch *b, const char *p, Py_ssize_t n, uint64_t h, int ascii, int copy);
/* the id of every text of b in out (new texts get the next ids of list all, in order) */
int ti_resolve(TermIndex *ix, TermBatch *b, PyObject *all, int64_t *out);
void batch_free(TermBatch *b);

/* add text [p, p + n) with hash h and id at slot `at` (from ti_find); -1 on error */
int ti_add(TermIndex *ix, size_t at, const char *p, Py_ssize_t n, uint64_t h, Py_ssize_t id);

#endif
