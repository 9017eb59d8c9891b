/* Score fusion's arithmetic, compiled (lanes.fused.fuse_order calls it).
 *
 * Why C: a page fault fuses ~260 lane hits and ~100 completed scores into ~190 candidates; in numpy
 * that is ~60 calls of ~1 us each plus a dict look-up per hit, 0.12 ms of a 1.0 ms retrieve at 100k
 * memories (benchmarks/results/retrieve_timeline.md), for work a loop does in a few microseconds.
 *
 * Exactness: the numbers are the numpy path's (lanes.fused._fuse_numpy, held to the per-candidate
 * reference by tests/pager/test_hotpath_fusion.py) bit for bit. Each candidate's total starts at
 * 0.0 and adds, lane by lane in the order given (the lanes' sorted names), fl(fl(v - floor) * factor)
 * with factor = fl(weight / span), where v is above the lane's floor; the imputed semantic share
 * adds fl(v * share) last. Those are the IEEE double operations numpy performs element by element,
 * and the file is built with -ffp-contract=off, so no fused multiply-add changes a rounding.
 * Candidates are numbered in first-seen order (lane by lane, hit by hit), as the numpy path does.
 *
 * Input it does not take (a label that is not an int, a hit that is not a 2-tuple, a NaN score)
 * raises TypeError or returns None: the caller then runs the numpy path, which answers or fails
 * as it always has.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* label -> candidate, open addressing (linear probing); a slot is empty where cand < 0 */
typedef struct {
    int64_t *keys;
    int64_t *cands;
    size_t mask;
} Map;

static inline size_t slot_of(int64_t key, size_t mask) {
    uint64_t x = (uint64_t)key;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)x & mask;
}

static int map_init(Map *m, Py_ssize_t entries) {
    size_t cap = 16;
    while (cap < (size_t)entries * 2) cap <<= 1;
    m->keys = malloc(cap * sizeof(int64_t));
    m->cands = malloc(cap * sizeof(int64_t));
    if (!m->keys || !m->cands) return -1;
    for (size_t i = 0; i < cap; i++) m->cands[i] = -1;
    m->mask = cap - 1;
    return 0;
}

static void map_free(Map *m) {
    free(m->keys);
    free(m->cands);
}

static inline int64_t map_find(const Map *m, int64_t key) {
    for (size_t s = slot_of(key, m->mask);; s = (s + 1) & m->mask) {
        if (m->cands[s] < 0) return -1;
        if (m->keys[s] == key) return m->cands[s];
    }
}

/* the candidate of ``key``, numbered ``*n`` (and ``*n`` counted up) when it is new */
static inline int64_t map_add(Map *m, int64_t key, int64_t *labels, int64_t *n) {
    for (size_t s = slot_of(key, m->mask);; s = (s + 1) & m->mask) {
        if (m->cands[s] < 0) {
            m->keys[s] = key;
            m->cands[s] = *n;
            labels[*n] = key;
            return (*n)++;
        }
        if (m->keys[s] == key) return m->cands[s];
    }
}

typedef struct {
    double total;
    int64_t label;
    int64_t cand;
} Ranked;

static int best_first(const void *x, const void *y) { /* total descending, then label ascending */
    const Ranked *a = x, *b = y;
    if (a->total > b->total) return -1;
    if (a->total < b->total) return 1;
    return (a->label > b->label) - (a->label < b->label);
}

/* One (label, score) pair; 0, or -1 with an exception set (or *nan set: a NaN score). */
static int read_pair(PyObject *item, int64_t *label, double *score, int *nan) {
    if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2) {
        PyErr_SetString(PyExc_TypeError, "a lane hit must be a (label, score) tuple");
        return -1;
    }
    long long got = PyLong_AsLongLong(PyTuple_GET_ITEM(item, 0));
    if (got == -1 && PyErr_Occurred()) return -1;
    double value = PyFloat_AsDouble(PyTuple_GET_ITEM(item, 1));
    if (value == -1.0 && PyErr_Occurred()) return -1;
    if (isnan(value)) *nan = 1;
    *label = (int64_t)got;
    *score = value;
    return 0;
}

static int read_entry(PyObject *key, PyObject *value, int64_t *label, double *score, int *nan) {
    long long got = PyLong_AsLongLong(key);
    if (got == -1 && PyErr_Occurred()) return -1;
    double v = PyFloat_AsDouble(value);
    if (v == -1.0 && PyErr_Occurred()) return -1;
    if (isnan(v)) *nan = 1;
    *label = (int64_t)got;
    *score = v;
    return 0;
}

