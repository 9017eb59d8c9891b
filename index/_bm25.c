/* The lexical lane's BM25 search, compiled: one query's own-text and context scores, and its top k.
 *
 * Why C: the numpy search (index.lexical_topk, index.lexical_context) spends most of a query in
 * per-call overhead (~60 numpy calls) and in passes over whole arrays (a bincount over every row
 * at 100k memories); this walks each query term's postings once, with the GIL released.
 *
 * Exactness: every score is the numpy reference's, bit for bit, and so is the top k (ties to the
 * lower label). The same IEEE double operations run in the same order: a term's part of a row is
 * fl(fl(tf / norm) * w) with norm = fl(fl(fl(dl * scale) + base) + tf) (or fl(tf + k1) when b = 0),
 * a row's own-text score is the sum of its terms' parts in query order from 0.0, its context score
 * is added to that, and a context key's tf is the sum of its window's weighted tfs in the block
 * order of Episodes.spread. No transcendental function is computed here: idf comes from the caller
 * (numpy's log1p is not the C library's on every machine), and the file is built with
 * -ffp-contract=off (no fused multiply-add changes a rounding).
 *
 * Own-text top k: below ``prune_from`` rows every posting is summed into a row accumulator (it fits
 * the cache); from there, with b = 0, MaxScore finds it term at a time without reading most
 * postings of common terms (``top_pruned``); with b > 0 a term's bound would need every row's length,
 * so every posting is summed.
 *
 * State: a Kernel keeps scratch between calls: the row accumulator (held at 0.0 outside what the
 * last query touched), a hash map of the context scores by label (sized to the query, not to the
 * labels: they are store-wide), marks per row, and the context rows. Map entries and marks are
 * valid where their stamp is the current generation, so starting a query costs nothing and a
 * query abandoned half way leaves nothing behind. The owner serialises calls (the lexical index's
 * lock).
 *
 * One query is up to four calls: spread (context terms: key sums and df) -> context (their scores
 * per label) -> plain (own-text terms, the context scores added, the top k) -> lookup (the scores
 * of rows the caller names once the top k is known). Each refuses to run out of that order.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* -- buffers ----------------------------------------------------------------------------------- */

