"""Signal handlers: a stream has a row for each process it wants (its primary
evaluator, its secondary ones, its pre-processor, the capture of its PostgreSQL source); any change to what a
stream's evaluators must compute publishes new plans after commit; an edited
query (or its predicates) is announced to its dashboard after commit."""

from __future__ import annotations

from django.db.models.signals import post_delete, post_save, pre_save
from django.dispatch import receiver

from kwmonitor.catalog.models import Attribute, ForeignKey, Relation, Schema
from kwmonitor.queries.models import AggregateSubscription, KeywordQuery, Predicate, WXQuerySubscription

from .models import Evaluator, Stream
from .plans import publish_plan_on_commit
from .sender import send_query_update


@receiver(post_save, sender=Stream)
def stream_saved(sender, instance: Stream, created: bool, **kwargs) -> None:
    if kwargs.get("raw"):
        return
    Evaluator.objects.get_or_create(stream=instance, role="primary", slot=0)
    for slot in range(1, instance.evaluator_processes):
        Evaluator.objects.get_or_create(stream=instance, role="secondary", slot=slot)
    if instance.preprocess:
        Evaluator.objects.get_or_create(stream=instance, role="preprocessor", slot=0)
    if instance.is_captured:
        Evaluator.objects.get_or_create(stream=instance, role="capture", slot=0)
    publish_plan_on_commit(instance.pk)


@receiver(pre_save, sender=KeywordQuery)
def query_moving(sender, instance: KeywordQuery, **kwargs) -> None:
    """Remember the stream a query leaves, so that stream's plan drops it."""
    instance._previous_stream_id = (
        KeywordQuery.objects.filter(pk=instance.pk).values_list("stream_id", flat=True).first() if instance.pk else None
    )


def _publish_plans_of_move(instance: KeywordQuery | WXQuerySubscription) -> None:
    """Publish the plan of the saved object's stream and, if it moved, of the stream it left."""
    previous = getattr(instance, "_previous_stream_id", None)
    if previous != instance.stream_id:
        publish_plan_on_commit(previous)
    publish_plan_on_commit(instance.stream_id)


@receiver(post_save, sender=KeywordQuery)
def query_saved(sender, instance: KeywordQuery, **kwargs) -> None:
    if kwargs.get("raw"):
        return
    _publish_plans_of_move(instance)
    send_query_update(instance.pk, created=kwargs.get("created", False))


@receiver(post_delete, sender=KeywordQuery)
def query_deleted(sender, instance: KeywordQuery, **kwargs) -> None:
    publish_plan_on_commit(instance.stream_id)


@receiver([post_save, post_delete], sender=Predicate)
def predicate_changed(sender, instance: Predicate, **kwargs) -> None:
    if kwargs.get("raw"):
        return
    stream_id = KeywordQuery.objects.filter(pk=instance.query_id).values_list("stream_id", flat=True).first()
    publish_plan_on_commit(stream_id)
    send_query_update(instance.query_id)


@receiver([post_save, post_delete], sender=AggregateSubscription)
def aggregate_changed(sender, instance: AggregateSubscription, **kwargs) -> None:
    if not kwargs.get("raw"):
        publish_plan_on_commit(instance.stream_id)


@receiver(pre_save, sender=WXQuerySubscription)
def subscription_moving(sender, instance: WXQuerySubscription, **kwargs) -> None:
    """Remember the stream a subscription leaves, so that stream's plan drops it."""
    instance._previous_stream_id = (
        WXQuerySubscription.objects.filter(pk=instance.pk).values_list("stream_id", flat=True).first()
        if instance.pk else None)


@receiver([post_save, post_delete], sender=WXQuerySubscription)
def subscription_changed(sender, instance: WXQuerySubscription, **kwargs) -> None:
    if not kwargs.get("raw"):
        _publish_plans_of_move(instance)


def _schema_changed(schema_id: int | None) -> None:
    for stream_id in Stream.objects.filter(schema_id=schema_id).values_list("pk", flat=True):
        publish_plan_on_commit(stream_id)


@receiver([post_save, post_delete], sender=Relation)
def relation_changed(sender, instance: Relation, **kwargs) -> None:
    if not kwargs.get("raw"):
        _schema_changed(instance.schema_id)


@receiver([post_save, post_delete], sender=Attribute)
@receiver([post_save, post_delete], sender=ForeignKey)
def column_changed(sender, instance, **kwargs) -> None:
    if kwargs.get("raw"):
        return
    schema_id = Relation.objects.filter(pk=instance.relation_id).values_list("schema_id", flat=True).first()
    _schema_changed(schema_id)


@receiver(post_save, sender=Schema)
def schema_saved(sender, instance: Schema, **kwargs) -> None:
    if not kwargs.get("raw"):
        _schema_changed(instance.pk)
