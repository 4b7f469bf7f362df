"""Who may see what: a query or WXQuery subscription is visible to its owner
and to staff, who are also those who may edit or delete it; a user writes
queries on the streams open to user queries (staff on any); a stream is
visible to staff and to the owners of queries or subscriptions on it; a
schema to staff and to the owners of queries on it or on one of its streams. Raw dead-letter lines (whatever a
client sent) are for staff only; other viewers of a stream see their reasons,
and of its other events what concerns their own queries and subscriptions
(:mod:`.audience`). Used by pages and websockets alike."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Q, QuerySet

from kwmonitor.catalog.models import Schema
from kwmonitor.queries.models import AggregateSubscription, KeywordQuery, WXQuerySubscription
from kwmonitor.streams.models import Stream

__all__ = ["visible_queries", "queryable_streams", "visible_streams", "visible_schemas", "visible_aggregates", "visible_subscriptions",
           "may_view_query", "may_view_stream", "may_view_subscription", "may_see_dead_letter_lines"]

User = AbstractBaseUser | AnonymousUser


def visible_queries(user: User) -> QuerySet[KeywordQuery]:
    if not user.is_authenticated or not user.is_active:
        return KeywordQuery.objects.none()
    queries = KeywordQuery.objects.select_related("owner", "schema", "stream")
    return queries if user.is_staff else queries.filter(owner=user)


def queryable_streams(user: User) -> QuerySet[Stream]:
    """The streams ``user`` may write keyword queries on: staff any, others those open to user queries."""
    if not user.is_authenticated or not user.is_active:
        return Stream.objects.none()
    streams = Stream.objects.select_related("schema").order_by("name")
    return streams if user.is_staff else streams.filter(user_queries=True)


def visible_streams(user: User) -> QuerySet[Stream]:
    if not user.is_authenticated or not user.is_active:
        return Stream.objects.none()
    streams = Stream.objects.select_related("schema")
    if user.is_staff:
        return streams
    return streams.filter(Q(queries__owner=user) | Q(wxquery_subscriptions__owner=user)).distinct()


def visible_schemas(user: User) -> QuerySet[Schema]:
    if not user.is_authenticated or not user.is_active:
        return Schema.objects.none()
    if user.is_staff:
        return Schema.objects.all()
    return Schema.objects.filter(Q(queries__owner=user) | Q(streams__queries__owner=user)).distinct()


def visible_aggregates(user: User) -> QuerySet[AggregateSubscription]:
    """Aggregate subscriptions: staff see all; others their own and those over their queries' results."""
    if not user.is_authenticated or not user.is_active:
        return AggregateSubscription.objects.none()
    subscriptions = AggregateSubscription.objects.select_related("stream", "source_query")
    return subscriptions if user.is_staff else subscriptions.filter(Q(owner=user) | Q(source_query__owner=user))


def visible_subscriptions(user: User) -> QuerySet[WXQuerySubscription]:
    """WXQuery subscriptions: staff see all, others their own."""
    if not user.is_authenticated or not user.is_active:
        return WXQuerySubscription.objects.none()
    subscriptions = WXQuerySubscription.objects.select_related("owner", "stream")
    return subscriptions if user.is_staff else subscriptions.filter(owner=user)


def may_see_dead_letter_lines(user: User) -> bool:
    """Raw rejected lines may hold anything a client sent (other tenants' data, secrets): staff only."""
    return bool(user.is_authenticated and user.is_active and user.is_staff)


def may_view_query(user: User, query_id: int) -> bool:
    return visible_queries(user).filter(pk=query_id).exists()


def may_view_stream(user: User, stream_id: int) -> bool:
    return visible_streams(user).filter(pk=stream_id).exists()


def may_view_subscription(user: User, subscription_id: int) -> bool:
    return visible_subscriptions(user).filter(pk=subscription_id).exists()
