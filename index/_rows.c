/* Positional reads of many rows of a saved vectors file, in one call with the GIL released
 * (index.hnsw_rows.FileRows reads the ~50 rows a search re-scores, and the ~40 a completion
 * scores, this way).
 *
 * Why C: one os.preadv per row from Python cost ~2.5 us a row (the loop, a memoryview per row, the
 * GIL taken back after every system call): 0.13 ms for a search's 51 rows at 1M memories, on the
 * semantic lane's critical path. Here each row is one pread(2) into its place in the output array,
 * the same bytes at the same offsets, so nothing read changes.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

/* pread_rows(fd, out, offsets, width) -> rows read in full
 *   out: a writable C-contiguous buffer of at least len(offsets) * width bytes; offsets: int64
 *   file offsets, one per row; row i goes to bytes [i * width, (i + 1) * width) of out.
 * Stops at the first row that the file ends before (returns its index); OSError on a failed read. */
static PyObject *pread_rows(PyObject *self, PyObject *args) {
    (void)self;
    int fd;
    Py_buffer out, offsets;
    PyObject *offsets_obj;
    Py_ssize_t width;
    if (!PyArg_ParseTuple(args, "iw*On", &fd, &out, &offsets_obj, &width)) return NULL;
    if (PyObject_GetBuffer(offsets_obj, &offsets, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyBuffer_Release(&out);
        return NULL;
    }
    PyObject *result = NULL;
    const char *kind = offsets.format ? offsets.format : "B";
    if (*kind == '<' || *kind == '=' || *kind == '@') kind++;
    if (offsets.itemsize != (Py_ssize_t)sizeof(int64_t) || (strcmp(kind, "q") && strcmp(kind, "l"))) {
        PyErr_SetString(PyExc_ValueError, "offsets must be int64");
        goto done;
    }
    Py_ssize_t n = offsets.len / (Py_ssize_t)sizeof(int64_t);
    if (width <= 0 || out.len < n * width) {
        PyErr_SetString(PyExc_ValueError, "out must hold len(offsets) rows of width bytes; offsets are int64");
        goto done;
    }
    const int64_t *at = offsets.buf;
    char *buf = out.buf;
    Py_ssize_t i = 0;
    int failed = 0;
    Py_BEGIN_ALLOW_THREADS
    for (; i < n; i++) {
        Py_ssize_t got = 0;
        while (got < width) {
            ssize_t r = pread(fd, buf + i * width + got, (size_t)(width - got), (off_t)(at[i] + got));
            if (r < 0 && errno == EINTR) continue;
            if (r < 0) {
                failed = errno;
                break;
            }
            if (r == 0) break; /* the file ends before this row does */
            got += r;
        }
        if (failed || got < width) break;
    }
    Py_END_ALLOW_THREADS
    if (failed) {
        errno = failed;
        PyErr_SetFromErrno(PyExc_OSError);
        goto done;
    }
    result = PyLong_FromSsize_t(i);
done:
    PyBuffer_Release(&out);
    PyBuffer_Release(&offsets);
    return result;
}

static PyMethodDef methods[] = {
    {"pread_rows", pread_rows, METH_VARARGS, "Read rows of width bytes at the given offsets (see index.hnsw_rows)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_rows", "Positional reads of many rows.", -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__rows(void) { return PyModule_Create(&module); }
