/* Compiled N-Triples / N-Quads line scanner (the extension ``linkstream.rdf._ntparse``).
 *
 * Built by ``pip install`` with the system C compiler (pyproject.toml, optional): without
 * one the Python parser reads every line (linkstream.rdf.ntfast.native() says which runs).
 *
 * ``scan(buf, pos, prefix, graphs, langs, ids, terms)`` reads the lines of ``buf`` (UTF-8)
 * from byte ``pos`` on; returns ``(distinct, idx, end, lines, stopped)``: ``idx`` is bytes of
 * int64, 3 (graphs false) or 4 per statement (-1: the default graph), each the id of the term
 * in a memory dictionary's ``ids`` TermIndex (_termindex.c) / ``terms`` list (new terms added
 * as its encode does; ``distinct`` is then None) or, when those are None, an index into ``distinct``, the
 * distinct terms in the order they first occur; ``end`` is where reading stopped (a line
 * start), ``lines`` the lines read before it (blank and comment lines included), ``stopped``
 * whether the line at ``end`` is one this scanner does not decide.
 *
 * It reads the lines ``S P O [G] . [# comment]`` (spaces or tabs between) whose IRIs have the
 * simple ASCII form of ntriples._SIMPLE_IRI, blank-node labels are ASCII, literals valid
 * UTF-8 with valid escapes, an optional ^^<IRI> (not rdf:langString / rdf:dirLangString) or
 * a language tag found in ``langs`` (the Python parser's checked tags), and gives the
 * Python parser's terms (linkstream.rdf.ntriples).  Every other line (other IRIs, triple
 * terms, a new language tag, a CR inside, any error) stops the scan: the Python parser
 * reads it (accept, or reject with its reason): this code need only be right on what it takes.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_termindex.h"

/* character classes of the simple IRI (ntriples._SIMPLE_IRI) */
#define C_SCHEME1 1   /* [A-Za-z] */
#define C_SCHEME 2    /* [A-Za-z0-9+.-] */
#define C_HOST 4      /* [A-Za-z0-9._~-] */
#define C_PATH 8      /* [A-Za-z0-9._~!$&'()*+,;=:@/-] */
#define C_QUERY 16    /* C_PATH and ? */
#define C_LABEL 32    /* blank node label: [A-Za-z0-9_.-] */
#define C_LABEL1 64   /* first label character: [A-Za-z0-9_] */

static unsigned char cls[256];

static void
init_classes(void)
{
    for (int c = 0; c < 256; c++) {
        unsigned char v = 0;
        const int alpha = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
        const int digit = c >= '0' && c <= '9';
        if (alpha)
            v |= C_SCHEME1;
        if (alpha || digit || c == '+' || c == '.' || c == '-')
            v |= C_SCHEME;
        if (alpha || digit || c == '.' || c == '-' || c == '_' || c == '~')
            v |= C_HOST;
        if (alpha || digit || (c && strchr("._~!$&'()*+,;=:@/-", c)))
            v |= C_PATH | C_QUERY;
        if (c == '?')
            v |= C_QUERY;
        if (alpha || digit || c == '_' || c == '.' || c == '-')
            v |= C_LABEL;
        if (alpha || digit || c == '_')
            v |= C_LABEL1;
        cls[c] = v;
    }
}

/* the end of an <IRI> token starting at p (p[0] == '<'), or NULL if it is not one of the
 * simple form */
