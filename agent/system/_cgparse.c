/* agent.system._cgparse: the koordlet's per-tick cgroup file parsers in C (optional accelerator).
 *
 * The strict parsers of agent/system/cgroupparse.py are the reference. Each function here takes the bytes
 * of one file (or of a round's files) and answers only where its answer is the strict parser's: on the
 * plain layout the kernel writes. Anything else gets None: a byte outside printable ASCII, space, tab and
 * '\n'; a line that is not exactly the expected tokens; a value that is not a plain decimal (or, for a value
 * the caller asked for, one of more than 18 digits). None means "no answer", never "bad file": the caller
 * (agent/system/readers.py) then runs the strict parser, so errors and odd inputs keep their exact Python
 * semantics. tests/unit/agent/system/test_cgparse.py property-tests "None or the strict answer" on odd bytes
 * and "an answer" on the kernel's layouts. The functions hold no state and never raise on content.
 *
 *   numa_v1(data)         cgroup v1 memory.numa_stat, first line "total=.. N0=.. N1=..": {node: pages}
 *   numa_v2(data, div)    cgroup v2 memory.numa_stat "anon"/"file" lines: {node: sum of bytes // div}
 *   uint_batch(datas)     for each bytes (or None) of a list: a non-negative decimal with optional blanks
 *                         around it (cpuacct.usage), else None
 *   kv_batch(datas, keys, lo, hi, total, scale)
 *                         for each bytes (or None) of a list of flat "key value" files (cpu.stat,
 *                         memory.stat): the values of `keys` (a tuple of bytes; the last occurrence wins)
 *                         narrowed to values[lo:hi], as a tuple, or with `total` their sum times `scale`;
 *                         None where a key is missing, any line is not "key integer", a picked value is
 *                         negative or the product overflows int64
 *   Both batch functions return (answers, misses): misses counts the bytes items left unanswered.
 *   window_sum(ts, vals, n, head, lo, hi)
 *                         for one ring buffer of the metric cache whose points are in timestamp order
 *                         (int32 or int64 timestamps, float64 values; the older run [head, n) then the
 *                         newer [0, head)): (sum, count) of the values with lo <= t <= hi, summed one by
 *                         one in timestamp order from the first (as numpy's cumsum), no copy made
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <limits.h>
#include <string.h>

#define MAX_KEYS 32
#define MAX_NODES 256
#define MAX_DIGITS 18

/* A plain decimal: an optional '-', then 1..MAX_DIGITS digits. */
static int parse_dec(const char *s, Py_ssize_t n, long long *out) {
    int neg = 0;
    if (n > 0 && s[0] == '-') {
        neg = 1;
        s++;
        n--;
    }
    if (n < 1 || n > MAX_DIGITS) return 0;
    long long v = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return 0;
        v = v * 10 + (s[i] - '0');
    }
    *out = neg ? -v : v;
    return 1;
}

/* A token Python's int() accepts, as the kernel writes it: an optional '-', then digits (any number). */
static int plain_int(const char *s, Py_ssize_t n) {
    if (n > 0 && s[0] == '-') {
        s++;
        n--;
    }
    if (n < 1) return 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9') return 0;
    return 1;
}

/* One line from *pp (up to '\n' or end, *pp moved past it) in a single pass: up to `max` tokens separated
 * by blanks (space, tab) into starts/lens. Returns the token count (max + 1 when there are more), or -1
 * on a byte that is not printable ASCII, blank or '\n'. */
static int line_tokens(const char **pp, const char *end, int max, const char **starts, Py_ssize_t *lens) {
    const char *p = *pp;
    int n = 0;
    for (;;) {
        while (p < end && (*p == ' ' || *p == '\t')) p++;
        if (p >= end) break;
        if (*p == '\n') {
            p++;
            break;
        }
        if ((unsigned char)(*p - 0x21) >= 0x5e) return -1; /* not 0x21..0x7e */
        const char *t = p;
        while (p < end && (unsigned char)(*p - 0x21) < 0x5e) p++;
        if (n < max) {
            starts[n] = t;
            lens[n] = p - t;
        }
        n++;
    }
    *pp = p;
    return n > max ? max + 1 : n;
}