/* A 1-d contiguous buffer of itemsize ``size`` whose format is one of ``kinds`` (struct codes). */
static int get_buf(PyObject *obj, Py_buffer *view, Py_ssize_t size, const char *kinds, const char *what) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return -1;
    const char *fmt = view->format ? view->format : "B";
    if (*fmt == '<' || *fmt == '=' || *fmt == '@') fmt++;
    if (view->ndim > 1 || view->itemsize != size || strlen(fmt) != 1 || !strchr(kinds, *fmt)) {
        PyErr_Format(PyExc_TypeError, "%s: expected a 1-d contiguous array of %zd-byte items (%s), got format %s",
                     what, size, kinds, view->format ? view->format : "B");
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* The buffers one call holds, released together at its end. */
typedef struct {
    Py_buffer views[6];
    int n;
} Held;

/* Hold ``obj``'s buffer (as ``get_buf``) until ``release_held``; NULL (an error set) when it does not fit. */
static Py_buffer *hold(Held *held, PyObject *obj, Py_ssize_t size, const char *kinds, const char *what) {
    if (held->n >= (int)(sizeof held->views / sizeof held->views[0])) { /* a call holding more: widen views */
        PyErr_SetString(PyExc_SystemError, "BM25 kernel: more buffers held than Held has room for");
        return NULL;
    }
    Py_buffer *view = &held->views[held->n];
    if (get_buf(obj, view, size, kinds, what) < 0) return NULL;
    held->n++;
    return view;
}

static void release_held(Held *held) {
    while (held->n > 0) PyBuffer_Release(&held->views[--held->n]);
}

#define I32 "iI"
#define I64 "lLqQ"
#define F64 "d"
#define BOOL "?bB"
#define TABLE 16 /* term frequencies below this take their BM25 part from a per-term table (b = 0) */

/* -- accumulators ------------------------------------------------------------------------------ */

/* Resize the block at ``*(void **)slot`` to ``count`` items of ``size`` bytes (left as it was on failure). */
static int resize(void *slot, Py_ssize_t count, size_t size) {
    void *grown = realloc(*(void **)slot, (size_t)count * size);
    if (!grown) return -1;
    *(void **)slot = grown;
    return 0;
}

/* A capacity at least ``need``: ``have`` (or ``least``) doubled as often as it takes. */
static Py_ssize_t doubled(Py_ssize_t have, Py_ssize_t least, Py_ssize_t need) {
    Py_ssize_t cap = have ? have : least;
    while (cap < need) cap *= 2;
    return cap;
}

/* Over rows: marks valid where their stamp is the current generation (starting a query is one
   increment, and a query abandoned half way leaves no mark behind). */
typedef struct {
    uint32_t *stamp;
    Py_ssize_t cap;
    uint32_t gen;
} Marks;

static int marks_reserve(Marks *s, Py_ssize_t need) {
    if (need <= s->cap) return 0;
    Py_ssize_t cap = doubled(s->cap, 1024, need);
    if (resize(&s->stamp, cap, sizeof(uint32_t)) < 0) return -1;
    memset(s->stamp + s->cap, 0, (size_t)(cap - s->cap) * sizeof(uint32_t)); /* 0: never a generation */
    s->cap = cap;
    return 0;
}

static void marks_start(Marks *s) {
    if (++s->gen == 0) { /* wrapped after 2^32 generations: forget every stamp */
        memset(s->stamp, 0, (size_t)s->cap * sizeof(uint32_t));
        s->gen = 1;
    }
}

static inline void set_mark(Marks *s, int64_t i) { s->stamp[i] = s->gen; }

static inline int marked(const Marks *s, int64_t i) { return i >= 0 && i < s->cap && s->stamp[i] == s->gen; }

/* Over labels: an open-addressing hash map from label to a sum, valid where its stamp is the current
   generation. Labels come from a store-wide sequence, so one actor's span of them can be as wide as
   the whole store: a table indexed by label would cost every actor's kernel that much memory. A
   query's context entries are a few thousand, so the map is sized to them (twice, a power of 2). */
typedef struct {
    int64_t *keys;
    double *acc;
    uint32_t *stamp;
    int64_t *touched; /* the slots taken this generation, in first-touch order */
    Py_ssize_t n_touched, cap;
    int shift; /* 64 - log2(cap): the hash's top bits pick the slot */
    uint32_t gen;
} Map;

/* Room for ``entries`` distinct keys in one generation (called before a generation starts: growing
   forgets every entry). */
static int map_reserve(Map *m, Py_ssize_t entries) {
    Py_ssize_t cap = 1024;
    int bits = 10;
    while (cap < 2 * entries) cap *= 2, bits++;
    if (cap <= m->cap) return 0;
    if (resize(&m->keys, cap, sizeof(int64_t)) < 0 || resize(&m->acc, cap, sizeof(double)) < 0 ||
        resize(&m->stamp, cap, sizeof(uint32_t)) < 0 || resize(&m->touched, cap, sizeof(int64_t)) < 0)
        return -1; /* the map keeps its old capacity: every block is at least that long */
    memset(m->stamp, 0, (size_t)cap * sizeof(uint32_t));
    m->cap = cap, m->shift = 64 - bits, m->n_touched = 0, m->gen = 0;
    return 0;
}

static void map_start(Map *m) {
    m->n_touched = 0;
    if (++m->gen == 0) {
        memset(m->stamp, 0, (size_t)m->cap * sizeof(uint32_t));
        m->gen = 1;
    }
}

/* sum[key] += v (0.0 + v for a key new this generation). The map never fills: map_reserve sized it. */
static inline void map_add(Map *m, int64_t key, double v) {
    Py_ssize_t mask = m->cap - 1, slot = (Py_ssize_t)(((uint64_t)key * 0x9E3779B97F4A7C15ULL) >> m->shift);
    while (m->stamp[slot] == m->gen && m->keys[slot] != key) slot = (slot + 1) & mask;
    if (m->stamp[slot] != m->gen) {
        m->stamp[slot] = m->gen;
        m->keys[slot] = key;
        m->acc[slot] = 0.0 + v;
        m->touched[m->n_touched++] = slot;
    } else {
        m->acc[slot] += v;
    }
}

static void map_free(Map *m) {
    free(m->keys);
    free(m->acc);
    free(m->stamp);
    free(m->touched);
    memset(m, 0, sizeof(*m));
}

/* Over rows: the accumulator is kept at 0.0 outside the rows the last query touched (``dense_clear``
   puts them back), so adding needs no stamp test: a row is new where it still holds 0.0 (every
   part added is > 0), and the test is an increment, not a branch (a hot loop of a query's
   postings, whose rows are new about half the time). */
typedef struct {
    double *acc;
    int64_t *touched;
    Py_ssize_t n_touched, cap;
} Dense;

static int dense_reserve(Dense *s, Py_ssize_t need) {
    if (need <= s->cap) return 0;
    Py_ssize_t cap = doubled(s->cap, 1024, need);
    if (resize(&s->acc, cap, sizeof(double)) < 0) return -1;
    memset(s->acc + s->cap, 0, (size_t)(cap - s->cap) * sizeof(double));
    if (resize(&s->touched, cap + 1, sizeof(int64_t)) < 0) return -1; /* + 1: the write ahead */
    s->cap = cap;
    return 0;
}

static void dense_clear(Dense *s) {
    for (Py_ssize_t j = 0; j < s->n_touched; j++) s->acc[s->touched[j]] = 0.0;
    s->n_touched = 0;
}

static inline void dense_add(Dense *s, int64_t i, double v) {
    s->touched[s->n_touched] = i;
    s->n_touched += (s->acc[i] == 0.0) & (v != 0.0); /* a 0.0 part (none here) would stay untouched */
    s->acc[i] += v;
}

static void dense_free(Dense *s) {
    free(s->acc);
    free(s->touched);
    memset(s, 0, sizeof(*s));
}

static void marks_free(Marks *s) {
    free(s->stamp);
    memset(s, 0, sizeof(*s));
}

/* -- the kernel -------------------------------------------------------------------------------- */

/* A context row and its score (own text + context once ``plain`` has added them). */
typedef struct {
    int64_t row;
    double score;
} Keyed;

typedef struct {
    PyObject_HEAD
    Dense rows;   /* own-text scores of every row (lengths used: b > 0) */
    Map labels;   /* context key sums (spread) and context scores (context) per label */
    Marks marks;  /* rows scored apart (the context rows; the pruned search's first pass) */
    Keyed *keyed; /* the context rows and their final scores, by row */
    Py_ssize_t n_keyed, cap_keyed;
    int plain_ready; /* ``plain`` answered: ``lookup`` may read its context rows */
    Py_ssize_t prune_from; /* rows from which a b = 0 search prunes (MaxScore) instead of summing every posting */
    /* context entries of the current query, term-major: term index, label (key), tf, own row (-1:
       a spread key, whose length is its key length) */
    int32_t *e_term;
    int64_t *e_label, *e_row;
    double *e_tf;
    Py_ssize_t n_entries, cap_entries;
    Py_ssize_t n_spread_terms;
    int spread_ready;  /* ``spread`` made the entries ``context`` scores next */
    int context_ready; /* ``context`` left scores per label for the ``plain`` after it */
    int busy; /* a call is walking the accumulators with the GIL released */
} Kernel;

static int entries_reserve(Kernel *k, Py_ssize_t need) {
    if (need <= k->cap_entries) return 0;
    Py_ssize_t cap = doubled(k->cap_entries, 1024, need);
    if (resize(&k->e_term, cap, sizeof(int32_t)) < 0 || resize(&k->e_label, cap, sizeof(int64_t)) < 0 ||
        resize(&k->e_row, cap, sizeof(int64_t)) < 0 || resize(&k->e_tf, cap, sizeof(double)) < 0)
        return -1;
    k->cap_entries = cap;
    return 0;
}

static int keyed_reserve(Kernel *k, Py_ssize_t need) {
    if (need <= k->cap_keyed) return 0;
    Py_ssize_t cap = doubled(k->cap_keyed, 256, need);
    if (resize(&k->keyed, cap, sizeof(Keyed)) < 0) return -1;
    k->cap_keyed = cap;
    return 0;
}

static void Kernel_dealloc(Kernel *self) {
    dense_free(&self->rows);
    map_free(&self->labels);
    marks_free(&self->marks);
    free(self->keyed);
    free(self->e_term);
    free(self->e_label);
    free(self->e_row);
    free(self->e_tf);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int enter(Kernel *self) {
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "a BM25 kernel is used by one search at a time (its owner's lock)");
        return -1;
    }
    self->busy = 1;
    return 0;
}

