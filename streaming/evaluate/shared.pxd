# Static types for compiling shared.py with Cython (pure-Python mode: shared.py runs as it is without them).
cimport cython

from streaming.evaluate.shared_plan cimport SharedLatticePlan
from streaming.window cimport LiveStore, LiveTuple

cdef Py_ssize_t CHILD, HOLDS, FK, COLUMN
cdef Py_ssize_t UP_RELATION, UP_ROWS, UP_HOLDERS, UP_COLUMN, UP_READY
cdef Py_ssize_t PARENT, EDGE

cdef class SharedLatticeEvaluator:
    cdef public SharedLatticePlan plan
    cdef public LiveStore store
    cdef public list sub
    cdef public list index
    cdef public list missing
    cdef public dict member
    cdef public object results
    cdef list _added
    cdef list _ready
    cdef list _ups
    cdef dict _labels
    cdef dict _label_words
    cdef Py_ssize_t _labels_version
    cdef dict _out_probes
    cdef dict _in_probes

    @cython.locals(v=Py_ssize_t, empty=Py_ssize_t, kid=tuple, bound=dict, ups=list, plan=SharedLatticePlan)
    cdef _grow(self, list created)

    @cython.locals(ei=Py_ssize_t, c=Py_ssize_t, by_label=dict, edges=dict, plan=SharedLatticePlan)
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

    @cython.locals(sub=list, index=list, kids=tuple, kid=tuple, ei=Py_ssize_t)
    cdef bint _supported(self, Py_ssize_t v, object key, LiveTuple row, Py_ssize_t known)

    @cython.locals(labels=tuple, leaves=tuple, inner=tuple, added=list, sub=list, full=list, v=Py_ssize_t,
                   found=dict, plan=SharedLatticePlan)
    cpdef list insert(self, str relation, object key, LiveTuple row)

    @cython.locals(ready=list, found=dict, values=dict, nodes=set, by_label=dict, v=Py_ssize_t, edge=tuple,
                   c=Py_ssize_t, members=dict, keys=set, probes=tuple, probe=tuple)
    cdef dict _candidates(self, str relation, object key, LiveTuple row, tuple inner)

    @cython.locals(kid=Py_ssize_t, sub=list, targets=dict, v=Py_ssize_t, edge=tuple, prows=dict, ready=dict,
                   prow=LiveTuple, up=tuple, holders=dict, ups=tuple, snapshot=tuple, plan=SharedLatticePlan)
    cdef _climb(self, Py_ssize_t c, object key, LiveTuple row, list path)

    @cython.locals(added=list)
    cdef _eval_path(self, Py_ssize_t root, object key, LiveTuple row, list path, Py_ssize_t kid)

    @cython.locals(sub=list, index=list, rows=dict, partial=list, below=list, c=Py_ssize_t, ei=Py_ssize_t,
                   fixed_edge=Py_ssize_t, child_at=Py_ssize_t, crows=dict, parent_holds=bint, plan=SharedLatticePlan)
    cdef list _expand(self, Py_ssize_t v, object key, LiveTuple row, list path, Py_ssize_t at, object bits)

    @cython.locals(nodes=set, sub=list, v=Py_ssize_t)
    cpdef list delete(self, str relation, object key, LiveTuple row)

    @cython.locals(sub=list, v=Py_ssize_t, edge=tuple, prows=dict, ready=dict, prow=LiveTuple, plan=SharedLatticePlan,
                   up=tuple, holders=dict, relation=str, ups=tuple)
    cdef _drop(self, Py_ssize_t c, object key, LiveTuple row)
