/*
 * searchgym.wrappers._substring_scan: which of a few patterns occur in one long str.
 *
 * The WCR matcher asks "does each waypoint title occur in this 8k-token think text?" for a handful
 * of titles. CPython's multi-character str.find walks the text at about a character per nanosecond
 * per pattern, whereas glibc's memchr scans memory an order of magnitude faster. So, per pattern:
 *
 *   1. sample a byte histogram of the text's raw PEP 393 buffer (a few KB spread over it);
 *   2. anchor on the byte of the pattern (at some character j, byte k of that character's code
 *      unit) that the sample says is rarest in this text;
 *   3. memchr for that byte; at each hit at the right alignment, compare the whole pattern.
 *
 * A pattern whose anchor keeps hitting without matching (e.g. "aaaa…ab"-like text) would make this
 * O(n·m); once the bytes compared at hits exceed a budget linear in the text, the scan gives up on
 * that pattern and CPython's own (linear-time) substring search decides it instead.
 *
 * The text is read in place (1, 2 or 4 bytes per character, never re-encoded); each pattern is
 * widened once to the text's unit size. A pattern whose kind is wider than the text's cannot occur
 * in it (PEP 393 strings are stored in their narrowest kind). Results equal `[p in text for p in
 * patterns]` exactly; tests/test_wrappers_wcr.py checks that against random text.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define SAMPLE_CHUNKS 4
#define SAMPLE_CHUNK_BYTES 256
#define RELEASE_GIL_BYTES (1 << 16)

/* PyUnicode_READY is a no-op (and deprecated) from Python 3.12 on. */
#if PY_VERSION_HEX >= 0x030C0000
#define ENSURE_READY(op) 0
#else
#define ENSURE_READY(op) PyUnicode_READY(op)
#endif

/* Counts of each byte value in up to SAMPLE_CHUNKS evenly spaced chunks of the buffer. Counting
 * goes to 8 interleaved tables (summed at the end) so that runs of one byte value (the zero high
 * bytes of a UCS-2 text) do not serialise on one counter. */
#define SUB_TABLES 8
static void
count_bytes(const unsigned char *p, size_t len, uint16_t sub[SUB_TABLES][256])
{
    size_t i = 0;
    for (; i + SUB_TABLES <= len; i += SUB_TABLES)
        for (int t = 0; t < SUB_TABLES; t++)
            sub[t][p[i + t]]++;
    for (; i < len; i++)
        sub[0][p[i]]++;
}

static void
sample_histogram(const unsigned char *buf, size_t nbytes, uint32_t hist[256])
{
    uint16_t sub[SUB_TABLES][256]; /* at most SAMPLE_CHUNKS * SAMPLE_CHUNK_BYTES counts: fits */
    memset(sub, 0, sizeof(sub));
    if (nbytes <= SAMPLE_CHUNKS * SAMPLE_CHUNK_BYTES) {
        count_bytes(buf, nbytes, sub);
    } else {
        size_t stride = (nbytes - SAMPLE_CHUNK_BYTES) / (SAMPLE_CHUNKS - 1);
        for (int c = 0; c < SAMPLE_CHUNKS; c++)
            count_bytes(buf + (size_t)c * stride, SAMPLE_CHUNK_BYTES, sub);
    }
    for (int b = 0; b < 256; b++) {
        uint32_t total = 0;
        for (int t = 0; t < SUB_TABLES; t++)
            total += sub[t][b];
        hist[b] = total;
    }
}

/* Does the pattern (m units of size u, already in the text's kind) occur in the text (n units)?
 * 1 or 0; -1 when the verification budget ran out before an answer (the caller decides it). */
static int
contains(const unsigned char *text, size_t n, const unsigned char *pat, size_t m, size_t u,
         const uint32_t hist[256])
{
    if (m == 0)
        return 1;
    if (m > n)
        return 0;
    /* The rarest byte of the pattern, by the sampled histogram (ties go to the later byte, which
     * for names is more often inside a word than its common capital). */
    size_t best = 0;
    uint32_t best_count = UINT32_MAX;
    for (size_t i = 0; i < m * u; i++) {
        uint32_t c = hist[pat[i]];
        if (c <= best_count) {
            best_count = c;
            best = i;
        }
    }
    const unsigned char byte = pat[best];
    const size_t j = best / u, k = best % u;
    const size_t nbytes_pat = m * u;
    /* The pattern starts at character s (0 <= s <= n - m): the anchor byte sits at s*u + best. */
    const unsigned char *p = text + best;
    const unsigned char *end = text + (n - m) * u + best + 1;
    size_t budget = 4 * n * u + 4096; /* bytes we may compare at hits before giving up */
    while (p < end) {
        p = memchr(p, byte, (size_t)(end - p));
        if (p == NULL)
            return 0;
        size_t off = (size_t)(p - text);
        if ((off - k) % u == 0) {
            size_t s = (off - k) / u - j;
            if (memcmp(text + s * u, pat, nbytes_pat) == 0)
                return 1;
            if (budget < nbytes_pat)
                return -1;
            budget -= nbytes_pat;
        }
        p++;
    }
    return 0;
}

