/* Thrift binary and compact: step over one value of a given wire type, as the checking decoder's `skip` does
 * (opwire/serde/_thrift/decode.py, reading with _thrift/binary.py and _thrift/compact.py), without building
 * anything. The archive scan (_thrift/tables.py) steps over the program with it: the checking decoder's walk
 * took four times the C reader's decode of the same bytes.
 *
 * The contract: where this returns (end, values), the checking decoder's `skip` from the same position, depth and
 * budget reads exactly the bytes up to `end`, charges exactly `values` and raises nothing. So this takes the same
 * wire as those readers (not only the canonical one: unknown field ids, any field order, sets, non-minimal
 * varints, a binary empty map's type bytes unchecked) and charges as they charge: one per container (once past
 * the depth check), one per leaf, none for a map's leaf keys. Anything they would refuse, anything past the depth
 * or the budget, and nesting past MAX_RECURSION (this file recurses on the C stack) is declined (None): the caller
 * runs the checking decoder, which reads it or words the error. Every read is checked against the bytes that
 * remain; every length against them before the elements are read; the work is linear in the bytes.
 */
#include "cbuild.h"

enum { W_BOOL = 2, W_BYTE = 3, W_DOUBLE = 4, W_I16 = 6, W_I32 = 8, W_I64 = 10, W_STRING = 11 };
enum { W_STRUCT = 12, W_MAP = 13, W_SET = 14, W_LIST = 15, W_UUID = 16 };

#define MAX_RECURSION 200 /* nested containers this file follows; deeper ones the checking decoder reads */

/* binary.py's _MIN_SIZE (fewest bytes of one value of a wire type; 0: not a type code it knows) */
static const int BINARY_MIN[17] = {0, 0, 1, 1, 8, 0, 2, 0, 4, 0, 8, 4, 1, 6, 5, 5, 16};
/* compact.py's _TO_TTYPE: compact type code -> wire type (0: not a code it knows) */
static const int FROM_COMPACT[16] = {0,      W_BOOL, W_BOOL, W_BYTE,  W_I16,   W_I32, W_I64,  W_DOUBLE,
                                     W_STRING, W_LIST, W_SET,  W_MAP, W_STRUCT, W_UUID, 0,     0};

typedef struct {
    const unsigned char *buf;
    Py_ssize_t pos, end;
    int compact;
    long long values, budget, max_depth;
} Skip;

static inline int take(Skip *s, Py_ssize_t n) {
    if (n < 0 || n > s->end - s->pos)
        return -1;
    s->pos += n;
    return 0;
}

static inline int byte(Skip *s, int *b) {
    if (s->pos >= s->end)
        return -1;
    *b = s->buf[s->pos++];
    return 0;
}

static inline int charge(Skip *s, long long n) {
    s->values += n;
    return s->values > s->budget ? -1 : 0;
}

static inline long long big_endian_signed(const unsigned char *at, int n) {
    unsigned long long v = 0;
    for (int i = 0; i < n; i++)
        v = (v << 8) | at[i];
    return n == 2 ? (long long)(short)v : (long long)(int)(unsigned int)v;
}

/* compact.py's _varint: an unsigned LEB128 varint of at most `max_bytes` bytes that fits `bits` bits */
static int varint(Skip *s, int max_bytes, int bits, unsigned long long *out) {
    unsigned long long v = 0;
    for (int i = 0; i < max_bytes; i++) {
        int b, shift = 7 * i;
        if (byte(s, &b) < 0)
            return -1;
        unsigned long long part = (unsigned long long)(b & 0x7f);
        if (shift + 7 > bits && part >> (bits - shift))
            return -1; /* past `bits`: refused once the varint ends, or longer than `max_bytes` */
        v |= part << shift;
        if (!(b & 0x80)) {
            *out = v;
            return 0;
        }
    }
    return -1;
}

/* compact.py's _zigzag(3) as an i16 (read_i16, a long-form field id): in range */
static int compact_i16(Skip *s, long long *out) {
    unsigned long long v;
    if (varint(s, 3, 32, &v) < 0)
        return -1;
    *out = (long long)(v >> 1) ^ -(long long)(v & 1);
    return *out < -32768 || *out > 32767 ? -1 : 0;
}

/* a count of elements of at least `unit` bytes each: not negative, all within the bytes that remain (`_length`) */
static int fits(Skip *s, long long n, int unit) {
    return n < 0 || n * unit > s->end - s->pos ? -1 : 0;
}

static int min_size(Skip *s, int w) {
    if (s->compact)
        return w == W_DOUBLE ? 8 : w == W_UUID ? 16 : 1;
    return w >= 0 && w <= W_UUID && BINARY_MIN[w] ? BINARY_MIN[w] : 1;
}

