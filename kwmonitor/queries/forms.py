"""Forms of a saved keyword query, used by the admin and by the dashboard's query editor alike.

Validation is the models' (``KeywordQuery.clean``, ``Predicate.clean``,
``KeywordQuery.check_content``): a query saved from the dashboard passes
exactly the checks of one saved in the admin.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.forms.models import BaseInlineFormSet, inlineformset_factory

from .models import KeywordQuery, Predicate

__all__ = ["PredicateFormSet", "QueryForm", "PredicateForms", "predicate_forms"]


class PredicateFormSet(BaseInlineFormSet):
    """The query's predicates; a query without keywords (a filter subscription) needs one at least."""

    def clean(self) -> None:
        super().clean()
        if any(self.errors):
            return
        kept = sum(1 for form in self.forms if form.cleaned_data and not form.cleaned_data.get("DELETE"))
        try:
            self.instance.check_content(kept)
        except ValidationError as exc:
            raise ValidationError(exc.messages) from None


class QueryForm(forms.ModelForm):
    """A query of one of ``streams``; its schema is its stream's."""

    class Meta:
        model = KeywordQuery
        fields = ("name", "stream", "keywords", "tmax", "window_seconds", "enabled")
        widgets = {"keywords": forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false"})}

    def __init__(self, *args: Any, streams: QuerySet, **kwargs: Any):
        super().__init__(*args, **kwargs)
        stream = self.fields["stream"]
        stream.queryset = streams
        stream.required = True
        stream.empty_label = None
        stream.help_text = "The stream it runs on: its schema gives the relations and attributes of the predicates."
        self.fields["keywords"].help_text = ("Distinct single words (type one, then Enter). None: a filter subscription, "
                                             "whose results are the tuples its predicates admit.")
        self.fields["window_seconds"].label = "Window (seconds)"

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        if cleaned.get("stream") is not None:
            self.instance.schema = cleaned["stream"].schema
        return cleaned


PredicateForms = inlineformset_factory(
    KeywordQuery, Predicate, formset=PredicateFormSet, fields=("relation", "attribute", "op", "value"), extra=0,
    can_delete=True)


def predicate_forms(query: KeywordQuery, data: Any = None) -> PredicateFormSet:
    """The predicates of ``query`` as a formset (prefix ``predicates``)."""
    return PredicateForms(data, instance=query, prefix="predicates")
