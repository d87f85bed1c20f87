/* A Thrift decode's cache of the strings it built, so that a string met again is the same object.
 *
 * A program repeats its strings: tensor names (each output is named again by the nodes that read it), targets,
 * metadata keys and values (the same stack trace and module path on every node of a layer). In the benchmark's
 * largest program, 55k strings have 11k distinct values. Each repeat built anew costs an allocation, a UTF-8
 * decode and later a free; a hit here costs a hash of its bytes and a compare. Strings are immutable and hold no
 * reference, so sharing one object between models changes nothing a model can observe but identity.
 *
 * The cache is a direct-mapped table of strong references, keyed by the bytes: a slot holds the last ASCII string
 * whose bytes hash there (only ASCII, whose bytes are its UTF-8, so a hit is a memcmp). It lives for one decode.
 */
#ifndef OPWIRE_THRIFT_STRINGS_H
#define OPWIRE_THRIFT_STRINGS_H

#include "cbuild.h"
#include <stdint.h>
#include <string.h>

#define STR_CACHED_MAX 256   /* longer strings are built each time (rarely repeated, costly to hash) */
#define STR_CACHE_MIN_INPUT 2048 /* smaller inputs hold too few strings to pay for the table */
#define STR_CACHE_MAX_SLOTS 4096

typedef struct {
    PyObject **slots; /* NULL: no cache */
    size_t mask;
} StrCache;

/* a table sized for an input of `n` bytes (about one slot per 256 bytes, within 256..4096), or none for a small
   input; no cache either when the table cannot be allocated (only slower) */
static inline void str_cache_init(StrCache *c, Py_ssize_t n) {
    c->slots = NULL;
    c->mask = 0;
    if (n < STR_CACHE_MIN_INPUT)
        return;
    size_t size = 256;
    while (size < STR_CACHE_MAX_SLOTS && size * 256 < (size_t)n)
        size *= 2;
    c->slots = PyMem_Calloc(size, sizeof(PyObject *));
    c->mask = c->slots ? size - 1 : 0;
}

static inline void str_cache_free(StrCache *c) {
    if (c->slots == NULL)
        return;
    for (size_t i = 0; i <= c->mask; i++)
        Py_XDECREF(c->slots[i]);
    PyMem_Free(c->slots);
    c->slots = NULL;
}

static inline uint64_t str_hash(const unsigned char *at, Py_ssize_t n) {
    uint64_t h = (uint64_t)n * 0x9E3779B97F4A7C15ULL, w;
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8) {
        memcpy(&w, at + i, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDULL;
        h ^= h >> 32;
    }
    w = 0;
    memcpy(&w, at + i, (size_t)(n - i));
    h = (h ^ w) * 0xC4CEB9FE1A85EC53ULL;
    h ^= h >> 33; /* murmur3's finalizer: every input bit reaches the low bits the table uses ("x_1", "x_2") */
    h *= 0xFF51AFD7ED558CCDULL;
    h ^= h >> 33;
    h *= 0xC4CEB9FE1A85EC53ULL;
    return h ^ (h >> 33);
}

/* the str of the `n` UTF-8 bytes at `at` (a new reference), from the cache when it holds them; NULL with
   Fallback for bytes that are not UTF-8 */
static inline PyObject *cached_str(StrCache *c, const unsigned char *at, Py_ssize_t n) {
    PyObject **slot = NULL;
    if (c->slots != NULL && n <= STR_CACHED_MAX) {
        slot = &c->slots[str_hash(at, n) & c->mask];
        PyObject *s = *slot;
        if (s != NULL && PyUnicode_GET_LENGTH(s) == n && memcmp(PyUnicode_1BYTE_DATA(s), at, (size_t)n) == 0) {
            Py_INCREF(s);
            return s;
        }
    }
    PyObject *s = PyUnicode_DecodeUTF8((const char *)at, n, NULL);
    if (s == NULL)
        return cb_fallback();
    if (slot != NULL && PyUnicode_IS_ASCII(s)) {
        Py_INCREF(s);
        Py_XSETREF(*slot, s);
    }
    return s;
}

#endif