/* Writes `src` (a str of kind <= u) as n units of size u into `dst`. */
static void
widen(PyObject *src, unsigned char *dst, size_t u)
{
    int kind = PyUnicode_KIND(src);
    const void *data = PyUnicode_DATA(src);
    Py_ssize_t n = PyUnicode_GET_LENGTH(src);
    if ((size_t)kind == u) {
        memcpy(dst, data, (size_t)n * u);
        return;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 ch = PyUnicode_READ(kind, data, i);
        if (u == 2) {
            Py_UCS2 v = (Py_UCS2)ch;
            memcpy(dst + (size_t)i * 2, &v, 2);
        } else {
            memcpy(dst + (size_t)i * 4, &ch, 4);
        }
    }
}

PyDoc_STRVAR(contains_each_doc,
"contains_each(text, patterns, /)\n--\n\n"
"One bool per pattern: does it occur in text? Equal to [p in text for p in patterns].\n\n"
"text is a str; patterns is a tuple or list of str.");

static PyObject *
contains_each(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "contains_each expected 2 arguments (text, patterns), got %zd", nargs);
        return NULL;
    }
    PyObject *text = args[0];
    if (!PyUnicode_Check(text)) {
        PyErr_Format(PyExc_TypeError, "text must be str, got %.100s", Py_TYPE(text)->tp_name);
        return NULL;
    }
    if (!PyTuple_Check(args[1]) && !PyList_Check(args[1])) {
        PyErr_Format(PyExc_TypeError, "patterns must be a tuple or list of str, got %.100s", Py_TYPE(args[1])->tp_name);
        return NULL;
    }
    /* A tuple (a list is copied): nothing can change the patterns while the GIL is released. */
    PyObject *seq = PySequence_Tuple(args[1]);
    if (seq == NULL)
        return NULL;
    if (ENSURE_READY(text) < 0) {
        Py_DECREF(seq);
        return NULL;
    }
    Py_ssize_t npat = PyTuple_GET_SIZE(seq);
    PyObject **items = &PyTuple_GET_ITEM(seq, 0);
    const size_t u = (size_t)PyUnicode_KIND(text);
    const size_t n = (size_t)PyUnicode_GET_LENGTH(text);
    const unsigned char *data = (const unsigned char *)PyUnicode_DATA(text);

    /* Widen every pattern that can occur into one buffer; -1 marks one that cannot. */
    size_t total = 0;
    for (Py_ssize_t i = 0; i < npat; i++) {
        if (!PyUnicode_Check(items[i])) {
            PyErr_Format(PyExc_TypeError, "pattern %zd must be str, got %.100s", i, Py_TYPE(items[i])->tp_name);
            Py_DECREF(seq);
            return NULL;
        }
        if (ENSURE_READY(items[i]) < 0) {
            Py_DECREF(seq);
            return NULL;
        }
        total += (size_t)PyUnicode_GET_LENGTH(items[i]) * u;
    }
    unsigned char *buf = PyMem_Malloc(total ? total : 1);
    Py_ssize_t *offsets = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(npat ? npat : 1));
    size_t *lengths = PyMem_Malloc(sizeof(size_t) * (size_t)(npat ? npat : 1));
    signed char *found = PyMem_Calloc((size_t)(npat ? npat : 1), 1);
    if (buf == NULL || offsets == NULL || lengths == NULL || found == NULL) {
        PyMem_Free(buf);
        PyMem_Free(offsets);
        PyMem_Free(lengths);
        PyMem_Free(found);
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    size_t pos = 0;
    for (Py_ssize_t i = 0; i < npat; i++) {
        lengths[i] = (size_t)PyUnicode_GET_LENGTH(items[i]);
        if ((size_t)PyUnicode_KIND(items[i]) > u) {
            offsets[i] = -1;
            continue;
        }
        offsets[i] = (Py_ssize_t)pos;
        widen(items[i], buf + pos, u);
        pos += lengths[i] * u;
    }

    /* From here on only our own buffers and the (immutable, referenced) text are read, so other
     * threads may run while a long text is scanned. */
    uint32_t hist[256];
    int release = npat > 0 && n * u >= RELEASE_GIL_BYTES;
    PyThreadState *ts = release ? PyEval_SaveThread() : NULL;
    if (npat > 0)
        sample_histogram(data, n * u, hist);
    for (Py_ssize_t i = 0; i < npat; i++) {
        if (offsets[i] < 0)
            continue;
        found[i] = (signed char)contains(data, n, buf + offsets[i], lengths[i], u, hist);
    }
    if (release)
        PyEval_RestoreThread(ts);

    PyObject *result = PyList_New(npat);
    for (Py_ssize_t i = 0; result != NULL && i < npat; i++) {
        int hit = found[i];
        if (hit < 0 && (hit = PyUnicode_Contains(text, items[i])) < 0)
            Py_CLEAR(result);
        else
            PyList_SET_ITEM(result, i, Py_NewRef(hit ? Py_True : Py_False));
    }
    PyMem_Free(buf);
    PyMem_Free(offsets);
    PyMem_Free(lengths);
    PyMem_Free(found);
    Py_DECREF(seq);
    return result;
}

static PyMethodDef methods[] = {
    {"contains_each", (PyCFunction)(void (*)(void))contains_each, METH_FASTCALL, contains_each_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    "searchgym.wrappers._substring_scan",
    "Compiled multi-pattern substring test over a str's own buffer (see wcr.WaypointMatcher).",
    -1,
    methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC
PyInit__substring_scan(void)
{
    return PyModule_Create(&module);
}
