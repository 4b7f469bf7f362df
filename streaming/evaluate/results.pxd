# Static types for compiling results.py with Cython (pure-Python mode: results.py runs as it is without them).
cimport cython

cdef class Result:
    cdef readonly tuple tuples
    cdef readonly tuple edges
    cdef Py_hash_t _hash


@cython.locals(i=Py_ssize_t, result=Result)
cpdef Result make_result(list tuples, list edges)


cdef class SharedResults:
    cdef public dict of
    cdef public dict by_tuple

    @cython.locals(live=set, by_tuple=dict, bucket=dict)
    cpdef bint add(self, object kid, Result result)

    @cython.locals(gone=dict, by_tuple=dict, of=dict, out=list, bucket=dict, result=Result)
    cpdef list remove_containing(self, tuple ref)

    @cython.locals(by_tuple=dict, bucket=dict, result=Result)
    cpdef drop(self, object kid)
