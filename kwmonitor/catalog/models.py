"""Schemas: relations, attributes and foreign keys, mirroring the schema JSON of docs/schema.md.

The JSON document is the contract (``streaming.schema`` validates it); these
rows are its editable form. :meth:`Schema.to_document` and
:meth:`Schema.import_document` convert between the two.
"""

from __future__ import annotations

from typing import Any

from django.db import models, transaction

from streaming.schema import TYPES
from streaming.schema import Schema as SchemaGraph
from streaming.schema import SchemaError

__all__ = ["Schema", "Relation", "Attribute", "ForeignKey"]


class Schema(models.Model):
    name = models.CharField(max_length=100, unique=True)
    description = models.TextField(blank=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def to_document(self) -> dict[str, Any]:
        """The schema JSON document (the rows as they are; see :meth:`graph` to validate)."""
        relations = []
        for rel in self.relations.order_by("position", "id").prefetch_related("attributes", "foreign_keys__references"):
            doc: dict[str, Any] = {
                "name": rel.name,
                "key": rel.key,
                "attributes": {a.name: a.type for a in sorted(rel.attributes.all(), key=lambda a: (a.position, a.id))},
            }
            fks = sorted(rel.foreign_keys.all(), key=lambda f: (f.position, f.id))
            if fks:
                doc["foreign_keys"] = [{"name": f.name, "column": f.column, "references": f.references.name} for f in fks]
            relations.append(doc)
        return {"name": self.name, "relations": relations}

    def graph(self) -> SchemaGraph:
        """The validated schema graph; raises :class:`SchemaError` if the rows do not form one."""
        return SchemaGraph.from_dict(self.to_document())

    @classmethod
    def import_document(cls, doc: Any, description: str = "", replace: bool = False) -> "Schema":
        """Create (or, with ``replace``, overwrite) a schema from its JSON document.

        The document is validated by ``streaming.schema`` first; nothing is
        written if it is invalid (:class:`SchemaError` names the bad place).
        """
        graph = SchemaGraph.from_dict(doc)
        with transaction.atomic():
            schema = cls.objects.select_for_update().filter(name=graph.name).first()
            if schema is not None and not replace:
                raise SchemaError(f"schema {graph.name!r} already exists (import with replace to overwrite it)")
            if schema is None:
                schema = cls.objects.create(name=graph.name, description=description)
            else:
                if description:
                    schema.description = description
                    schema.save(update_fields=["description", "updated"])
                schema.relations.all().delete()
            rows: dict[str, Relation] = {}
            for position, rel in enumerate(graph.relations.values()):
                rows[rel.name] = Relation.objects.create(schema=schema, name=rel.name, key=rel.key, position=position)
                Attribute.objects.bulk_create(
                    Attribute(relation=rows[rel.name], name=attr, type=typ, position=i)
                    for i, (attr, typ) in enumerate(rel.attributes.items())
                )
            for rel in graph.relations.values():
                ForeignKey.objects.bulk_create(
                    ForeignKey(relation=rows[rel.name], name=fk.name, column=fk.column, references=rows[fk.target], position=i)
                    for i, fk in enumerate(rel.foreign_keys)
                )
        return schema


class Relation(models.Model):
    schema = models.ForeignKey(Schema, on_delete=models.CASCADE, related_name="relations")
    name = models.CharField(max_length=100)
    key = models.CharField(max_length=100, help_text="Name of the key attribute (single column).")
    position = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["schema", "position", "id"]
        constraints = [models.UniqueConstraint(fields=["schema", "name"], name="catalog_relation_unique_name")]

    def __str__(self) -> str:
        return f"{self.schema.name}.{self.name}"


class Attribute(models.Model):
    relation = models.ForeignKey(Relation, on_delete=models.CASCADE, related_name="attributes")
    name = models.CharField(max_length=100)
    type = models.CharField(max_length=16, choices=[(t, t) for t in TYPES])
    position = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["relation", "position", "id"]
        constraints = [models.UniqueConstraint(fields=["relation", "name"], name="catalog_attribute_unique_name")]

    def __str__(self) -> str:
        return f"{self.relation.name}.{self.name}: {self.type}"


class ForeignKey(models.Model):
    relation = models.ForeignKey(Relation, on_delete=models.CASCADE, related_name="foreign_keys")
    name = models.CharField(max_length=100)
    column = models.CharField(max_length=100)
    references = models.ForeignKey(Relation, on_delete=models.CASCADE, related_name="referenced_by")
    position = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["relation", "position", "id"]
        constraints = [models.UniqueConstraint(fields=["relation", "name"], name="catalog_foreignkey_unique_name")]

    def __str__(self) -> str:
        return f"{self.relation.name}.{self.name} ({self.column}) -> {self.references.name}"