/* Postings of one term: two int32 buffers of one length (rows, tfs). */
typedef struct {
    Py_buffer rows, tfs;
    Py_ssize_t n;
    int held;
} Term;

static void release_terms(Term *terms, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++)
        if (terms[i].held) {
            PyBuffer_Release(&terms[i].rows);
            PyBuffer_Release(&terms[i].tfs);
        }
    PyMem_Free(terms);
}

/* ``seq``: a list of (rows, tfs) pairs. */
static Term *get_terms(PyObject *seq, Py_ssize_t *count) {
    PyObject *fast = PySequence_Fast(seq, "terms must be a sequence of (rows, tfs) pairs");
    if (!fast) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    Term *terms = PyMem_Calloc((size_t)(n ? n : 1), sizeof(Term));
    if (!terms) {
        Py_DECREF(fast);
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pair = PySequence_Fast_GET_ITEM(fast, i);
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
            PyErr_SetString(PyExc_TypeError, "each term must be a (rows, tfs) tuple");
            goto fail;
        }
        if (get_buf(PyTuple_GET_ITEM(pair, 0), &terms[i].rows, 4, I32, "term rows") < 0) goto fail;
        if (get_buf(PyTuple_GET_ITEM(pair, 1), &terms[i].tfs, 4, I32, "term tfs") < 0) {
            PyBuffer_Release(&terms[i].rows);
            goto fail;
        }
        terms[i].held = 1;
        terms[i].n = terms[i].rows.len / 4;
        if (terms[i].tfs.len / 4 != terms[i].n) {
            PyErr_SetString(PyExc_ValueError, "a term's rows and tfs differ in length");
            goto fail;
        }
    }
    Py_DECREF(fast);
    *count = n;
    return terms;
fail:
    Py_DECREF(fast);
    release_terms(terms, n);
    return NULL;
}

/* rows must index ``nrows``-long arrays: checked once per call, before the GIL is released. */
static int check_rows(Term *terms, Py_ssize_t n, Py_ssize_t nrows) {
    for (Py_ssize_t t = 0; t < n; t++) {
        const int32_t *rows = terms[t].rows.buf;
        for (Py_ssize_t i = 0; i < terms[t].n; i++)
            if (rows[i] < 0 || rows[i] >= nrows) {
                PyErr_Format(PyExc_IndexError, "posting row %d outside the index's %zd rows", rows[i], nrows);
                return -1;
            }
    }
    return 0;
}

/* Follow ``links`` once from ``cur`` as Episodes._step does (-1 stays -1, labels past the array
   land on its last slot, the sentinel). */
static inline int64_t step(const int64_t *links, Py_ssize_t n, int64_t cur) {
    if (cur < 0) return links[n - 1];
    return links[cur < n - 1 ? cur : n - 1];
}

/* Read a sequence of floats into a new PyMem block: ``*n`` of them (any count when ``*n`` is -1, which
   then becomes the count). */
static double *get_floats(PyObject *seq, Py_ssize_t *n, const char *what) {
    PyObject *fast = PySequence_Fast(seq, what);
    if (!fast) return NULL;
    Py_ssize_t got = PySequence_Fast_GET_SIZE(fast);
    if (*n >= 0 && got != *n) {
        Py_DECREF(fast);
        PyErr_Format(PyExc_ValueError, "%s: expected %zd values", what, *n);
        return NULL;
    }
    *n = got;
    double *out = PyMem_Malloc((size_t)(got ? got : 1) * sizeof(double));
    if (!out) {
        Py_DECREF(fast);
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < got; i++) {
        out[i] = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(fast, i));
        if (out[i] == -1.0 && PyErr_Occurred()) {
            Py_DECREF(fast);
            PyMem_Free(out);
            return NULL;
        }
    }
    Py_DECREF(fast);
    return out;
}

/* Whether ``label`` is placed in an episode, as Episodes.members reads it (labels past the array land
   on the sentinel, which is no member; a negative label, which the store never makes, is none either). */
static inline int placed(const uint8_t *member, Py_ssize_t n, int64_t label) {
    return label >= 0 && member[label < n - 1 ? label : n - 1];
}

/* spread(terms, alive, row_label, member, prev, next, block_weights) -> [df of each term]
 *
 * For each context term (in query order): its live postings of memories outside every episode key
 * on their own text; each episode member's posting spreads to the keys whose windows reach it,
 * block by block as Episodes.spread lays them out (the member itself at weight 1, then d = 1..W
 * steps back, then d = 1..W steps forward), each block over the postings in order. A key's tf is
 * the sum of what reaches it, in that order. df counts the keys (own-text ones included) with a
 * nonzero tf. The entries are kept for ``context``.
 */
