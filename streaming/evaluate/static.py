"""CNEvalStatic (paper Alg. 4): evaluate a whole window of tuples at once.

Used when a query starts on a stream that already has tuples in its window
(``static-dynamic``). The filter phase fills every node's sub-relation bottom
up: leaves take the live tuples of their label, an inner node the tuples
that join its smallest child's already-filtered sub-relation (a semijoin)
and at least one tuple of every other child; the join phase then
expands every root tuple top-down (Eval). It leaves the
:class:`~streaming.evaluate.dynamic.DynamicEvaluator` in exactly the state
op-by-op evaluation would have reached, so dynamic evaluation continues from it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .results import Result, make_result

if TYPE_CHECKING:  # the evaluator's bulk_load() calls this module
    from .dynamic import DynamicEvaluator

__all__ = ["evaluate_static"]


def evaluate_static(evaluator: DynamicEvaluator) -> list[Result]:
    """Fill an empty evaluator from the tuples of its store; return the results found."""
    if any(evaluator.sub) or len(evaluator.results):
        raise RuntimeError("static evaluation needs an evaluator that has seen no tuple")
    plan, store, kb, admits = evaluator.plan, evaluator.store, evaluator.kb, evaluator.admits
    by_label: dict[tuple[str, int], list[tuple[Any, Any]]] = {}
    for relation, rows in store.rows.items():
        for key, row in rows.items():
            mask = row.mask & kb
            if mask and (admits is None or admits(relation, row)):
                by_label.setdefault((relation, mask), []).append((key, row))
    rows_of, referencing, sub = store.rows, store.referencing, evaluator.sub
    for v in plan.order:
        if evaluator.missing[v]:
            continue
        relation, mask = plan.rel[v], plan.mask[v]
        rows = rows_of[relation]
        if not plan.kids[v]:
            for key, row in by_label.get((relation, mask), ()):
                evaluator.enter(v, key, row)
            continue
        # semijoin from the smallest child: only tuples joining it can qualify
        c, parent_holds, fk, column = min(plan.kids[v], key=lambda kid: len(sub[kid[0]]))
        if parent_holds:
            index = referencing[(relation, fk)]
            candidates = {key for ck in sub[c] for key in index.get(ck, ())}
        else:
            crows = rows_of[plan.rel[c]]
            candidates = {crows[ck].values[column] for ck in sub[c]}
        for key in candidates:
            row = rows.get(key)
            if (row is not None and row.mask & kb == mask and (admits is None or admits(relation, row))
                    and evaluator.supports(v, key, row)):
                evaluator.enter(v, key, row)
    found: list[Result] = []
    rows = store.rows
    for root in plan.roots:
        relation = plan.rel[root]
        for key in evaluator.sub[root]:
            for tuples, edges in evaluator.expand_root(root, key, rows[relation][key]):
                result = make_result(tuples, edges)
                if result is not None and evaluator.results.add(result):
                    found.append(result)
    return found
