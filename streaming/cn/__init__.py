"""Candidate-network generation: InitNTGen (templates + NT2CN) and the InitCNGen baseline."""

from __future__ import annotations

from ..schema import Schema
from .baseline import init_cn_gen
from .model import CandidateNetwork, CNChild, CNNode
from .nt2cn import build_dag, dag_cns
from .templates import count_nts

__all__ = ["ALGORITHMS", "CandidateNetwork", "CNChild", "CNNode", "generate_cns", "count_nts"]

ALGORITHMS = ("nt", "initcngen")


def generate_cns(schema: Schema, m: int, tmax: int, algorithm: str = "nt") -> list[CandidateNetwork]:
    """All CNs of an ``m``-keyword query with at most ``tmax`` nodes, each rooted at its centre.

    ``algorithm`` is ``"nt"`` (InitNTGen, the default) or ``"initcngen"``
    (the baseline of Markowetz et al.); both give the same set.
    """
    if algorithm == "nt":
        return dag_cns(build_dag(schema, m, tmax))
    if algorithm == "initcngen":
        return init_cn_gen(schema, m, tmax)
    raise ValueError(f"unknown algorithm {algorithm!r} (one of {', '.join(ALGORITHMS)})")
