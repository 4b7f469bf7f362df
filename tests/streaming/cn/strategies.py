"""Hypothesis strategies: small random schemas with parallel foreign keys and self-references."""

from __future__ import annotations

from hypothesis import strategies as st

from streaming.schema import Schema


@st.composite
def schemas(draw, max_relations: int = 3, max_fks: int = 4) -> Schema:
    """A schema of 1..max_relations relations and 0..max_fks foreign keys (holder, target drawn freely)."""
    n = draw(st.integers(1, max_relations))
    names = [f"R{i}" for i in range(n)]
    pairs = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=max_fks))
    fks: dict[int, list[dict]] = {i: [] for i in range(n)}
    for holder, target in pairs:
        k = len(fks[holder])
        fks[holder].append({"name": f"f{k}", "column": f"f{k}", "references": names[target]})
    relations = []
    for i, name in enumerate(names):
        attrs = {"id": "int", "txt": "text"}
        attrs.update({fk["column"]: "int" for fk in fks[i]})
        doc = {"name": name, "key": "id", "attributes": attrs}
        if fks[i]:
            doc["foreign_keys"] = fks[i]
        relations.append(doc)
    return Schema.from_dict({"name": "random", "relations": relations})
