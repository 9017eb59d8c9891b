/* The lexical lane's raw-token scan for ASCII text, and its token-to-unit lookup, compiled.
 *
 * Why C: ``RAW_TOKEN.findall`` (index/tokenize.py) was the largest single cost of a bulk write:
 * ~10 us of a LoCoMo turn's ~50 us in ``remember_many`` (py-spy, 100k memories: 11.7% of the
 * time), and every query pays it too. The same scan over the bytes of an ASCII string, in one pass
 * with no backtracking, is ~3x cheaper: 2.4 us against 7.1 us a LoCoMo turn (23.5 tokens), timed
 * side by side on a 2-core EPYC; most of what is left is making the token strings.
 *
 * Exactness: for an ASCII string this returns what ``RAW_TOKEN.findall(text)`` returns; anything
 * else gets ``None`` and the caller runs the regex (NFKC changes no ASCII string, so the caller's
 * normalisation is skipped only where it is the identity). The pattern is
 *
 *     [~./@#$]*+ \w++ (?: [.\-/\\@:+#~?=&%'’]++ \w++ )*+
 *
 * and on ASCII text ``\w`` is [A-Za-z0-9_]. The marks, the word characters and the connectors are
 * such that no quantifier ever gives a character back (tests/pager/test_fast_forms.py), so a match
 * starting at i is: the run of marks from i, then a run of word characters (none: no match at i),
 * then as long as a run of connectors is followed by a word character, that run and the word run
 * after it. findall then starts again where the match ended, or one character on when there was
 * none; a run of marks not followed by a word character fails at each of its positions, so the
 * scan skips it whole. ``’`` is not ASCII, so it never occurs here. tests/index/test_raw_token_scan.py
 * holds this scan equal to the regex.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

enum { WORD = 1, MARK = 2, CONNECTOR = 4 };

static unsigned char kind[128];

static void fill_kinds(void) {
    for (int c = 0; c < 128; c++) {
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_') kind[c] |= WORD;
    }
    for (const char *m = "~./@#$"; *m; m++) kind[(unsigned char)*m] |= MARK;
    for (const char *m = ".-/\\@:+#~?=&%'"; *m; m++) kind[(unsigned char)*m] |= CONNECTOR;
}

/* A str of ``len`` ASCII bytes: made directly (PyUnicode_FromKindAndData would first scan them
 * for their largest code point, which is known here); one character is CPython's shared string. */
static PyObject *ascii_str(const unsigned char *bytes, Py_ssize_t len) {
    if (len == 1) return PyUnicode_FromOrdinal(bytes[0]);
    PyObject *str = PyUnicode_New(len, 127);
    if (str == NULL) return NULL;
    memcpy(PyUnicode_DATA(str), bytes, (size_t)len);
    return str;
}