static PyObject *Kernel_spread(Kernel *self, PyObject *args) {
    PyObject *terms_obj, *alive_obj, *label_obj, *member_obj, *prev_obj, *next_obj, *weights_obj;
    if (!PyArg_ParseTuple(args, "OOOOOOO", &terms_obj, &alive_obj, &label_obj, &member_obj, &prev_obj, &next_obj,
                          &weights_obj))
        return NULL;
    if (enter(self) < 0) return NULL;
    self->spread_ready = self->context_ready = self->plain_ready = 0;
    PyObject *out = NULL;
    Py_ssize_t nterms = 0;
    Term *terms = NULL;
    Held held = {.n = 0};
    Py_buffer *alive, *row_label, *member, *prev, *next;
    double *weights = NULL;
    int64_t *cur = NULL;
    Py_ssize_t *df = NULL;
    if (!(terms = get_terms(terms_obj, &nterms))) goto done;
    if (!(alive = hold(&held, alive_obj, 1, BOOL, "alive")) ||
        !(row_label = hold(&held, label_obj, 8, I64, "row_label")) ||
        !(member = hold(&held, member_obj, 1, BOOL, "member")) || !(prev = hold(&held, prev_obj, 8, I64, "prev")) ||
        !(next = hold(&held, next_obj, 8, I64, "next")))
        goto done;
    Py_ssize_t nrows = alive->len < row_label->len / 8 ? alive->len : row_label->len / 8;
    Py_ssize_t nmember = member->len, nprev = prev->len / 8, nnext = next->len / 8;
    if (nmember < 1 || nprev < 1 || nnext < 1) {
        PyErr_SetString(PyExc_ValueError, "member, prev and next need their sentinel slot");
        goto done;
    }
    if (check_rows(terms, nterms, nrows) < 0) goto done;
    Py_ssize_t nblocks = -1;
    if (!(weights = get_floats(weights_obj, &nblocks, "block_weights must be a sequence of floats"))) goto done;
    if (nblocks < 1 || nblocks % 2 != 1) {
        PyErr_SetString(PyExc_ValueError, "block_weights: 1 + 2 * window weights");
        goto done;
    }
    Py_ssize_t window = (nblocks - 1) / 2, most = 0, entries = 0;
    const int64_t *labels = row_label->buf;
    for (Py_ssize_t t = 0; t < nterms; t++) {
        most = terms[t].n > most ? terms[t].n : most;
        entries += terms[t].n * nblocks;
    }
    cur = PyMem_Malloc((size_t)(most ? most : 1) * sizeof(int64_t));
    df = PyMem_Calloc((size_t)(nterms ? nterms : 1), sizeof(Py_ssize_t));
    /* one term's keys at a time in the map: at most its postings times the blocks */
    if (!cur || !df || map_reserve(&self->labels, most * nblocks) < 0 || entries_reserve(self, entries) < 0) {
        PyErr_NoMemory();
        goto done;
    }
    const uint8_t *live = alive->buf, *is_member = member->buf;
    const int64_t *links[2] = {prev->buf, next->buf};
    Py_ssize_t nlinks[2] = {nprev, nnext};
    Py_ssize_t n_entries = 0;
    Map *keys = &self->labels;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t t = 0; t < nterms; t++) {
        const int32_t *rows = terms[t].rows.buf, *tfs = terms[t].tfs.buf;
        Py_ssize_t n = terms[t].n, alone = 0;
        map_start(keys);
        /* block 0: own-text keys of non-members, and members' own keys at weight 1 */
        for (Py_ssize_t i = 0; i < n; i++) {
            int32_t row = rows[i];
            if (!live[row]) continue;
            int64_t label = labels[row];
            if (!placed(is_member, nmember, label)) {
                self->e_term[n_entries] = (int32_t)t;
                self->e_label[n_entries] = label;
                self->e_row[n_entries] = row;
                self->e_tf[n_entries] = (double)tfs[i];
                n_entries++;
                alone++;
            } else {
                map_add(keys, label, (double)tfs[i] * weights[0]);
            }
        }
        for (int side = 0; side < 2; side++) {
            for (Py_ssize_t i = 0; i < n; i++) cur[i] = labels[rows[i]];
            for (Py_ssize_t d = 1; d <= window; d++) {
                double w = weights[side * window + d];
                for (Py_ssize_t i = 0; i < n; i++) {
                    int32_t row = rows[i];
                    int64_t label = labels[row];
                    cur[i] = step(links[side], nlinks[side], cur[i]);
                    if (!live[row] || !placed(is_member, nmember, label)) continue;
                    if (cur[i] >= 0) map_add(keys, cur[i], (double)tfs[i] * w);
                }
            }
        }
        Py_ssize_t counted = alone;
        for (Py_ssize_t j = 0; j < keys->n_touched; j++) {
            Py_ssize_t slot = keys->touched[j];
            int64_t key = keys->keys[slot];
            double tf = keys->acc[slot];
            if (tf == 0.0) continue; /* as numpy's flatnonzero of the sums */
            self->e_term[n_entries] = (int32_t)t;
            self->e_label[n_entries] = key;
            self->e_row[n_entries] = -1;
            self->e_tf[n_entries] = tf;
            n_entries++;
            counted++;
        }
        df[t] = counted;
    }
    Py_END_ALLOW_THREADS
    self->n_entries = n_entries;
    self->n_spread_terms = nterms;
    self->spread_ready = 1;
    out = PyList_New(nterms);
    if (!out) goto done;
    for (Py_ssize_t t = 0; t < nterms; t++) {
        PyObject *v = PyLong_FromSsize_t(df[t]);
        if (!v) {
            Py_CLEAR(out);
            goto done;
        }
        PyList_SET_ITEM(out, t, v);
    }
done:
    if (terms) release_terms(terms, nterms);
    release_held(&held);
    PyMem_Free(weights);
    PyMem_Free(cur);
    PyMem_Free(df);
    if (!out) self->n_entries = self->n_spread_terms = 0;
    self->busy = 0;
    return out;
}

/* context(idf, k1, b_used, scale, base, doclen, key_length) -> bytes of the context labels (int64)
 *
 * The BM25 of each context key over the context terms: a key's part for a term is fl(fl(tf /
 * norm) * idf), norm from its own length (doclen of its row) or its key length, summed per label
 * in term order. The labels come back in first-touch order; their scores stay in the kernel for
 * ``plain``, which adds them to the rows the caller finds for them.
 */
static PyObject *Kernel_context(Kernel *self, PyObject *args) {
    PyObject *idf_obj, *doclen_obj, *keylen_obj;
    double k1, scale, base;
    int b_used;
    if (!PyArg_ParseTuple(args, "OdpddOO", &idf_obj, &k1, &b_used, &scale, &base, &doclen_obj, &keylen_obj))
        return NULL;
    if (!self->spread_ready) {
        PyErr_SetString(PyExc_RuntimeError,
                        "context() scores what the spread() just before it found: call spread first");
        return NULL;
    }
    if (enter(self) < 0) return NULL;
    self->spread_ready = self->context_ready = self->plain_ready = 0;
    PyObject *out = NULL;
    double *idf = NULL;
    Held held = {.n = 0};
    Py_buffer *doclen, *keylen;
    Py_ssize_t nidf = self->n_spread_terms;
    if (!(idf = get_floats(idf_obj, &nidf, "idf"))) goto done;
    if (!(doclen = hold(&held, doclen_obj, 8, F64, "doclen")) ||
        !(keylen = hold(&held, keylen_obj, 8, F64, "key_length")))
        goto done;
    Py_ssize_t ndoc = doclen->len / 8, nkey = keylen->len / 8;
    Py_ssize_t n = self->n_entries;
    for (Py_ssize_t i = 0; i < n && b_used; i++)
        if (self->e_row[i] >= ndoc || (self->e_row[i] < 0 && (self->e_label[i] < 0 || self->e_label[i] >= nkey))) {
            PyErr_SetString(PyExc_IndexError, "a context entry's length is outside the arrays given");
            goto done;
        }
    if (map_reserve(&self->labels, n) < 0) {
        PyErr_NoMemory();
        goto done;
    }
    Map *acc = &self->labels;
    map_start(acc);
    const double *dl = doclen->buf, *kl = keylen->buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        double tf = self->e_tf[i], norm;
        if (b_used) {
            double length = self->e_row[i] >= 0 ? dl[self->e_row[i]] : kl[self->e_label[i]];
            norm = length * scale;
            norm += base;
            norm += tf;
        } else {
            norm = tf + k1;
        }
        map_add(acc, self->e_label[i], tf / norm * idf[self->e_term[i]]);
    }
    Py_END_ALLOW_THREADS
    out = PyBytes_FromStringAndSize(NULL, acc->n_touched * (Py_ssize_t)sizeof(int64_t));
    if (out) { /* the labels, in first-touch order */
        int64_t *put = (int64_t *)PyBytes_AS_STRING(out);
        for (Py_ssize_t j = 0; j < acc->n_touched; j++) put[j] = acc->keys[acc->touched[j]];
    }
    self->context_ready = out != NULL;