static PyObject *bytes_of(const void *data, Py_ssize_t size) {
    return PyByteArray_FromStringAndSize(size ? data : "", size);
}

/* fuse(lanes, completions, weights, semantic, floor, lexical, unembedded, w_semantic)
 *   lanes: list of L lists of (label, score); completions: list of L dicts (label -> score) or None;
 *   weights: list of L floats; semantic / lexical: the index of that lane, or -1; floor: the
 *   semantic floor; unembedded: a dict whose keys are imputed (None: no imputation); w_semantic:
 *   the semantic weight (the share's numerator).
 * -> (labels int64[m], totals f64[m], order int64[m], ranks int64[L*m], values f64[L*m],
 *     present u8[L*m]) as bytearrays, lane-major; or None (a NaN score: the numpy path decides). */
static PyObject *fuse(PyObject *self, PyObject *args) {
    PyObject *lanes, *completions, *weights_obj, *unembedded;
    Py_ssize_t semantic, lexical;
    double floor, w_semantic;
    if (!PyArg_ParseTuple(args, "O!O!O!ndnOd", &PyList_Type, &lanes, &PyList_Type, &completions, &PyList_Type,
                          &weights_obj, &semantic, &floor, &lexical, &unembedded, &w_semantic))
        return NULL;
    Py_ssize_t L = PyList_GET_SIZE(lanes);
    if (PyList_GET_SIZE(completions) != L || PyList_GET_SIZE(weights_obj) != L || semantic >= L || lexical >= L) {
        PyErr_SetString(PyExc_ValueError, "lanes, completions and weights must be one per lane");
        return NULL;
    }
    if (unembedded != Py_None && !PyDict_Check(unembedded)) {
        PyErr_SetString(PyExc_TypeError, "unembedded must be a dict or None");
        return NULL;
    }
    Py_ssize_t hits = 0;
    for (Py_ssize_t j = 0; j < L; j++) {
        PyObject *lane = PyList_GET_ITEM(lanes, j);
        if (!PyList_Check(lane)) {
            PyErr_SetString(PyExc_TypeError, "each lane must be a list of (label, score)");
            return NULL;
        }
        PyObject *done = PyList_GET_ITEM(completions, j);
        if (done != Py_None && !PyDict_Check(done)) {
            PyErr_SetString(PyExc_TypeError, "each completion must be a dict or None");
            return NULL;
        }
        hits += PyList_GET_SIZE(lane);
    }
    PyObject *out = NULL;
    Map map = {NULL, NULL, 0};
    int64_t *labels = malloc((size_t)(hits + 1) * sizeof(int64_t));
    int64_t *hit_lane = malloc((size_t)(hits + 1) * sizeof(int64_t));
    int64_t *hit_cand = malloc((size_t)(hits + 1) * sizeof(int64_t));
    int64_t *hit_rank = malloc((size_t)(hits + 1) * sizeof(int64_t));
    double *hit_score = malloc((size_t)(hits + 1) * sizeof(double));
    double *weights = malloc((size_t)(L + 1) * sizeof(double));
    double *best = malloc((size_t)(L + 1) * sizeof(double));
    int64_t *ranks = NULL, *order = NULL;
    double *values = NULL, *totals = NULL;
    uint8_t *present = NULL;
    Ranked *sorted = NULL;
    int nan = 0;
    if (!labels || !hit_lane || !hit_cand || !hit_rank || !hit_score || !weights || !best ||
        map_init(&map, hits) < 0) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t j = 0; j < L; j++) {
        weights[j] = PyFloat_AsDouble(PyList_GET_ITEM(weights_obj, j));
        if (weights[j] == -1.0 && PyErr_Occurred()) goto done;
    }
    int64_t m = 0, h = 0;
    for (Py_ssize_t j = 0; j < L; j++) { /* every hit, lane by lane: candidates in first-seen order */
        PyObject *lane = PyList_GET_ITEM(lanes, j);
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(lane); i++, h++) {
            int64_t label;
            if (read_pair(PyList_GET_ITEM(lane, i), &label, &hit_score[h], &nan) < 0) goto done;
            hit_lane[h] = j;
            hit_rank[h] = i + 1;
            hit_cand[h] = map_add(&map, label, labels, &m);
        }
    }
    size_t cells = (size_t)L * (size_t)m;
    ranks = calloc(cells + 1, sizeof(int64_t));
    values = calloc(cells + 1, sizeof(double));
    present = calloc(cells + 1, 1);
    totals = calloc((size_t)m + 1, sizeof(double));
    order = malloc(((size_t)m + 1) * sizeof(int64_t));
    sorted = malloc(((size_t)m + 1) * sizeof(Ranked));
    if (!ranks || !values || !present || !totals || !order || !sorted) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t j = 0; j < L; j++) { /* completed scores first: a lane's own score wins */
        PyObject *done_dict = PyList_GET_ITEM(completions, j);
        int any = 0;
        double outside = 0.0;
        best[j] = 0.0;
        if (done_dict != Py_None) {
            PyObject *key, *value;
            Py_ssize_t pos = 0;
            while (PyDict_Next(done_dict, &pos, &key, &value)) {
                int64_t label;
                double v;
                if (read_entry(key, value, &label, &v, &nan) < 0) goto done;
                int64_t c = map_find(&map, label);
                if (c >= 0) {
                    values[j * m + c] = v;
                    present[j * m + c] = 1;
                } else if (!any || v > outside) { /* the best score of a label that is no candidate */
                    outside = v, any = 1;
                }
            }
        }
        best[j] = any ? outside : NAN; /* NAN: no outside score (set below) */
    }
    for (int64_t i = 0; i < h; i++) {
        size_t cell = (size_t)hit_lane[i] * (size_t)m + (size_t)hit_cand[i];
        if (ranks[cell]) continue; /* a lane that reports a label twice counts it once, at its best rank */
        ranks[cell] = hit_rank[i];
        values[cell] = hit_score[i];
        present[cell] = 1;
    }
    if (nan) {
        out = Py_None;
        Py_INCREF(out);
        goto done;
    }
    for (Py_ssize_t j = 0; j < L; j++) { /* the lane's scale: its best score, over completed outsiders too */
        int seen = 0;
        double top = 0.0;
        for (int64_t c = 0; c < m; c++)
            if (present[j * m + c] && (!seen || values[j * m + c] > top)) top = values[j * m + c], seen = 1;
        double outside = best[j];
        int has_outside = !isnan(outside);
        if (seen && has_outside)
            best[j] = outside > top ? outside : top; /* Python's max([top, outside]) */
        else
            best[j] = seen ? top : (has_outside ? outside : 0.0);
    }
    for (Py_ssize_t j = 0; j < L; j++) {
        double fl = 0.0, span = best[j];
        if (j == semantic) fl = floor, span = 1.0 - floor;
        if (weights[j] <= 0 || span <= 0) continue;
        double factor = weights[j] / span;
        const double *v = values + j * m;
        const uint8_t *p = present + j * m;
        for (int64_t c = 0; c < m; c++)
            if (p[c] && v[c] > fl) totals[c] += (v[c] - fl) * factor;
    }
    if (unembedded != Py_None && lexical >= 0 && best[lexical] > 0) {
        double share = w_semantic / best[lexical];
        PyObject *key, *value;
        Py_ssize_t pos = 0;
        while (PyDict_Next(unembedded, &pos, &key, &value)) {
            long long label = PyLong_AsLongLong(key);
            if (label == -1 && PyErr_Occurred()) goto done;
            int64_t c = map_find(&map, (int64_t)label);
            size_t cell = (size_t)lexical * (size_t)m + (size_t)c;
            if (c >= 0 && present[cell] && values[cell] > 0) totals[c] += values[cell] * share;
        }
    }
    for (int64_t c = 0; c < m; c++) sorted[c] = (Ranked){totals[c], labels[c], c};
    qsort(sorted, (size_t)m, sizeof(Ranked), best_first);
    for (int64_t c = 0; c < m; c++) order[c] = sorted[c].cand;
    out = Py_BuildValue("(NNNNNN)", bytes_of(labels, m * 8), bytes_of(totals, m * 8), bytes_of(order, m * 8),
                        bytes_of(ranks, (Py_ssize_t)cells * 8), bytes_of(values, (Py_ssize_t)cells * 8),
                        bytes_of(present, (Py_ssize_t)cells));
done:
    map_free(&map);
    free(labels);
    free(hit_lane);
    free(hit_cand);
    free(hit_rank);
    free(hit_score);
    free(weights);
    free(best);
    free(ranks);
    free(values);
    free(present);
    free(totals);
    free(order);
    free(sorted);
    return out;
}

static PyMethodDef methods[] = {
    {"fuse", fuse, METH_VARARGS, "Score fusion of the lanes' hits and completed scores (see lanes.fused)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fuse", "Score fusion, compiled.", -1, methods};

PyMODINIT_FUNC PyInit__fuse(void) { return PyModule_Create(&module); }