static PyObject *ascii_raw_tokens(PyObject *self, PyObject *text) {
    (void)self;
    if (!PyUnicode_Check(text)) {
        PyErr_Format(PyExc_TypeError, "ascii_raw_tokens takes a str, got %s", Py_TYPE(text)->tp_name);
        return NULL;
    }
    if (!PyUnicode_IS_ASCII(text)) Py_RETURN_NONE;
    const unsigned char *s = (const unsigned char *)PyUnicode_DATA(text);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    PyObject *out = PyList_New(0);
    if (out == NULL) return NULL;
    Py_ssize_t i = 0;
    while (i < n) {
        Py_ssize_t j = i;
        while (j < n && (kind[s[j]] & MARK)) j++;
        if (j >= n || !(kind[s[j]] & WORD)) {
            i = j + 1;  /* no match at i, nor anywhere in its run of marks, nor at j (neither kind) */
            continue;
        }
        Py_ssize_t end = j;
        while (end < n && (kind[s[end]] & WORD)) end++;
        for (;;) {  /* connectors, then words: taken only when a word character follows them */
            Py_ssize_t k = end;
            while (k < n && (kind[s[k]] & CONNECTOR)) k++;
            if (k == end || k >= n || !(kind[s[k]] & WORD)) break;
            while (k < n && (kind[s[k]] & WORD)) k++;
            end = k;
        }
        PyObject *token = ascii_str(s + i, end - i);
        if (token == NULL || PyList_Append(out, token) < 0) {
            Py_XDECREF(token);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(token);
        i = end;
    }
    return out;
}

/* unit_ids(docs, unit_of, out, only_missing): out[t] = unit_of[raw] for the t-th raw token of the
 * documents (each a list of str, back to back); a token not in unit_of gets -1, and the distinct
 * such tokens are returned in the order first seen. With only_missing, only the entries of out
 * that are -1 are looked up again (after the caller has added the missing units).
 *
 * Why: Vocabulary.encode's per-token dict lookups (a flat list, a set difference, then a map of
 * __getitem__ into np.fromiter) were ~14% of a bulk write; here it is one pass of dict lookups. */
static PyObject *unit_ids(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *docs, *unit_of, *out_obj;
    int only_missing;
    if (!PyArg_ParseTuple(args, "O!O!Op:unit_ids", &PyList_Type, &docs, &PyDict_Type, &unit_of, &out_obj,
                          &only_missing))
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(out_obj, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE) < 0) return NULL;
    const char *fmt = view.format ? view.format : "B";
    if (*fmt == '<' || *fmt == '=' || *fmt == '@') fmt++;
    if (view.ndim != 1 || view.itemsize != 8 || (strcmp(fmt, "q") != 0 && strcmp(fmt, "l") != 0)) {
        PyErr_SetString(PyExc_TypeError, "unit_ids: out must be a writable 1-d contiguous int64 array");
        PyBuffer_Release(&view);
        return NULL;
    }
    int64_t *out = (int64_t *)view.buf;
    Py_ssize_t total = view.shape ? view.shape[0] : view.len / 8, t = 0;
    PyObject *missing = PyList_New(0), *seen = PySet_New(NULL);
    if (missing == NULL || seen == NULL) goto fail;
    for (Py_ssize_t d = 0; d < PyList_GET_SIZE(docs); d++) {
        PyObject *doc = PyList_GET_ITEM(docs, d);
        if (!PyList_Check(doc)) {
            PyErr_Format(PyExc_TypeError, "unit_ids: document %zd is a %s, not a list", d, Py_TYPE(doc)->tp_name);
            goto fail;
        }
        for (Py_ssize_t r = 0; r < PyList_GET_SIZE(doc); r++, t++) {
            if (t >= total) {
                PyErr_SetString(PyExc_ValueError, "unit_ids: out is shorter than the documents' tokens");
                goto fail;
            }
            if (only_missing && out[t] >= 0) continue;
            PyObject *raw = PyList_GET_ITEM(doc, r);
            PyObject *unit = PyDict_GetItemWithError(unit_of, raw);  /* borrowed */
            if (unit != NULL) {
                long long id = PyLong_AsLongLong(unit);
                if (id == -1 && PyErr_Occurred()) goto fail;
                out[t] = id;
                continue;
            }
            if (PyErr_Occurred()) goto fail;
            out[t] = -1;
            int known = PySet_Contains(seen, raw);
            if (known < 0) goto fail;
            if (!known && (PySet_Add(seen, raw) < 0 || PyList_Append(missing, raw) < 0)) goto fail;
        }
    }
    if (t != total) {
        PyErr_SetString(PyExc_ValueError, "unit_ids: out is longer than the documents' tokens");
        goto fail;
    }
    Py_DECREF(seen);
    PyBuffer_Release(&view);
    return missing;
fail:
    Py_XDECREF(missing);
    Py_XDECREF(seen);
    PyBuffer_Release(&view);
    return NULL;
}

static PyMethodDef methods[] = {
    {"unit_ids", (PyCFunction)unit_ids, METH_VARARGS,
     "Each token's unit id from unit_of into out (-1 where it has none); returns the distinct missing tokens."},
    {"ascii_raw_tokens", (PyCFunction)ascii_raw_tokens, METH_O,
     "RAW_TOKEN.findall(text) for an ASCII str; None for any other str."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_tokens", "The lexical lane's raw-token scan for ASCII text (see index/_tokens.c).", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__tokens(void) {
    fill_kinds();
    return PyModule_Create(&module);
}
