# Static types for compiling results.py with Cython (pure-Python mode: results.py runs as it is without them).
cimport cython

cdef class Result:
    cdef readonly tuple tuples
    cdef readonly tuple edges
    cdef Py_hash_t _hash


@cython.locals(i=Py_ssize_t, result=Result)
cpdef Result make_result(list tuples, list edges)