/* The kernel's own layout of a "key value" line, checked in one vectorisable pass: printable ASCII with
 * exactly one space, inside the line. On success the two tokens are set and *pp moved past the line; on
 * failure nothing moves and line_tokens decides (tabs, several blanks, bad bytes). */
static int simple_pair(const char **pp, const char *end, const char **starts, Py_ssize_t *lens) {
    const char *p = *pp;
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    const char *line_end = nl ? nl : end;
    Py_ssize_t n = line_end - p;
    unsigned bad = 0, spaces = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        bad |= (unsigned)(c < 0x20) | (unsigned)(c > 0x7e);
        spaces += (unsigned)(c == ' ');
    }
    if (bad || spaces != 1 || n < 3 || p[0] == ' ' || p[n - 1] == ' ') return 0;
    const char *sp = memchr(p, ' ', (size_t)n);
    starts[0] = p;
    lens[0] = sp - p;
    starts[1] = sp + 1;
    lens[1] = line_end - sp - 1;
    *pp = nl ? nl + 1 : end;
    return 1;
}

typedef struct {
    Py_ssize_t n;
    const char *p[MAX_KEYS];
    Py_ssize_t len[MAX_KEYS];
} Keys;

/* The keys tuple as C strings; 0 with TypeError when it is not a tuple of bytes, -1 when it has no keys or
 * too many (no answer). */
static int load_keys(PyObject *keys, Keys *out) {
    if (!PyTuple_Check(keys)) {
        PyErr_SetString(PyExc_TypeError, "keys must be a tuple of bytes");
        return 0;
    }
    out->n = PyTuple_GET_SIZE(keys);
    for (Py_ssize_t k = 0; k < out->n && k < MAX_KEYS; k++) {
        PyObject *key = PyTuple_GET_ITEM(keys, k);
        if (!PyBytes_Check(key)) {
            PyErr_SetString(PyExc_TypeError, "keys must be a tuple of bytes");
            return 0;
        }
        out->p[k] = PyBytes_AS_STRING(key);
        out->len[k] = PyBytes_GET_SIZE(key);
    }
    return (out->n < 1 || out->n > MAX_KEYS) ? -1 : 1;
}

/* The values of every key (last occurrence) of a flat "key value" file whose every line is "key integer"
 * (the strict parser rejects any other line); 0 when there is no answer. */
static int kv_values(const char *data, Py_ssize_t size, const Keys *keys, long long *values) {
    Py_ssize_t nkeys = keys->n;
    const char *const *kp = keys->p;
    const Py_ssize_t *kl = keys->len;
    const char *vp[MAX_KEYS];
    Py_ssize_t vl[MAX_KEYS];
    if (size == 0) return 0;
    for (Py_ssize_t k = 0; k < nkeys; k++) vp[k] = NULL;
    const char *p = data, *end = data + size;
    while (p < end) {
        const char *ts[2];
        Py_ssize_t tl[2];
        if (!simple_pair(&p, end, ts, tl) && line_tokens(&p, end, 2, ts, tl) != 2) return 0;
        if (!plain_int(ts[1], tl[1])) return 0;
        for (Py_ssize_t k = 0; k < nkeys; k++) {
            if (tl[0] == kl[k] && ts[0][0] == kp[k][0] && memcmp(ts[0], kp[k], (size_t)kl[k]) == 0) {
                vp[k] = ts[1];
                vl[k] = tl[1];
                break;
            }
        }
    }
    for (Py_ssize_t k = 0; k < nkeys; k++)
        if (vp[k] == NULL || !parse_dec(vp[k], vl[k], &values[k])) return 0;
    return 1;
}

