# Static types for compiling window.py with Cython (pure-Python mode: window.py runs as it is without them).

cdef class LiveTuple:
    cdef public dict values
    cdef public object mask
    cdef public double ts
    cdef public long long serial
    cdef public object qmask
    cdef public object classes
    cdef public tuple labels
    cdef public Py_ssize_t labels_version


cdef class LiveStore:
    cdef public object schema
    cdef public dict rows
    cdef public dict fk_columns
    cdef public dict referencing
    cdef dict _indexes
    cdef long long _serial

    cpdef LiveTuple get(self, str relation, object key)
    cpdef LiveTuple add(self, str relation, object key, dict values, object mask, double ts, object qmask=*)
    cpdef LiveTuple remove(self, str relation, object key)


cdef class SlidingWindow:
    cdef public object seconds
    cdef object _queue

    cpdef push(self, str relation, object key, LiveTuple row)
    cpdef bint expires_by(self, LiveTuple row, double now)
    cpdef bint pending(self, double now)
