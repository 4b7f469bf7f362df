# Static types for compiling subrelations.py with Cython (pure-Python mode: subrelations.py runs as it is without them).
cimport cython

from streaming.evaluate.shared_plan cimport SharedLatticePlan
from streaming.window cimport LiveStore, LiveTuple

cdef Py_ssize_t CHILD, HOLDS, FK, COLUMN

cdef class SubRelations:
    cdef public SharedLatticePlan plan
    cdef public LiveStore store
    cdef public list sub
    cdef public list index
    cdef public list missing
    cdef public dict member
    cdef list _ready
    cdef list _ups
    cdef dict _labels
    cdef dict _label_words
    cdef Py_ssize_t _labels_version

    @cython.locals(v=Py_ssize_t, empty=Py_ssize_t, kid=tuple, bound=dict, ups=list, plan=SharedLatticePlan)
    cdef _grow(self, list created)

    @cython.locals(ei=Py_ssize_t, c=Py_ssize_t, by_label=dict, bundles=tuple, i=Py_ssize_t, same=tuple,
                   stride=Py_ssize_t, at=Py_ssize_t, plan=SharedLatticePlan, kids=tuple, sub=list, index=list,
                   made=list)
    cdef _set_ready(self, Py_ssize_t v, bint ready)

    @cython.locals(info=tuple, present=dict, labels=list, candidates=object, sub=object, words=object,
                   plan=SharedLatticePlan)
    cdef tuple _info(self, str relation, object mask)

    cdef tuple _labels_of(self, str relation, LiveTuple row)

    @cython.locals(sub=set, missing=list, by_label=dict, parents=list, p=Py_ssize_t, members=dict, nodes=set,
                   index=dict, columns=dict, values=dict, bucket=set, plan=SharedLatticePlan)
    cdef _enter(self, Py_ssize_t v, object key, LiveTuple row)

    @cython.locals(sub=set, missing=list, by_label=dict, parents=list, p=Py_ssize_t, members=dict, nodes=set,
                   index=dict, columns=dict, values=dict, bucket=set, plan=SharedLatticePlan)
    cdef _leave(self, Py_ssize_t v, object key, LiveTuple row)

    @cython.locals(sub=list, index=list, kid=tuple)
    cdef bint _supported(self, Py_ssize_t v, object key, LiveTuple row)