static PyObject *int_tuple(const long long *values, Py_ssize_t n) {
    PyObject *out = PyTuple_New(n);
    if (out == NULL) return NULL;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *v = PyLong_FromLongLong(values[k]);
        if (v == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyTuple_SET_ITEM(out, k, v);
    }
    return out;
}

typedef struct {
    Keys keys;
    Py_ssize_t lo, hi;
    int total;
    long long scale;
} KvPick;

/* A new reference for every item of a list (Py_None where there is no answer): (answers, misses), misses
 * counting the bytes items left unanswered; NULL with an exception set. */
static PyObject *map_items(PyObject *datas, PyObject *(*one)(PyObject *, const void *), const void *ctx) {
    Py_ssize_t n = PyList_GET_SIZE(datas), misses = 0;
    PyObject *out = PyList_New(n);
    if (out == NULL) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyList_GET_ITEM(datas, i);
        PyObject *v = one(item, ctx);
        if (v == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        misses += (v == Py_None && item != Py_None);
        PyList_SET_ITEM(out, i, v);
    }
    return Py_BuildValue("(Nn)", out, misses);
}

/* One item of kv_batch: a new reference, or Py_None (new reference) when there is no answer. */
static PyObject *kv_item(PyObject *item, const void *ctx) {
    const KvPick *pick = (const KvPick *)ctx;
    const Keys *keys = &pick->keys;
    Py_ssize_t lo = pick->lo, hi = pick->hi;
    int total = pick->total;
    long long scale = pick->scale;
    long long values[MAX_KEYS];
    if (!PyBytes_Check(item) || !kv_values(PyBytes_AS_STRING(item), PyBytes_GET_SIZE(item), keys, values))
        Py_RETURN_NONE;
    long long sum = 0;
    for (Py_ssize_t k = lo; k < hi; k++) {
        if (values[k] < 0) Py_RETURN_NONE;
        sum += values[k]; /* at most MAX_KEYS values below 10^18: no overflow */
    }
    if (!total) return int_tuple(values + lo, hi - lo);
    if (scale != 1 && sum > LLONG_MAX / scale) Py_RETURN_NONE;
    return PyLong_FromLongLong(sum * scale);
}

static PyObject *kv_batch(PyObject *self, PyObject *args) {
    PyObject *datas, *keys;
    Py_ssize_t lo, hi;
    int total;
    long long scale;
    if (!PyArg_ParseTuple(args, "O!OnnpL", &PyList_Type, &datas, &keys, &lo, &hi, &total, &scale)) return NULL;
    KvPick pick = {.lo = lo, .hi = hi, .total = total, .scale = scale};
    int ok = load_keys(keys, &pick.keys);
    if (ok == 0) return NULL;
    if (ok < 0 || lo < 0 || hi > pick.keys.n || lo >= hi || scale < 1) {
        PyErr_SetString(PyExc_ValueError, "kv_batch: need 0 <= lo < hi <= len(keys) <= 32 and scale >= 1");
        return NULL;
    }
    return map_items(datas, kv_item, &pick);
}