static inline int nested(int w) { return w == W_STRUCT || w == W_MAP || w == W_SET || w == W_LIST; }

/* a string (`read_span`): its length prefix and bytes stepped over; `*n`: its length (its bytes end at s->pos) */
static int string_span(Skip *s, long long *n) {
    if (s->compact) {
        unsigned long long v;
        if (varint(s, 5, 32, &v) < 0)
            return -1;
        *n = (long long)v;
    } else {
        if (s->end - s->pos < 4)
            return -1;
        *n = big_endian_signed(s->buf + s->pos, 4);
        s->pos += 4;
    }
    return fits(s, *n, 1) < 0 ? -1 : take(s, (Py_ssize_t)*n);
}

/* one scalar of wire type `w` (`skip_leaf` without its charge); `pending`: a compact bool field's value, which
   its header carried */
static int leaf(Skip *s, int w, int pending) {
    unsigned long long v;
    long long i;
    int b;
    switch (w) {
    case W_BOOL:
        if (pending)
            return 0;
        if (byte(s, &b) < 0)
            return -1;
        return b > (s->compact ? 2 : 1) ? -1 : 0;
    case W_BYTE:
        return take(s, 1);
    case W_I16:
        return s->compact ? compact_i16(s, &i) : take(s, 2);
    case W_I32:
        return s->compact ? varint(s, 5, 32, &v) : take(s, 4);
    case W_I64:
        return s->compact ? varint(s, 10, 64, &v) : take(s, 8);
    case W_DOUBLE:
        return take(s, 8);
    case W_UUID:
        return take(s, 16);
    case W_STRING:
        return string_span(s, &i);
    }
    return -1;
}

static int skip(Skip *s, int w, long long depth, int recursion);

/* where a TensorValue's data (id 70) and padding (id 65) strings sit (tables.py `_scan_tensor`), -1: absent */
typedef struct {
    long long prefix, start, length;
} Span;

/* the fields of a struct up to its stop byte; `spans` (a TensorValue of an archive's table, else NULL): its data
   and padding strings noted, not charged, and either one twice declined */
static int skip_fields(Skip *s, long long depth, int recursion, Span *spans) {
    long long last = 0; /* compact: the previous field id (deltas count from it) */
    for (;;) {
        int b, w, pending = 0;
        long long fid;
        if (byte(s, &b) < 0)
            return -1;
        if (b == 0)
            return 0;
        if (s->compact) {
            w = FROM_COMPACT[b & 0x0f];
            if (w == 0)
                return -1;
            fid = last + (b >> 4);
            if (!(b >> 4) && compact_i16(s, &fid) < 0)
                return -1;
            if (fid < -32768 || fid > 32767)
                return -1;
            last = fid;
            pending = w == W_BOOL;
        } else {
            w = b;
            if (w > W_UUID || !BINARY_MIN[w] || s->end - s->pos < 2)
                return -1;
            fid = big_endian_signed(s->buf + s->pos, 2);
            s->pos += 2;
        }
        if (spans != NULL && w == W_STRING && (fid == 70 || fid == 65)) {
            Span *at = &spans[fid == 70 ? 0 : 1];
            if (at->prefix >= 0)
                return -1;
            at->prefix = s->pos;
            if (string_span(s, &at->length) < 0)
                return -1;
            at->start = s->pos - at->length;
        } else if (nested(w) ? skip(s, w, depth, recursion + 1) < 0 : leaf(s, w, pending) < 0 || charge(s, 1) < 0) {
            return -1;
        }
    }
}

/* a list or set header: its element wire type and count */
static int list_header(Skip *s, int *et, long long *n) {
    if (s->compact) {
        int b;
        unsigned long long v;
        if (byte(s, &b) < 0)
            return -1;
        *et = FROM_COMPACT[b & 0x0f];
        *n = b >> 4;
        if (*n == 15) {
            if (varint(s, 5, 32, &v) < 0)
                return -1;
            *n = (long long)v;
        }
        if (*et == 0)
            return -1;
    } else {
        if (s->end - s->pos < 5)
            return -1;
        *et = s->buf[s->pos];
        *n = big_endian_signed(s->buf + s->pos + 1, 4);
        s->pos += 5;
        if (*et > W_UUID || !BINARY_MIN[*et])
            return -1;
    }
    return fits(s, *n, min_size(s, *et));
}