done:
    PyMem_Free(idf);
    release_held(&held);
    self->busy = 0;
    return out;
}

/* -- top k ------------------------------------------------------------------------------------- */

typedef struct {
    double score;
    int64_t label;
} Hit;

/* a ranks below b: a lower score, or the same score and a higher label (ties go to the lower). */
static inline int below(Hit a, Hit b) { return a.score < b.score || (a.score == b.score && a.label > b.label); }

static void sift_down(Hit *heap, Py_ssize_t n, Py_ssize_t i) {
    for (;;) {
        Py_ssize_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && below(heap[l], heap[m])) m = l;
        if (r < n && below(heap[r], heap[m])) m = r;
        if (m == i) return;
        Hit t = heap[i];
        heap[i] = heap[m];
        heap[m] = t;
        i = m;
    }
}

static void sift_up(Hit *heap, Py_ssize_t i) {
    while (i > 0) {
        Py_ssize_t p = (i - 1) / 2;
        if (!below(heap[i], heap[p])) return;
        Hit t = heap[i];
        heap[i] = heap[p];
        heap[p] = t;
        i = p;
    }
}

static int by_rank(const void *x, const void *y) {
    Hit a = *(const Hit *)x, b = *(const Hit *)y;
    return below(b, a) ? -1 : below(a, b) ? 1 : 0;
}

/* -- own-text terms ---------------------------------------------------------------------------- */

/* What one query's own-text terms need, parsed once per call. */
typedef struct {
    Term *terms;
    Py_ssize_t nterms;
    double *weights;
    double k1, scale, base;
    int b_used;
    Py_buffer doclen;
    const double *dl;
    Py_ssize_t nrows; /* rows every array given can index */
    int have_doclen;
} Plain;

static void plain_release(Plain *q) {
    if (q->terms) release_terms(q->terms, q->nterms);
    PyMem_Free(q->weights);
    if (q->have_doclen) PyBuffer_Release(&q->doclen);
    memset(q, 0, sizeof(*q));
}

static int plain_parse(Plain *q, PyObject *terms, PyObject *weights, double k1, int b_used, double scale, double base,
                       PyObject *doclen) {
    memset(q, 0, sizeof(*q));
    q->k1 = k1, q->b_used = b_used, q->scale = scale, q->base = base;
    if (!(q->terms = get_terms(terms, &q->nterms))) return -1;
    Py_ssize_t nweights = q->nterms;
    if (!(q->weights = get_floats(weights, &nweights, "weights"))) return -1;
    if (get_buf(doclen, &q->doclen, 8, F64, "doclen") < 0) return -1;
    q->have_doclen = 1;
    q->dl = q->doclen.buf;
    q->nrows = b_used ? q->doclen.len / 8 : PY_SSIZE_T_MAX;
    return 0;
}

/* Term t's part of row ``row`` holding it ``tf`` times: fl(fl(tf / norm) * w), as numpy computes it. */
static inline double part_of(const Plain *q, Py_ssize_t t, int64_t row, int32_t tf) {
    double f = (double)tf, norm;
    if (q->b_used) {
        norm = q->dl[row] * q->scale;
        norm += q->base;
        norm += f;
    } else {
        norm = f + q->k1;
    }
    return f / norm * q->weights[t];
}

/* The first position at or after ``from`` whose row is >= ``row`` (rows ascending): galloping,
   so a cursor that moves a little costs a little. */
static inline Py_ssize_t seek(const int32_t *rows, Py_ssize_t n, Py_ssize_t from, int64_t row) {
    if (from >= n || rows[from] >= row) return from;
    Py_ssize_t lo = from, step = 1, hi = from + 1; /* rows[lo] < row */
    while (hi < n && rows[hi] < row) {
        lo = hi;
        step *= 2;
        hi = lo + step;
    }
    if (hi > n) hi = n;
    while (hi - lo > 1) { /* rows[lo] < row <= rows[hi] (or hi == n) */
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (rows[mid] < row) lo = mid;
        else hi = mid;
    }
    return hi;
}

/* Own-text BM25 of one row, term by term in query order from 0.0 (each term's postings searched). */
static double plain_score(const Plain *q, int64_t row) {
    double score = 0.0;
    for (Py_ssize_t t = 0; t < q->nterms; t++) {
        const int32_t *rows = q->terms[t].rows.buf;
        Py_ssize_t n = q->terms[t].n, at = seek(rows, n, 0, row);
        if (at < n && rows[at] == row) score += part_of(q, t, row, ((const int32_t *)q->terms[t].tfs.buf)[at]);
    }
    return score;
}

/* Sort keyed rows by row (rows are in [0, 2^31)): LSD radix sort, a byte a pass, skipping bytes all
   rows share. qsort's comparator calls cost ~0.1 ms for a query's ~1,500 context rows. */
static void sort_by_row(Keyed *a, Keyed *tmp, Py_ssize_t n) {
    for (int shift = 0; shift < 32; shift += 8) {
        Py_ssize_t count[257] = {0};
        for (Py_ssize_t i = 0; i < n; i++) count[((a[i].row >> shift) & 0xff) + 1]++;
        int same = 0;
        for (int b = 1; b <= 256; b++) same |= count[b] == n;
        if (same) continue;
        for (int b = 1; b <= 256; b++) count[b] += count[b - 1];
        for (Py_ssize_t i = 0; i < n; i++) tmp[count[(a[i].row >> shift) & 0xff]++] = a[i];
        memcpy(a, tmp, (size_t)n * sizeof(Keyed));
    }
}

