# Static types for compiling shared.py with Cython (pure-Python mode: shared.py runs as it is without them).
cimport cython

from streaming.evaluate.results cimport SharedResults, make_result
from streaming.evaluate.shared_plan cimport SharedLatticePlan
from streaming.evaluate.subrelations cimport SubRelations
from streaming.window cimport LiveTuple

cdef Py_ssize_t UP_RELATION, UP_ROWS, UP_HOLDERS, UP_COLUMN, UP_READY, UP_FK, CHECKS
cdef Py_ssize_t PARENT, EDGE

cdef class SharedLatticeEvaluator(SubRelations):
    cdef public SharedResults results
    cdef list _added
    cdef dict _out_probes
    cdef dict _in_probes

    @cython.locals(labels=tuple, leaves=tuple, inner=tuple, added=list, sub=list, v=Py_ssize_t,
                   plan=SharedLatticePlan)
    cpdef list insert(self, str relation, object key, LiveTuple row)

    @cython.locals(ready=list, found=dict, values=dict, nodes=set, by_label=dict, edges=tuple,
                   c=Py_ssize_t, members=dict, keys=set, probes=tuple, probe=tuple)
    cdef dict _candidates(self, str relation, object key, LiveTuple row, tuple inner)

    @cython.locals(kid=Py_ssize_t, sub=list, v=Py_ssize_t, edges=tuple, stride=Py_ssize_t, at=Py_ssize_t,
                   end=Py_ssize_t, held=bint, prows=dict, ready=dict, prow=LiveTuple, up=tuple, holders=dict,
                   ups=tuple, plan=SharedLatticePlan)
    cdef _climb(self, Py_ssize_t c, object key, LiveTuple row, list path)

    @cython.locals(added=list, results=SharedResults)
    cdef _eval_path(self, Py_ssize_t root, object key, LiveTuple row, list path, Py_ssize_t kid)

    @cython.locals(sub=list, index=list, rows=dict, partial=list, below=list, c=Py_ssize_t, ei=Py_ssize_t,
                   fixed_edge=Py_ssize_t, child_at=Py_ssize_t, crows=dict, parent_holds=bint, plan=SharedLatticePlan,
                   pair=tuple, t1=list, e1=list, t2=list, e2=list)
    cdef list _expand(self, Py_ssize_t v, object key, LiveTuple row, list path, Py_ssize_t at, object bits)

    @cython.locals(nodes=set, sub=list, v=Py_ssize_t)
    cpdef list delete(self, str relation, object key, LiveTuple row)

    @cython.locals(member=dict, members=dict, nodes=set, prel=str, parent=object, edges=tuple, stride=Py_ssize_t,
                   at=Py_ssize_t, end=Py_ssize_t, prows=dict, ready=dict, prow=LiveTuple, up=tuple, holders=dict,
                   ups=tuple)
    cdef _drop(self, Py_ssize_t c, object key, LiveTuple row)


cdef bint _joins(tuple edges, Py_ssize_t at, Py_ssize_t end, object key, dict values)


@cython.locals(stride=Py_ssize_t, end=Py_ssize_t, at=Py_ssize_t, v=object)
cdef _supported_parents(tuple edges, object key, dict values, dict found)