/* a map header: its key and value wire types and count (compact: an empty map is one 0 byte, no types) */
static int map_header(Skip *s, int *kt, int *vt, long long *n) {
    if (s->compact) {
        unsigned long long v;
        int kv;
        if (varint(s, 5, 32, &v) < 0)
            return -1;
        *n = (long long)v;
        if (*n == 0)
            return 0;
        if (byte(s, &kv) < 0)
            return -1;
        *kt = FROM_COMPACT[kv >> 4];
        *vt = FROM_COMPACT[kv & 0x0f];
        if (*kt == 0 || *vt == 0)
            return -1;
    } else {
        if (s->end - s->pos < 6)
            return -1;
        *kt = s->buf[s->pos];
        *vt = s->buf[s->pos + 1];
        *n = big_endian_signed(s->buf + s->pos + 2, 4);
        s->pos += 6;
        if (*n == 0)
            return 0; /* binary.py checks an empty map's types no more than it reads them */
        if (*kt > W_UUID || !BINARY_MIN[*kt] || *vt > W_UUID || !BINARY_MIN[*vt])
            return -1;
    }
    return fits(s, *n, min_size(s, *kt) + min_size(s, *vt));
}

/* one struct, map, list or set (`_Decoder.skip`): entered at `depth` (past `max_depth`: declined), charged one */
static int skip(Skip *s, int w, long long depth, int recursion) {
    if (recursion > MAX_RECURSION || depth + 1 > s->max_depth || charge(s, 1) < 0)
        return -1;
    depth++;
    long long n;
    if (w == W_STRUCT)
        return skip_fields(s, depth, recursion, NULL);
    if (w == W_MAP) {
        int kt = 0, vt = 0;
        if (map_header(s, &kt, &vt, &n) < 0)
            return -1;
        for (long long i = 0; i < n; i++) {
            if (nested(kt) ? skip(s, kt, depth, recursion + 1) < 0 : leaf(s, kt, 0) < 0)
                return -1; /* a leaf key is not charged */
            if (nested(vt) ? skip(s, vt, depth, recursion + 1) < 0 : leaf(s, vt, 0) < 0 || charge(s, 1) < 0)
                return -1;
        }
        return 0;
    }
    int et;
    if (list_header(s, &et, &n) < 0)
        return -1;
    if (!nested(et) && charge(s, n) < 0) /* every leaf charged before one is read */
        return -1;
    for (long long i = 0; i < n; i++)
        if (nested(et) ? skip(s, et, depth, recursion + 1) < 0 : leaf(s, et, 0) < 0)
            return -1;
    return 0;
}

/* thrift_skip(data, pos, compact, wire, depth, max_depth, budget) -> (end, values) or None (declined) */
PyObject *thrift_skip(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos;
    int compact, wire;
    long long depth, max_depth, budget;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*npiLLL", &view, &pos, &compact, &wire, &depth, &max_depth, &budget))
        return NULL;
    PyObject *out = NULL;
    if (pos < 0 || pos > view.len) {
        PyErr_SetString(PyExc_IndexError, "opwire C skip: position out of range");
    } else if (!nested(wire)) {
        PyErr_SetString(PyExc_ValueError, "opwire C skip: the wire type of a struct, map, list or set expected");
    } else {
        Skip s = {view.buf, pos, view.len, compact, 0, budget, max_depth};
        out = skip(&s, wire, depth, 0) < 0 ? Py_NewRef(Py_None) : Py_BuildValue("(nL)", s.pos, s.values);
    }
    PyBuffer_Release(&view);
    return out;
}

/* thrift_tensor(data, pos, compact, max_depth, budget) -> (end, values, data prefix, start, length, padding prefix,
   length) or None (declined): one TensorValue of an archive's table as tables.py `_scan_tensor` reads it, its
   fields entered at depth 1 (nested values at 2), the struct itself and its data and padding not charged */
PyObject *thrift_tensor(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos;
    int compact;
    long long max_depth, budget;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*npLL", &view, &pos, &compact, &max_depth, &budget))
        return NULL;
    PyObject *out = NULL;
    if (pos < 0 || pos > view.len) {
        PyErr_SetString(PyExc_IndexError, "opwire C skip: position out of range");
    } else {
        Skip s = {view.buf, pos, view.len, compact, 0, budget, max_depth};
        Span spans[2] = {{-1, 0, 0}, {-1, 0, 0}};
        if (skip_fields(&s, 2, 0, spans) < 0)
            out = Py_NewRef(Py_None);
        else
            out = Py_BuildValue("(nLLLLLL)", s.pos, s.values, spans[0].prefix, spans[0].start, spans[0].length,
                                spans[1].prefix, spans[1].length);
    }
    PyBuffer_Release(&view);
    return out;
}