/* A non-negative plain decimal with optional blanks and newlines around it (cpuacct.usage). */
static PyObject *uint_item(PyObject *item, const void *ctx) {
    if (!PyBytes_Check(item)) Py_RETURN_NONE;
    const char *s = PyBytes_AS_STRING(item), *end = s + PyBytes_GET_SIZE(item);
    while (s < end && (*s == ' ' || *s == '\t' || *s == '\n')) s++;
    while (end > s && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\n')) end--;
    long long v;
    if (s == end || *s == '-' || !parse_dec(s, end - s, &v)) Py_RETURN_NONE;
    return PyLong_FromLongLong(v);
}

static PyObject *uint_batch(PyObject *self, PyObject *datas) {
    if (!PyList_Check(datas)) {
        PyErr_SetString(PyExc_TypeError, "uint_batch: a list of bytes or None");
        return NULL;
    }
    return map_items(datas, uint_item, NULL);
}

/* Add the "N<node>=<value>" fields of tokens [first, n) to sums (value // div, div > 0, value ≥ 0).
 * Fields without "N" are skipped but must hold '='. 0 on anything else, including a node twice. */
static int numa_fields(const char **ts, const Py_ssize_t *tl, int first, int n, long long div,
                       long long *sums, unsigned char *seen) {
    unsigned char here[MAX_NODES];
    memset(here, 0, sizeof(here));
    for (int i = first; i < n; i++) {
        const char *eq = memchr(ts[i], '=', (size_t)tl[i]);
        if (eq == NULL) return 0;
        if (ts[i][0] != 'N') continue;
        long long node, value;
        if (!parse_dec(ts[i] + 1, eq - ts[i] - 1, &node) || ts[i][1] == '-') return 0;
        if (!parse_dec(eq + 1, tl[i] - (eq - ts[i]) - 1, &value) || value < 0) return 0;
        if (node >= MAX_NODES || here[node]) return 0;
        here[node] = 1;
        seen[node] = 1;
        sums[node] += value / div;
    }
    return 1;
}

static PyObject *numa_dict(const long long *sums, const unsigned char *seen) {
    PyObject *out = PyDict_New();
    if (out == NULL) return NULL;
    for (int node = 0; node < MAX_NODES; node++) {
        if (!seen[node]) continue;
        PyObject *k = PyLong_FromLong(node), *v = PyLong_FromLongLong(sums[node]);
        if (k == NULL || v == NULL || PyDict_SetItem(out, k, v) < 0) {
            Py_XDECREF(k);
            Py_XDECREF(v);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(k);
        Py_DECREF(v);
    }
    return out;
}

#define MAX_FIELDS (MAX_NODES + 2)

static PyObject *numa_v1(PyObject *self, PyObject *args) {
    const char *data;
    Py_ssize_t size;
    if (!PyArg_ParseTuple(args, "y#", &data, &size)) return NULL;
    const char *p = data;
    const char *ts[MAX_FIELDS];
    Py_ssize_t tl[MAX_FIELDS];
    int n = line_tokens(&p, data + size, MAX_FIELDS, ts, tl); /* the first line only */
    if (n < 1 || n > MAX_FIELDS || ts[0] != data || tl[0] < 6 || memcmp(ts[0], "total=", 6) != 0)
        Py_RETURN_NONE; /* (the strict parser wants "total=" at the very start) */
    for (const char *q = p; q < data + size; q++)
        if ((unsigned char)*q >= 0x80) Py_RETURN_NONE; /* the rest is not parsed, but must decode */
    long long sums[MAX_NODES] = {0};
    unsigned char seen[MAX_NODES] = {0};
    if (!numa_fields(ts, tl, 0, n, 1, sums, seen)) Py_RETURN_NONE;
    return numa_dict(sums, seen);
}

static PyObject *numa_v2(PyObject *self, PyObject *args) {
    const char *data;
    Py_ssize_t size;
    long long div;
    if (!PyArg_ParseTuple(args, "y#L", &data, &size, &div)) return NULL;
    if (div <= 0) {
        PyErr_SetString(PyExc_ValueError, "numa_v2: div must be positive");
        return NULL;
    }
    long long sums[MAX_NODES] = {0};
    unsigned char seen_nodes[MAX_NODES] = {0};
    int seen_lines = 0;
    const char *p = data, *end = data + size;
    while (p < end) {
        const char *ts[MAX_FIELDS];
        Py_ssize_t tl[MAX_FIELDS];
        int n = line_tokens(&p, end, MAX_FIELDS, ts, tl);
        if (n < 0) Py_RETURN_NONE; /* the whole file must be plain, as for the Python parser */
        if (n < 1) continue;
        if (!((tl[0] == 4 && (memcmp(ts[0], "anon", 4) == 0 || memcmp(ts[0], "file", 4) == 0)))) continue;
        if (n > MAX_FIELDS) Py_RETURN_NONE;
        seen_lines++;
        if (!numa_fields(ts, tl, 1, n, div, sums, seen_nodes)) Py_RETURN_NONE;
    }
    if (seen_lines != 2) Py_RETURN_NONE;
    return numa_dict(sums, seen_nodes);
}

/* Index of the first element of ts[a, b) that is >= key (upper = 0) or > key (upper = 1); ts sorted. */
static Py_ssize_t bound(const void *ts, int wide, Py_ssize_t a, Py_ssize_t b, long long key, int upper) {
    while (a < b) {
        Py_ssize_t mid = a + (b - a) / 2;
        long long v = wide ? ((const long long *)ts)[mid] : (long long)((const int *)ts)[mid];
        if (upper ? v <= key : v < key)
            a = mid + 1;
        else
            b = mid;
    }
    return a;
}

static PyObject *window_sum(PyObject *self, PyObject *args) {
    PyObject *ts_obj, *vals_obj;
    Py_ssize_t n, head;
    long long lo, hi;
    if (!PyArg_ParseTuple(args, "OOnnLL", &ts_obj, &vals_obj, &n, &head, &lo, &hi)) return NULL;
    Py_buffer ts, vals;
    if (PyObject_GetBuffer(ts_obj, &ts, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return NULL;
    if (PyObject_GetBuffer(vals_obj, &vals, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyBuffer_Release(&ts);
        return NULL;
    }
    PyObject *out = NULL;
    int wide = ts.itemsize == 8;
    char tf = ts.format ? ts.format[0] : 'B', vf = vals.format ? vals.format[0] : 'B';
    Py_ssize_t cap = ts.len / (ts.itemsize ? ts.itemsize : 1);
    if (!((ts.itemsize == 4 && tf == 'i') || (wide && (tf == 'l' || tf == 'q'))) || vals.itemsize != 8 ||
        vf != 'd' || vals.len / 8 != cap || n < 0 || n > cap || head < 0 || (head > 0 && head >= n)) {
        PyErr_SetString(PyExc_ValueError, "window_sum: int32/int64 and float64 rows of one length, 0 <= head < n");
        goto done;
    }
    const double *v = (const double *)vals.buf;
    Py_ssize_t runs[2][2] = {{head, n}, {0, head}};
    double sum = 0.0;
    Py_ssize_t count = 0;
    for (int r = 0; r < 2; r++) {
        Py_ssize_t a = bound(ts.buf, wide, runs[r][0], runs[r][1], lo, 0);
        Py_ssize_t b = bound(ts.buf, wide, a, runs[r][1], hi, 1);
        for (Py_ssize_t i = a; i < b; i++) {
            sum = count ? sum + v[i] : v[i]; /* the first value as is: 0.0 + -0.0 would lose its sign */
            count++;
        }
    }
    out = Py_BuildValue("(dn)", sum, count);
done:
    PyBuffer_Release(&ts);
    PyBuffer_Release(&vals);
    return out;
}

static PyMethodDef methods[] = {
    {"numa_v1", numa_v1, METH_VARARGS, "numa_v1(data) -> {node: pages} | None"},
    {"numa_v2", numa_v2, METH_VARARGS, "numa_v2(data, div) -> {node: bytes // div summed} | None"},
    {"uint_batch", uint_batch, METH_O, "uint_batch(datas) -> ([int | None], misses)"},
    {"kv_batch", kv_batch, METH_VARARGS, "kv_batch(datas, keys, lo, hi, total, scale) -> ([...], misses)"},
    {"window_sum", window_sum, METH_VARARGS, "window_sum(ts, vals, n, head, lo, hi) -> (sum, count)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "_cgparse",
    .m_doc = "koordlet cgroup file parsers in C (see agent/system/readers.py)",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__cgparse(void) { return PyModule_Create(&module); }