static const Keyed *context_of(const Kernel *self, int64_t row);

/* Add a hit to the top k (heap of the k best, worst at the root). */
static inline void offer(Hit *heap, Py_ssize_t *filled, Py_ssize_t k, Hit h) {
    if (*filled < k) {
        heap[(*filled)++] = h;
        sift_up(heap, *filled - 1);
    } else if (below(heap[0], h)) {
        heap[0] = h;
        sift_down(heap, *filled, 0);
    }
}

#define SAFE 1.000000001 /* bounds are inflated by this: no rounding can take a score past one */

/* A term's largest tf. It reads every posting of every query term (~165k at 1M memories), so with
   GCC on x86-64 glibc it is also compiled for AVX2 and the loader picks that where the CPU has it
   (an ifunc: glibc has them, musl does not): 0.136 -> 0.017 ms a query there. Integers only, so no
   score changes with the choice. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__GLIBC__)
__attribute__((target_clones("avx2", "default")))
#endif
static int32_t max_tf(const int32_t *tfs, Py_ssize_t n) {
    int32_t most = 0;
    for (Py_ssize_t i = 0; i < n; i++) most = tfs[i] > most ? tfs[i] : most;
    return most;
}

/* A term's part for a tf, b = 0: from its table below TABLE (the same operations, so the same bits). */
static inline double part_b0(const Plain *q, const double *table, Py_ssize_t t, int32_t tf) {
    return tf > 0 && tf < TABLE ? table[t * TABLE + tf] : part_of(q, t, 0, tf);
}

/* Term t's part of ``row`` (0.0 where it lacks the term), its cursor ``*at`` moved there by galloping. */
static inline double part_found(const Plain *q, const double *table, Py_ssize_t t, int64_t row, Py_ssize_t *at) {
    const int32_t *rows = q->terms[t].rows.buf;
    *at = seek(rows, q->terms[t].n, *at, row);
    return *at < q->terms[t].n && rows[*at] == row ? part_b0(q, table, t, ((const int32_t *)q->terms[t].tfs.buf)[*at])
                                                   : 0.0;
}

/* Score ``row`` exactly (term by term in query order, as the full scan sums it), its parts for the
   terms in ``known`` given by ``part_at``, the others found by galloping from their cursors. */
static inline double score_row(const Plain *q, const double *table, int64_t row, Py_ssize_t *pos, double *part_at,
                               const uint8_t *known) {
    double score = 0.0;
    for (Py_ssize_t t = 0; t < q->nterms; t++) {
        if (!known[t]) part_at[t] = part_found(q, table, t, row, &pos[t]);
        if (part_at[t] != 0.0) score += part_at[t]; /* a term the row lacks adds nothing, as in numpy */
    }
    return score;
}

/* The top k rows outside ``skip`` (stamped in ``mark``) by own-text BM25, b = 0, without reading
 * most postings of common terms.
 *
 * A term's bound (``ub``) is its largest part (b = 0: its largest tf's). Term at a time, strongest
 * bound first (MaxScore, Turtle and Flood 1995): every row of the term not yet marked is marked and,
 * unless it is out of reach, scored. It holds none of the stronger terms (their rows are all
 * marked), so it looks up the weaker ones, strongest first, and is dropped as soon as what it has
 * plus the bounds of the terms not yet looked up falls below the k-th best. Once a term's bound
 * plus those of all weaker terms falls below the k-th best, no row left can reach it: the search
 * stops, usually before the common terms' long postings are read. The first term (usually the
 * rarest) fills the top k with strong rows at once; at 1M memories 5.3k of a query's 6k rows of it
 * stop before being scored. Exact scores sum the parts in query
 * order, as the full scan; bounds are inflated (``SAFE``), so no rounding of a sum in another order
 * drops a row that belongs in the top k or ties the k-th (ties go to the lower label, as the full
 * scan's). Returns the hits in ``heap`` (unsorted), -1 on a row outside ``nrows``.
 *
 * Measured on LoCoMo questions at 1M memories (the kernel's ``plain`` call, side by side, the order
 * rotating per call): 1.79 ms p50 for the search this replaced (the first term's rows scored whole,
 * then WAND, Broder et al. 2003, document at a time over every term), 1.12 ms with the per-row test
 * and that term out of the walk, 0.93 ms term at a time throughout; term at a time up to a posting
 * count and WAND past it came between (0.97 ms at 64k). Block-max WAND (Ding and Suel 2011, blocks
 * of 64 postings, maxima made per query) saved 0.04 ms of the walk's 0.63 and was left out. */
static Py_ssize_t top_pruned(const Plain *q, const uint8_t *live, const int64_t *labels, Py_ssize_t nrows,
                             Marks *mark, Py_ssize_t k, Hit *heap, Py_ssize_t *order, Py_ssize_t *pos, double *ub,
                             double *part_at, uint8_t *known, double *table, double *below_sum) {
    Py_ssize_t n = q->nterms, filled = 0;
    if (!k || !n) return 0;
    for (Py_ssize_t t = 0; t < n; t++) {
        int32_t most = max_tf(q->terms[t].tfs.buf, q->terms[t].n);
        ub[t] = most ? part_b0(q, table, t, most) * SAFE : 0.0; /* a part grows with tf (b = 0: no length) */
        order[t] = t;
    }
    for (Py_ssize_t i = 1; i < n; i++) { /* insertion sort by ub ascending: a query has a few terms */
        Py_ssize_t t = order[i], j = i;
        while (j > 0 && ub[order[j - 1]] > ub[t]) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = t;
    }
    below_sum[0] = 0.0; /* below_sum[r]: the bounds of order[0 .. r-1] summed, inflated */
    for (Py_ssize_t j = 1; j < n; j++) below_sum[j] = (below_sum[j - 1] + ub[order[j - 1]]) * SAFE;
    for (Py_ssize_t r = n - 1; r >= 0; r--) { /* order[r]: the strongest term left */
        Py_ssize_t term = order[r];
        if (filled == k && (ub[term] + below_sum[r]) * SAFE < heap[0].score) break; /* nothing left reaches */
        const int32_t *term_rows = q->terms[term].rows.buf, *term_tfs = q->terms[term].tfs.buf;
        for (Py_ssize_t t = 0; t < n; t++) pos[t] = 0, part_at[t] = 0.0, known[t] = 1; /* stronger: absent */
        for (Py_ssize_t i = 0; i < q->terms[term].n; i++) {
            int64_t row = term_rows[i];
            if (row < 0 || row >= nrows) return -1;
            if (!live[row] || marked(mark, row)) continue;
            set_mark(mark, row); /* scored or out of reach: no later term's pass comes back to it */
            part_at[term] = part_b0(q, table, term, term_tfs[i]);
            Py_ssize_t j = r; /* order[j .. r] looked up; the bounds of order[0 .. j-1] still count */
            double got = part_at[term] * SAFE;
            for (; j > 0 && (filled < k || (got + below_sum[j]) * SAFE >= heap[0].score); j--) {
                Py_ssize_t t = order[j - 1];
                part_at[t] = part_found(q, table, t, row, &pos[t]);
                got = (got + part_at[t]) * SAFE;
            }
            if (j > 0) continue; /* below the k-th even with the terms not looked up at their best */
            Hit h = {score_row(q, table, row, pos, part_at, known), labels[row]}; /* every part known: */
            offer(heap, &filled, k, h);                                           /* summed in query order */
        }
    }
    return filled;
}

