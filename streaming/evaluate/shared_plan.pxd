# Static types for compiling shared_plan.py with Cython (pure-Python mode: shared_plan.py runs as it is without them).

cimport cython

cdef class SharedLatticePlan:
    cdef public object schema
    cdef public list ids
    cdef public list rel
    cdef public list mask
    cdef public list size
    cdef public list kids
    cdef public list up_joins
    cdef public list refs
    cdef public list root_of
    cdef public list alive
    cdef public list forbids
    cdef list _forbid_counts
    cdef list _key_of
    cdef dict _by_key
    cdef public dict leaves
    cdef public dict labels
    cdef public dict inner
    cdef public dict roots
    cdef public dict keyword_bits
    cdef public Py_ssize_t live_nodes
    cdef public Py_ssize_t version
    cdef dict _reached
    cdef public dict fk_column_of
    cdef public dict out_fks
    cdef public dict in_fks

    @cython.locals(forbid=object)
    cpdef bint eligible(self, Py_ssize_t v, object mask)

    @cython.locals(v=object, c=Py_ssize_t, ei=Py_ssize_t, kids=list, groups=dict, group=tuple, parents=list,
                   parents_by_label=dict, by_label=dict)
    cdef object _create(self, tuple key, Py_ssize_t size)
