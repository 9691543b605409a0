/* Deflate sizes of many texts in one call: the two compression statistics of
 * `stats.py` (`deflated_size`, `ConditionalNovelty`), the same bytes (and bits) counted.
 *
 * Why by hand: the statistics are defined on zlib's own output (another compressor,
 * zlib-ng or libdeflate, gives other sizes and other values), and CPython's zlib module
 * can neither reset a stream nor count output without building a bytes object: each
 * stand-alone deflate allocated and freed zlib's ~256 KB state, each record's history
 * stream too. Here one stream of each kind is reset between texts (zlib: "equivalent to
 * deflateEnd followed by deflateInit"), and the output is counted, not kept. Built as an
 * optional extension: `stats.py` computes the same sizes in Python without it, and
 * tests/pipelines/test_deflate.py checks that both agree. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <zlib.h>

#define MEM_LEVEL 8 /* CPython's DEF_MEM_LEVEL: what zlib.compress and compressobj use */
#define SINK 16384

/* Add to *out the bytes deflate writes for `n` bytes of input (none: NULL, 0) with
 * `flush`, as CPython's Compress.compress (Z_NO_FLUSH) and .flush(mode) call it. */
static int deflate_count(z_stream *z, const char *data, Py_ssize_t n, int flush, Py_ssize_t *out)
{
    unsigned char sink[SINK];
    z->next_in = (Bytef *)data;
    do {
        uInt chunk = n > (Py_ssize_t)UINT_MAX ? UINT_MAX : (uInt)n;
        z->avail_in = chunk;
        n -= chunk;
        do {
            z->next_out = sink;
            z->avail_out = SINK;
            int err = deflate(z, n ? Z_NO_FLUSH : flush);
            if (err == Z_STREAM_ERROR)
                return -1;
            *out += SINK - z->avail_out;
        } while (z->avail_out == 0);
    } while (n);
    return 0;
}

/* The bits written so far that deflate still holds (after a Z_BLOCK flush, up to 7 of
 * its last byte; the sink took every whole byte): with the bytes counted, where in the
 * stream a block starts and ends. */
static Py_ssize_t held_bits(z_stream *z)
{
    unsigned bytes = 0;
    int bits = 0;
    deflatePending(z, &bytes, &bits);
    return (Py_ssize_t)bytes * 8 + bits;
}

/* Add `n` bytes as their own block(s), as CPython's compress and flush(Z_BLOCK) call
 * deflate; *size = the bits those blocks take, wherever they start in a byte, rounded up
 * to whole bytes (as a stream of them alone ends). */
static int block_bytes(z_stream *z, const char *data, Py_ssize_t n, Py_ssize_t *size)
{
    Py_ssize_t before = held_bits(z), written = 0; /* the last bits before: not ours */
    if (deflate_count(z, data, n, Z_NO_FLUSH, &written) || deflate_count(z, NULL, 0, Z_BLOCK, &written))
        return -1;
    *size = (written * 8 + held_bits(z) - before + 7) / 8;
    return 0;
}

/* What a text's size alone comes after (`stats.FRAME`): one byte, so that the text starts
 * at stream position 1 as it does in a history. zlib never takes position 0 as a match
 * source (its hash chains' "none"): a stream of the text alone could not copy its first
 * byte, a history could. One byte is no source either: it sits at 0, and a match is 3 or
 * more. `stats.py` writes it as its own block (`Z_BLOCK`: a fixed block of one 8-bit
 * literal, FRAME_BITS) before the text's. Here the byte is a preset dictionary and the
 * block's bits past its last whole byte are primed: the same state (position 1, position
 * 0 hashed as "none", the next block starting at 1 and at bit 2 of a byte: where a stored
 * block is padded to), the same blocks, without building and flushing one. Measured on
 * the bench corpus's distinct observations: ~32.1 us a trajectory against ~34.8 with the
 * frame block (unframed: ~31.7). A dictionary alone and `Z_FINISH`, from bit 0, padded a
 * stored block after a first block differently (24 of 300 such texts a byte apart).
 * tests/pipelines/test_deflate.py checks both against the frame block. */
static const char FRAME[1] = {'\n'};
#define FRAME_BITS 18 /* 3 (block header) + 8 + 7 (end of block) */

static int bytes_list(PyObject *list, const char *what)
{
    if (!PyList_Check(list)) {
        PyErr_Format(PyExc_TypeError, "%s: a list of bytes", what);
        return -1;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++)
        if (!PyBytes_Check(PyList_GET_ITEM(list, i))) {
            PyErr_Format(PyExc_TypeError, "%s[%zd]: bytes expected", what, i);
            return -1;
        }
    return 0;
}

static int start(z_stream *z, int level, int wbits)
{
    memset(z, 0, sizeof *z);
    if (deflateInit2(z, level, Z_DEFLATED, wbits, MEM_LEVEL, Z_DEFAULT_STRATEGY) == Z_OK)
        return 0;
    PyErr_SetString(PyExc_ValueError, "deflateInit2 failed (level, wbits?)");
    return -1;
}