/* plain(terms, weights, k1, b_used, scale, base, doclen, alive, row_label, context_rows, k)
 *     -> [(label, score)] best first, ties to the lower label
 *
 * Own-text BM25 of the plain terms, fl(fl(tf / norm) * weight) summed per row in term order; each
 * context label's score (``context``, in the order it returned the labels) added to its row
 * (``context_rows``, -1: no live row); the top k rows with a score above 0. With b = 0 the own-text
 * top k is found by pruning (``top_pruned``), the context rows scored apart; otherwise (lengths
 * matter, so a term's bound is not its largest tf's part) every posting is summed into ``rows``.
 * The context scores stay for ``lookup``.
 */
static PyObject *Kernel_plain(Kernel *self, PyObject *args) {
    PyObject *terms_obj, *weights_obj, *doclen_obj, *alive_obj, *label_obj, *ctx_obj;
    double k1, scale, base;
    int b_used;
    Py_ssize_t k;
    if (!PyArg_ParseTuple(args, "OOdpddOOOOn", &terms_obj, &weights_obj, &k1, &b_used, &scale, &base, &doclen_obj,
                          &alive_obj, &label_obj, &ctx_obj, &k))
        return NULL;
    if (enter(self) < 0) return NULL;
    int with_context = self->context_ready;
    self->spread_ready = self->context_ready = self->plain_ready = 0;
    self->n_keyed = 0;
    PyObject *out = NULL;
    Plain q;
    Hit *heap = NULL;
    void *scratch = NULL;
    Held held = {.n = 0};
    Py_buffer *alive, *row_label, *ctx;
    if (plain_parse(&q, terms_obj, weights_obj, k1, b_used, scale, base, doclen_obj) < 0) goto done;
    if (!(alive = hold(&held, alive_obj, 1, BOOL, "alive")) ||
        !(row_label = hold(&held, label_obj, 8, I64, "row_label")) ||
        !(ctx = hold(&held, ctx_obj, 8, I64, "context_rows")))
        goto done;
    Py_ssize_t nrows = alive->len;
    if (row_label->len / 8 < nrows) nrows = row_label->len / 8;
    if (q.nrows < nrows) nrows = q.nrows;
    q.nrows = nrows;
    Py_ssize_t nctx = ctx->len / 8;
    const int64_t *ctx_rows = ctx->buf;
    if (nctx != (with_context ? self->labels.n_touched : 0)) {
        PyErr_SetString(PyExc_ValueError,
                        "context_rows must give one row per label the context() just before returned");
        goto done;
    }
    for (Py_ssize_t i = 0; i < nctx; i++)
        if (ctx_rows[i] >= nrows) {
            PyErr_SetString(PyExc_IndexError, "a context row is outside the index's rows");
            goto done;
        }
    if (k < 0) k = 0;
    Py_ssize_t n = q.nterms ? q.nterms : 1;
    /* keyed: twice the context rows (the second half is the sort's scratch) */
    if (keyed_reserve(self, 2 * nctx) < 0 || !(heap = PyMem_Malloc((size_t)(k + 1) * sizeof(Hit))) ||
        !(scratch = PyMem_Malloc((size_t)n * (2 * sizeof(Py_ssize_t) + (3 + TABLE) * sizeof(double) + 1))) ||
        marks_reserve(&self->marks, nrows) < 0) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t *order = scratch, *pos = order + n;
    double *ub = (double *)(pos + n), *part_at = ub + n, *below_sum = part_at + n, *table = below_sum + n;
    uint8_t *known = (uint8_t *)(table + n * TABLE);
    const uint8_t *live = alive->buf;
    const int64_t *labels = row_label->buf;
    const Map *context = &self->labels;
    Marks *mark = &self->marks;
    Dense *acc = &self->rows;
    marks_start(mark);
    Py_ssize_t filled = 0;
    int bad = 0;
    int prune = !b_used && nrows >= self->prune_from;
    dense_clear(acc);
    if (!prune && dense_reserve(acc, nrows) < 0) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t t = 0; t < q.nterms && !b_used; t++) { /* b = 0: a term's part of tf < TABLE, once */
        table[t * TABLE] = 0.0;
        for (int tf = 1; tf < TABLE; tf++) table[t * TABLE + tf] = part_of(&q, t, 0, tf);
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < nctx; i++) /* the context rows, marked: they are scored apart */
        if (ctx_rows[i] >= 0 && live[ctx_rows[i]] && !marked(mark, ctx_rows[i])) {
            set_mark(mark, ctx_rows[i]);
            Keyed c = {ctx_rows[i], context->acc[context->touched[i]]};
            self->keyed[self->n_keyed++] = c;
        }
    if (prune) {
        filled = top_pruned(&q, live, labels, nrows, mark, k, heap, order, pos, ub, part_at, known, table, below_sum);
        if (filled < 0) bad = 1, filled = 0;
        /* own text + context, as numpy adds them; the rows in order, so each term's cursor only moves on */
        sort_by_row(self->keyed, self->keyed + self->n_keyed, self->n_keyed);
        for (Py_ssize_t t = 0; t < q.nterms; t++) pos[t] = 0, known[t] = 0;
        for (Py_ssize_t i = 0; i < self->n_keyed; i++) {
            Keyed *c = &self->keyed[i];
            c->score = score_row(&q, table, c->row, pos, part_at, known) + c->score;
        }
    } else { /* every posting summed into ``rows``: fewer steps a posting than pruning while it fits the cache */
        for (Py_ssize_t t = 0; t < q.nterms && !bad; t++) {
            const int32_t *rows = q.terms[t].rows.buf, *tfs = q.terms[t].tfs.buf;
            for (Py_ssize_t i = 0; i < q.terms[t].n; i++) {
                int32_t row = rows[i];
                if (row < 0 || row >= nrows) {
                    bad = 1;
                    break;
                }
                if (live[row])
                    dense_add(acc, row, b_used ? part_of(&q, t, row, tfs[i]) : part_b0(&q, table, t, tfs[i]));
            }
        }
        for (Py_ssize_t i = 0; i < self->n_keyed && !bad; i++) {
            Keyed *c = &self->keyed[i];
            c->score = acc->acc[c->row] + c->score;
        }
        for (Py_ssize_t j = 0; j < acc->n_touched && k && !bad; j++) {
            int64_t row = acc->touched[j];
            if (marked(mark, row) || !(acc->acc[row] > 0.0)) continue;
            Hit h = {acc->acc[row], labels[row]};
            offer(heap, &filled, k, h);
        }
    }
    for (Py_ssize_t i = 0; i < self->n_keyed && k; i++) { /* the context rows compete for the top k */
        Hit h = {self->keyed[i].score, labels[self->keyed[i].row]};
        if (h.score > 0.0) offer(heap, &filled, k, h);
    }
    qsort(heap, (size_t)filled, sizeof(Hit), by_rank);
    if (!prune) sort_by_row(self->keyed, self->keyed + self->n_keyed, self->n_keyed); /* for ``lookup`` */
    Py_END_ALLOW_THREADS
    if (bad) {
        PyErr_Format(PyExc_IndexError, "a posting row is outside the index's %zd rows", nrows);
        goto done;
    }
    out = PyList_New(filled);
    if (!out) goto done;
    for (Py_ssize_t i = 0; i < filled; i++) {
        PyObject *pair = Py_BuildValue("(Ld)", (long long)heap[i].label, heap[i].score);
        if (!pair) {
            Py_CLEAR(out);
            goto done;
        }
        PyList_SET_ITEM(out, i, pair);
    }
    self->plain_ready = 1;
