# Static types for compiling results.py with Cython (pure-Python mode: results.py runs as it is without them).

cdef class Result:
    cdef readonly tuple tuples
    cdef readonly tuple edges
    cdef Py_hash_t _hash