static PyObject *failed(z_stream *z, PyObject *res)
{
    deflateEnd(z);
    Py_XDECREF(res);
    if (!PyErr_Occurred())
        PyErr_SetString(PyExc_RuntimeError, "deflate failed");
    return NULL;
}

PyDoc_STRVAR(deflated_sizes_doc,
    "deflated_sizes(blobs, level, wbits) -> list[int]: each blob's size alone, framed as in a history:\n"
    "its bytes after one byte it cannot copy, finished (0 when empty; `stats.deflated_size`).");

static PyObject *deflated_sizes(PyObject *self, PyObject *args)
{
    PyObject *blobs, *res;
    int level, wbits;
    z_stream z;
    if (!PyArg_ParseTuple(args, "Oii", &blobs, &level, &wbits) || bytes_list(blobs, "blobs")
        || start(&z, level, wbits))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(blobs);
    if (!(res = PyList_New(n)))
        return failed(&z, NULL);
    for (Py_ssize_t i = 0, reset = 0; i < n; i++) {
        PyObject *b = PyList_GET_ITEM(blobs, i), *size;
        Py_ssize_t out = 0;
        if (PyBytes_GET_SIZE(b)
            && ((reset++ && deflateReset(&z) != Z_OK)
                || deflateSetDictionary(&z, (const Bytef *)FRAME, 1) != Z_OK
                || deflatePrime(&z, FRAME_BITS % 8, 0) != Z_OK
                || block_bytes(&z, PyBytes_AS_STRING(b), PyBytes_GET_SIZE(b), &out)))
            return failed(&z, res);
        if (!(size = PyLong_FromSsize_t(out)))
            return failed(&z, res);
        PyList_SET_ITEM(res, i, size);
    }
    deflateEnd(&z);
    return res;
}

PyDoc_STRVAR(history_sizes_doc,
    "history_sizes(actions, observations, starts, level, wbits) -> list[int]: for each turn, the\n"
    "bits its observation's blocks take in its record's history stream in whole bytes, rounded\n"
    "up as a stream of them alone ends (0 when empty); records are turns starts[k]:starts[k+1]\n"
    "(`stats.ConditionalNovelty`).");

static PyObject *history_sizes(PyObject *self, PyObject *args)
{
    PyObject *acts, *obs, *starts, *res;
    int level, wbits;
    z_stream z;
    if (!PyArg_ParseTuple(args, "OOOii", &acts, &obs, &starts, &level, &wbits)
        || bytes_list(acts, "actions") || bytes_list(obs, "observations"))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(obs), records = PyList_Check(starts) ? PyList_GET_SIZE(starts) - 1 : -1;
    if (PyList_GET_SIZE(acts) != n || records < 0) {
        PyErr_SetString(PyExc_ValueError, "one action a turn, and starts a list of record starts");
        return NULL;
    }
    if (start(&z, level, wbits))
        return NULL;
    if (!(res = PyList_New(n)))
        return failed(&z, NULL);
    Py_ssize_t filled = 0;
    for (Py_ssize_t k = 0; k < records; k++) {
        Py_ssize_t a = PyLong_AsSsize_t(PyList_GET_ITEM(starts, k));
        Py_ssize_t e = PyLong_AsSsize_t(PyList_GET_ITEM(starts, k + 1));
        if (PyErr_Occurred() || a != filled || e < a || e > n) {
            PyErr_SetString(PyExc_ValueError, "starts: ascending turn indexes from 0 to len(observations)");
            return failed(&z, res);
        }
        if (k && deflateReset(&z) != Z_OK)
            return failed(&z, res);
        for (Py_ssize_t i = a; i < e; i++) {
            PyObject *x = PyList_GET_ITEM(acts, i), *o = PyList_GET_ITEM(obs, i), *size;
            Py_ssize_t action = 0, given = 0;
            if (deflate_count(&z, PyBytes_AS_STRING(x), PyBytes_GET_SIZE(x), Z_NO_FLUSH, &action)
                || deflate_count(&z, NULL, 0, Z_BLOCK, &action)
                || (PyBytes_GET_SIZE(o) && block_bytes(&z, PyBytes_AS_STRING(o), PyBytes_GET_SIZE(o), &given)))
                return failed(&z, res);
            if (!(size = PyLong_FromSsize_t(given)))
                return failed(&z, res);
            PyList_SET_ITEM(res, i, size);
        }
        filled = e;
    }
    deflateEnd(&z);
    if (filled != n) {
        Py_DECREF(res);
        PyErr_SetString(PyExc_ValueError, "starts: the last must be len(observations)");
        return NULL;
    }
    return res;
}

static PyObject *runtime_zlib(PyObject *self, PyObject *unused)
{
    return PyUnicode_FromString(zlibVersion());
}

static PyMethodDef methods[] = {
    {"deflated_sizes", deflated_sizes, METH_VARARGS, deflated_sizes_doc},
    {"history_sizes", history_sizes, METH_VARARGS, history_sizes_doc},
    {"zlib_version", runtime_zlib, METH_NOARGS, "The zlib this module runs with."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_deflate", "Deflate sizes of many texts in one call (stats.py).", -1, methods,
};

PyMODINIT_FUNC PyInit__deflate(void)
{
    return PyModule_Create(&module);
}