static const char *
simple_iri(const char *p, const char *end)
{
    const unsigned char *s = (const unsigned char *)p + 1, *e = (const unsigned char *)end;
    if (s >= e || !(cls[*s] & C_SCHEME1))
        return NULL;
    s++;
    while (s < e && (cls[*s] & C_SCHEME))
        s++;
    if (e - s < 3 || s[0] != ':' || s[1] != '/' || s[2] != '/')
        return NULL;
    s += 3;
    const unsigned char *h = s;
    while (s < e && (cls[*s] & C_HOST))
        s++;
    if (s == h)
        return NULL;
    if (s < e && *s == ':') {
        s++;
        while (s < e && *s >= '0' && *s <= '9')
            s++;
    }
    if (s < e && *s == '/')
        while (s < e && (cls[*s] & C_PATH))
            s++;
    for (const char *d = "?#"; *d; d++) /* a query, then a fragment */
        if (s < e && *s == (unsigned char)*d)
            for (s++; s < e && (cls[*s] & C_QUERY); s++)
                ;
    if (s >= e || *s != '>')
        return NULL;
    return (const char *)s + 1;
}

/* the end of a blank node label starting at p (after "_:"), or NULL; a label does not end
 * with '.' (the dots after it are read as what follows, as the regular expression does) */
static const char *
label_end(const char *p, const char *end)
{
    const unsigned char *s = (const unsigned char *)p, *e = (const unsigned char *)end;
    if (s >= e || !(cls[*s] & C_LABEL1))
        return NULL;
    const unsigned char *last = s;
    s++;
    while (s < e && (cls[*s] & C_LABEL)) {
        if (*s != '.')
            last = s;
        s++;
    }
    return (const char *)last + 1;
}

/* the length of the valid UTF-8 sequence (no surrogates, no overlong forms, at most
 * U+10FFFF) starting at s, or 0 */
