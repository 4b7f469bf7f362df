# Static types for compiling delivery.py with Cython (pure-Python mode: delivery.py runs as it is without them).
cimport cython

from streaming.evaluate.results cimport Result
from streaming.window cimport LiveStore, LiveTuple

cdef class Delivery:
    cdef public LiveStore store
    cdef public object sink
    cdef public object schedule
    cdef public object member_mask
    cdef public list tmax_ok
    cdef public dict narrow
    cdef public dict receivers
    cdef public Py_ssize_t produced
    cdef public Py_ssize_t undelivered

    @cython.locals(rows=dict, row=LiveTuple, oldest=double)
    cpdef object receivers_of(self, Result result, double now)

    @cython.locals(rows=dict, oldest=double, ts=double, row=LiveTuple)
    cpdef double _oldest(self, Result result)

    cpdef add(self, Result result, double now)

    @cython.locals(oldest=double)
    cpdef _schedule(self, Result result, object mask)

    cpdef remove(self, Result result)

    cpdef expire_window(self, double window, Result result, double due)