done:
    plain_release(&q);
    PyMem_Free(heap);
    PyMem_Free(scratch);
    release_held(&held);
    if (!out) self->n_keyed = 0;
    self->busy = 0;
    return out;
}

static const Keyed *context_of(const Kernel *self, int64_t row) {
    Py_ssize_t lo = 0, hi = self->n_keyed;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (self->keyed[mid].row < row) lo = mid + 1;
        else hi = mid;
    }
    return lo < self->n_keyed && self->keyed[lo].row == row ? &self->keyed[lo] : NULL;
}

/* lookup(rows, terms, weights, k1, b_used, scale, base, doclen) -> [score of each row]
 *
 * Each row's score in the query ``plain`` just answered (given its terms again): its own-text
 * BM25 (each term's postings searched) plus its context score; 0.0 where the row is -1 or
 * matched nothing. */
static PyObject *Kernel_lookup(Kernel *self, PyObject *args) {
    PyObject *rows_obj, *terms_obj, *weights_obj, *doclen_obj;
    double k1, scale, base;
    int b_used;
    if (!PyArg_ParseTuple(args, "OOOdpddO", &rows_obj, &terms_obj, &weights_obj, &k1, &b_used, &scale, &base,
                          &doclen_obj))
        return NULL;
    if (!self->plain_ready) {
        PyErr_SetString(PyExc_RuntimeError, "lookup() reads the query plain() just answered: call plain first");
        return NULL;
    }
    if (self->busy) { /* another thread is inside a call that rewrites what this reads */
        PyErr_SetString(PyExc_RuntimeError, "a BM25 kernel is used by one search at a time (its owner's lock)");
        return NULL;
    }
    Py_buffer rows;
    if (get_buf(rows_obj, &rows, 8, I64, "rows") < 0) return NULL;
    PyObject *out = NULL;
    Plain q;
    if (plain_parse(&q, terms_obj, weights_obj, k1, b_used, scale, base, doclen_obj) < 0) goto done;
    Py_ssize_t n = rows.len / 8;
    const int64_t *r = rows.buf;
    for (Py_ssize_t i = 0; i < n; i++)
        if (r[i] >= q.nrows) {
            PyErr_SetString(PyExc_IndexError, "a row to look up is outside the lengths given");
            goto done;
        }
    out = PyList_New(n);
    for (Py_ssize_t i = 0; out && i < n; i++) {
        double v = 0.0;
        if (r[i] >= 0) {
            const Keyed *c = context_of(self, r[i]);
            v = c ? c->score : plain_score(&q, r[i]);
        }
        PyObject *f = PyFloat_FromDouble(v);
        if (!f) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, i, f);
    }
done:
    plain_release(&q);
    PyBuffer_Release(&rows);
    return out;
}

static PyObject *Kernel_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"prune_from", NULL};
    Py_ssize_t prune_from = 262144;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|n:Kernel", kwlist, &prune_from)) return NULL;
    Kernel *self = (Kernel *)type->tp_alloc(type, 0); /* zeroed: empty accumulators, generation 0 */
    if (self) self->prune_from = prune_from;
    return (PyObject *)self;
}

static PyMethodDef Kernel_methods[] = {
    {"spread", (PyCFunction)Kernel_spread, METH_VARARGS, "Context terms' key sums; returns each term's df."},
    {"context", (PyCFunction)Kernel_context, METH_VARARGS, "Context scores per label; returns the labels."},
    {"plain", (PyCFunction)Kernel_plain, METH_VARARGS, "Own-text scores plus context ones; returns the top k."},
    {"lookup", (PyCFunction)Kernel_lookup, METH_VARARGS, "The last query's score of each row."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject KernelType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "mempager.index._bm25.Kernel",
    .tp_basicsize = sizeof(Kernel),
    .tp_dealloc = (destructor)Kernel_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Scratch accumulators for one lexical index's BM25 searches (one search at a time).",
    .tp_methods = Kernel_methods,
    .tp_new = Kernel_new,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_bm25", "The lexical lane's BM25 search, compiled (see index/_bm25.c).", -1, NULL,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__bm25(void) {
    if (PyType_Ready(&KernelType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&KernelType);
    if (PyModule_AddObject(m, "Kernel", (PyObject *)&KernelType) < 0) {
        Py_DECREF(&KernelType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