static int
utf8_len(const unsigned char *s, const unsigned char *e)
{
    const unsigned char c = s[0];
    const int n = c < 0xC2 ? 0 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : c < 0xF5 ? 4 : 0;
    if (n == 0 || e - s < n)
        return 0;
    for (int i = 1; i < n; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    if ((c == 0xE0 && s[1] < 0xA0) || (c == 0xF0 && s[1] < 0x90)) /* overlong */
        return 0;
    if ((c == 0xED && s[1] >= 0xA0) || (c == 0xF4 && s[1] >= 0x90)) /* surrogate, > U+10FFFF */
        return 0;
    return n;
}

static const char XSD_STRING[] = "<http://www.w3.org/2001/XMLSchema#string>";
static const char RDF_LANGSTRING[] = "<http://www.w3.org/1999/02/22-rdf-syntax-ns#langString>";
static const char RDF_DIRLANGSTRING[] = "<http://www.w3.org/1999/02/22-rdf-syntax-ns#dirLangString>";

static int
token_is(const char *p, const char *q, const char *lit)
{
    const size_t n = strlen(lit);
    return (size_t)(q - p) == n && memcmp(p, lit, n) == 0;
}

/* one term: [start, start + len) of the buffer is its key (for a blank node "_:label",
 * without the prefix); a literal's parts are kept to build its canonical form */
typedef struct {
    const char *start;
    Py_ssize_t len;
    int ascii;           /* no byte >= 0x80 in the key */
    const char *lex;     /* literals: the text between the quotes */
    Py_ssize_t lexlen;
    int esc;             /* the text holds escapes */
    PyObject *tag;       /* the canonical language tag (borrowed from langs), or NULL */
    const char *dt;      /* the datatype token "<...>", or NULL (none, or xsd:string) */
    Py_ssize_t dtlen;
} Term;

/* kinds a position accepts */
#define K_IRI 1
#define K_BNODE 2
#define K_LITERAL 4

static int
hexval(unsigned char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* the code point of the \uXXXX / \UXXXXXXXX escape at s (s[0] == 'u' or 'U'), its length in
 * *n; -1 when it is not a valid one (the Python parser says why) */
static long
escape_code(const unsigned char *s, const unsigned char *e, int *n)
{
    const int digits = s[0] == 'u' ? 4 : 8;
    if (e - s < digits + 1)
        return -1;
    long v = 0;
    for (int i = 1; i <= digits; i++) {
        const int h = hexval(s[i]);
        if (h < 0)
            return -1;
        v = v * 16 + h;
    }
    if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
        return -1;
    *n = digits + 1;
    return v;
}

/* the end of the language tag token at p (after '@'), as ntriples._LANGTOK reads it */
static const char *
lang_end(const char *p, const char *end)
{
#define ALPHA(c) (((c) >= 'a' && (c) <= 'z') || ((c) >= 'A' && (c) <= 'Z'))
#define ALNUM(c) (ALPHA(c) || ((c) >= '0' && (c) <= '9'))
    const char *s = p;
    while (s < end && ALPHA(*s))
        s++;
    if (s == p)
        return NULL;
    for (;;) {
        if (s + 2 < end && s[0] == '-' && s[1] == '-' && ALPHA(s[2])) {
            s += 2;
            while (s < end && ALPHA(*s))
                s++;
            return s;
        }
        if (s + 1 < end && s[0] == '-' && ALNUM(s[1])) {
            s++;
            while (s < end && ALNUM(*s))
                s++;
            continue;
        }
        return s;
    }
#undef ALPHA
#undef ALNUM
}

/* read one term at p; returns the end of its text or NULL (not decided here).  langs maps
 * a language tag token to its canonical form (the Python parser's checked tags); a tag not
 * in it is left to the Python parser. */
static const char *
read_term(const char *p, const char *end, int kinds, Term *t, PyObject *langs)
{
    if (p >= end)
        return NULL;
    t->lex = NULL;
    if (*p == '<') {
        if (!(kinds & K_IRI) || (p + 1 < end && p[1] == '<'))
            return NULL;
        const char *q = simple_iri(p, end);
        if (q == NULL)
            return NULL;
        t->start = p;
        t->len = q - p;
        t->ascii = 1;
        return q;
    }
    if (*p == '_') {
        if (!(kinds & K_BNODE) || p + 1 >= end || p[1] != ':')
            return NULL;
        const char *q = label_end(p + 2, end);
        if (q == NULL)
            return NULL;
        t->start = p;
        t->len = q - p;
        t->ascii = 1;
        return q;
    }
    if (*p != '"' || !(kinds & K_LITERAL))
        return NULL;
    const unsigned char *s = (const unsigned char *)p + 1, *e = (const unsigned char *)end;
    int ascii = 1, esc = 0;
    while (s < e && *s != '"') {
        const unsigned char c = *s;
        if (c == '\n' || c == '\r')
            return NULL;
        if (c == '\\') {
            if (s + 1 >= e)
                return NULL;
            const unsigned char x = s[1];
            esc = 1;
            if (x == 'u' || x == 'U') {
                int n;
                if (escape_code(s + 1, e, &n) < 0)
                    return NULL;
                s += 1 + n;
            }
            else if (x && strchr("tbnrf\"'\\", x))
                s += 2;
            else
                return NULL;
        }
        else if (c >= 0x80) {
            const int n = utf8_len(s, e);
            if (n == 0)
                return NULL;
            ascii = 0;
            s += n;
        }
        else
            s++;
    }
    if (s >= e)
        return NULL;
    const char *close = (const char *)s + 1; /* after the closing quote */
    t->start = p;
    t->ascii = ascii;
    t->lex = p + 1;
    t->lexlen = close - p - 2;
    t->esc = esc;
    t->tag = NULL;
    t->dt = NULL;
    t->dtlen = 0;
    const char *q = close;
    while (q < end && (*q == ' ' || *q == '\t'))
        q++;
    if (q < end && *q == '@') {
        const char *le = lang_end(q + 1, end);
        if (le == NULL || langs == NULL)
            return NULL;
        PyObject *key = PyUnicode_FromStringAndSize(q + 1, le - q - 1);
        if (key == NULL) {
            PyErr_Clear();
            return NULL;
        }
        PyObject *tag = PyDict_GetItemWithError(langs, key);
        Py_DECREF(key);
        if (tag == NULL || !PyUnicode_Check(tag)) {
            PyErr_Clear();
            return NULL; /* a tag the Python parser has not checked yet */
        }
        t->tag = tag;
        t->len = le - p;
        return le;
    }
    if (q + 1 < end && q[0] == '^' && q[1] == '^') {
        const char *d = q + 2;
        while (d < end && (*d == ' ' || *d == '\t'))
            d++;
        if (d >= end || *d != '<')
            return NULL;
        const char *de = simple_iri(d, end);
        if (de == NULL || token_is(d, de, RDF_LANGSTRING) || token_is(d, de, RDF_DIRLANGSTRING))
            return NULL;
        if (token_is(d, de, XSD_STRING)) {
            t->len = close - p; /* "lex": the same term as the plain literal */
            return de;
        }
        t->dt = d;
        t->dtlen = de - d;
        t->len = de - p;
        return de;
    }
    t->len = close - p;
    return close;
}

/* the canonical text of a literal (as terms.Literal.n3 writes it) into out (room for
 * 2 * lexlen + 3 + the suffix); returns its length */
static Py_ssize_t
literal_text(const Term *t, char *out, const char *tag, Py_ssize_t taglen)
{
    char *o = out;
    *o++ = '"';
    if (!t->esc) {
        memcpy(o, t->lex, t->lexlen);
        o += t->lexlen;
    }
    else {
        const unsigned char *s = (const unsigned char *)t->lex, *e = s + t->lexlen;
        while (s < e) {
            if (*s != '\\') {
                *o++ = (char)*s++;
                continue;
            }
            const unsigned char x = s[1];
            long c;
            if (x == 'u' || x == 'U') {
                int n = 0;
                c = escape_code(s + 1, e, &n); /* checked by read_term */
                s += 1 + n;
            }
            else {
                s += 2;
                c = x == 't' ? '\t' : x == 'b' ? '\b' : x == 'n' ? '\n' : x == 'r' ? '\r' : x == 'f' ? '\f' : x;
            }
            /* re-escaped as escape_string does: \\ \" \n \r; any other character as itself */
            if (c == '\\' || c == '"' || c == '\n' || c == '\r') {
                *o++ = '\\';
                *o++ = c == '\n' ? 'n' : c == '\r' ? 'r' : (char)c;
            }
            else if (c < 0x80)
                *o++ = (char)c;
            else { /* UTF-8 */
                const int n = c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
                for (int i = n - 1; i > 0; i--, c >>= 6)
                    o[i] = (char)(0x80 | (c & 0x3F));
                o[0] = (char)((0xF00 >> n) | c);
                o += n;
            }
        }
    }
    *o++ = '"';
    if (tag != NULL) {
        *o++ = '@';
        memcpy(o, tag, taglen);
        o += taglen;
    }
    else if (t->dt != NULL) {
        *o++ = '^';
        *o++ = '^';
        memcpy(o, t->dt, t->dtlen);
        o += t->dtlen;
    }
    return o - out;
}

/* ------------------------------------------------------------ distinct terms of a scan */

/* the term's text as linkstream.rdf.terms writes it (UTF-8): its bytes in the buffer, or
 * built in tb->scratch for a blank node ("_:" + prefix + label) and a literal with escapes,
 * a language tag or a datatype; NULL on error */
static const char *
canonical(const Term *t, Table *tb, Py_ssize_t *n)
{
    const int blank = t->start[0] == '_';
    if (!blank && (t->lex == NULL || !(t->esc || t->tag != NULL || t->dt != NULL))) {
        *n = t->len;
        return t->start;
    }
    const char *tag = NULL;
    Py_ssize_t taglen = 0, np = PyBytes_GET_SIZE(tb->prefix);
    if (!blank && t->tag != NULL && (tag = PyUnicode_AsUTF8AndSize(t->tag, &taglen)) == NULL)
        return NULL;
    const size_t need = blank ? (size_t)(t->len + np) : (size_t)(2 * t->lexlen + taglen + t->dtlen + 8);
    if (need > tb->room) {
        char *g = PyMem_Realloc(tb->scratch, need);
        if (g == NULL) {
            PyErr_NoMemory();
            return NULL;
        }
        tb->scratch = g;
        tb->room = need;
    }
    if (blank) {
        memcpy(tb->scratch, "_:", 2);
        memcpy(tb->scratch + 2, PyBytes_AS_STRING(tb->prefix), np);
        memcpy(tb->scratch + 2 + np, t->start + 2, t->len - 2);
        *n = t->len + np;
    }
    else
        *n = literal_text(t, tb->scratch, tag, taglen);
    return tb->scratch;
}

/* the index of term t in the table, adding it; -1 on error */
static Py_ssize_t
table_index(Table *tb, const Term *t)
{
    const uint64_t h = hash_bytes(t->start, t->len);
    size_t j = h & tb->mask;
    for (;;) {
        Slot *s = &tb->slots[j];
        if (s->index < 0)
            break;
        if (s->hash == h && s->len == t->len && memcmp(s->start, t->start, t->len) == 0)
            return s->index;
        j = (j + 1) & tb->mask;
    }
    Py_ssize_t n, index;
    const char *p = canonical(t, tb, &n);
    if (p == NULL)
        return -1;
    if (tb->ix != NULL) { /* resolved to the dictionary's ids at the end of the scan */
        const int raw = p == t->start;
        index = batch_add(&tb->batch, p, n, raw ? h : hash_bytes(p, n), raw && t->ascii, !raw) < 0 ? -1 : tb->n;
    }
    else {
        PyObject *u = text_str(p, n, t->ascii && p == t->start);
        index = u == NULL || PyList_Append(tb->terms, u) < 0 ? -1 : tb->n;
        Py_XDECREF(u);
    }
    if (index < 0)
        return -1;
    Slot *s = &tb->slots[j];
    s->hash = h;
    s->start = t->start;
    s->len = t->len;
    s->index = index;
    tb->n++;
    if ((size_t)tb->n * 2 > tb->mask + 1 && table_grow(tb) < 0)
        return -1;
    return index;
}

/* ------------------------------------------------------------ lines */

static int
is_strip(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\x0b' || c == '\x0c';
}

static const char *
skip_ws(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    return p;
}

/* parse the stripped line [p, end): 1 and the terms (n = 3 or 4) when accepted, 0 when
 * the Python parser must read it, -1 for a blank line or a comment */
static int
parse_line(const char *p, const char *end, Term *terms, int *n, PyObject *langs)
{
    if (p == end || *p == '#')
        return -1;
    static const int kinds[3] = {K_IRI | K_BNODE, K_IRI, K_IRI | K_BNODE | K_LITERAL};
    const char *q = p;
    for (int k = 0; k < 3; k++) {
        if ((q = read_term(q, end, kinds[k], &terms[k], langs)) == NULL)
            return 0;
        q = skip_ws(q, end);
    }
    *n = 3;
    if (q < end && (*q == '<' || *q == '_')) {
        q = read_term(q, end, K_IRI | K_BNODE, &terms[3], langs);
        if (q == NULL)
            return 0;
        q = skip_ws(q, end);
        *n = 4;
    }
    if (q >= end || *q != '.')
        return 0;
    q = skip_ws(q + 1, end);
    if (q < end) {
        if (*q != '#')
            return 0;
        if (memchr(q, '\r', end - q) != NULL)
            return 0; /* a CR ends a statement: the Python parser splits the line */
    }
    return 1;
}

static PyObject *
scan(PyObject *Py_UNUSED(self), PyObject *args)
{
    Py_buffer buf;
    Py_ssize_t pos;
    PyObject *prefix, *langs, *ids, *all;
    int graphs;
    if (!PyArg_ParseTuple(args, "y*nSpO!OO", &buf, &pos, &prefix, &graphs, &PyDict_Type, &langs, &ids, &all))
        return NULL;
    if (ids == Py_None || all == Py_None)
        ids = all = NULL;
    else if (!PyObject_TypeCheck(ids, &TermIndexType) || !PyList_Check(all)) {
        PyErr_SetString(PyExc_TypeError, "ids must be a TermIndex and terms a list (or both None)");
        PyBuffer_Release(&buf);
        return NULL;
    }
    PyObject *result = NULL;
    const char *base = buf.buf, *bend = base + buf.len;
    const int width = graphs ? 4 : 3;
    Table tb = {NULL, 15, 0, NULL, prefix, (TermIndex *)ids, NULL, 0, {0}};
    Py_ssize_t cap = 4096, nidx = 0, lines = 0;
    int64_t *idx = PyMem_Malloc(cap * sizeof(int64_t));
    tb.slots = PyMem_Malloc(16 * sizeof(Slot));
    tb.terms = PyList_New(0);
    if (idx == NULL || tb.slots == NULL || tb.terms == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (int i = 0; i < 16; i++)
        tb.slots[i].index = -1;
    if (pos < 0 || pos > buf.len) {
        PyErr_SetString(PyExc_ValueError, "pos out of range");
        goto done;
    }
    const char *line = base + pos;
    int stopped = 0;
    while (line < bend) {
        const char *nl = memchr(line, '\n', bend - line);
        const char *eol = nl ? nl : bend, *next = nl ? nl + 1 : bend;
        const char *p = line, *e = eol;
        while (p < e && is_strip(*p))
            p++;
        while (e > p && is_strip(e[-1]))
            e--;
        Term terms[4];
        int n = 0;
        const int r = parse_line(p, e, terms, &n, langs);
        if (r == 0) {
            stopped = 1;
            break;
        }
        if (r == 1) {
            if (nidx + 4 > cap) {
                cap *= 2;
                int64_t *g = PyMem_Realloc(idx, cap * sizeof(int64_t));
                if (g == NULL) {
                    PyErr_NoMemory();
                    goto done;
                }
                idx = g;
            }
            for (int k = 0; k < width; k++) {
                if (k >= n) {
                    idx[nidx++] = -1;
                    continue;
                }
                const Py_ssize_t i = table_index(&tb, &terms[k]);
                if (i < 0)
                    goto done;
                idx[nidx++] = i;
            }
        }
        lines++;
        line = next;
    }
    if (tb.ix != NULL) { /* the index of a distinct term -> its id */
        int64_t *ids_of = PyMem_Malloc((size_t)(tb.n + 1) * sizeof(int64_t));
        const int bad = ids_of == NULL || ti_resolve(tb.ix, &tb.batch, all, ids_of) < 0;
        for (Py_ssize_t i = 0; !bad && i < nidx; i++)
            idx[i] = idx[i] < 0 ? -1 : ids_of[idx[i]];
        PyMem_Free(ids_of);
        if (bad) {
            if (!PyErr_Occurred())
                PyErr_NoMemory();
            goto done;
        }
    }
    PyObject *ib = PyBytes_FromStringAndSize((const char *)idx, nidx * (Py_ssize_t)sizeof(int64_t));
    if (ib == NULL)
        goto done;
    result = Py_BuildValue("(ONnnO)", ids == NULL ? tb.terms : Py_None, ib, (Py_ssize_t)(line - base), lines,
                           stopped ? Py_True : Py_False);
done:
    Py_XDECREF(tb.terms);
    PyMem_Free(tb.scratch);
    batch_free(&tb.batch);
    PyMem_Free(tb.slots);
    PyMem_Free(idx);
    PyBuffer_Release(&buf);
    return result;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS,
     "scan(buf, pos, prefix, graphs, langs, ids, terms) -> (distinct, idx, end, lines, stopped)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_ntparse", "Compiled N-Triples / N-Quads line scanner.", -1, methods,
};

PyMODINIT_FUNC
PyInit__ntparse(void)
{
    init_classes();
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && (PyType_Ready(&TermIndexType) < 0 || PyModule_AddObjectRef(m, "TermIndex", (PyObject *)&TermIndexType) < 0))
        Py_CLEAR(m);
    return m;
}
