"""Operator API for warm pools (staff only, docs/pools.md).

    GET/POST          /api/v1/admin/pools/
    GET/PATCH/DELETE  /api/v1/admin/pools/{name}/

A pool's answer carries its workers (state, run, image, uptime, utilisation) and its last
scaling decisions with their reasons. DELETE of a pool with live workers drains it (202).
"""

from __future__ import annotations

from django.db.models import Prefetch
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from administration.pools import LIMITS, pool_create, pool_delete, pool_update
from core.exceptions import NotFound
from orchestration.planning.placement import POLICIES
from pools.choices import LIVE_WORKER_STATES
from pools.models import Pool, PoolDecision, PoolWorker
from studies.choices import STARTED_STATES
from studies.models import Run
from tenancy.permissions import IsStaff

DECISIONS_SHOWN = 20
ENDED_WORKERS_SHOWN = 10


class PoolWorkerSerializer(serializers.ModelSerializer):
    runs = serializers.SerializerMethodField(help_text="ids of the runs it holds")
    uptime_s = serializers.SerializerMethodField()
    utilisation = serializers.SerializerMethodField(help_text="time holding runs ÷ uptime, 0–1")
    cache = serializers.ListField(
        child=serializers.CharField(),
        read_only=True,
        help_text="image and layer digests its local cache holds, as its pilot reports them",
    )

    class Meta:
        model = PoolWorker
        fields = [
            "id",
            "state",
            "server_id",
            "server_name",
            "image_ref",
            "cores",
            "created_at",
            "registered_at",
            "heartbeat_at",
            "idle_since",
            "ended_at",
            "end_reason",
            "runs_done",
            "runs",
            "cache",
            "uptime_s",
            "utilisation",
        ]

    def get_runs(self, obj) -> list[str]:
        held = self.context.get("held", {})
        return held.get(obj.handle, [])

    def get_uptime_s(self, obj) -> float:
        end = obj.ended_at or timezone.now()
        return round(max(0.0, (end - obj.created_at).total_seconds()), 1)

    def get_utilisation(self, obj) -> float:
        up = self.get_uptime_s(obj)
        return round(min(1.0, obj.busy_seconds / up), 3) if up > 0 else 0.0


class PoolDecisionSerializer(serializers.ModelSerializer):
    class Meta:
        model = PoolDecision
        fields = ["at", "action", "count", "queue", "size", "reason"]


class PoolOutSerializer(serializers.ModelSerializer):
    backend = serializers.CharField(source="backend.name")
    image = serializers.CharField(source="image.digest")
    workers = serializers.SerializerMethodField()
    decisions = serializers.SerializerMethodField()

    class Meta:
        model = Pool
        fields = [
            "name",
            "backend",
            "flavor",
            "image",
            "nodes",
            "cores",
            "memory_gb",
            "min_workers",
            "max_workers",
            "idle_timeout",
            "boot_timeout",
            "enabled",
            "placement",
            "draining",
            "boot_failures",
            "next_boot_at",
            "workers",
            "decisions",
            "created_at",
            "updated_at",
        ]

    def get_workers(self, obj) -> PoolWorkerSerializer(many=True):  # type: ignore[valid-type]
        workers = [w for w in obj.workers.all() if w.state in LIVE_WORKER_STATES]
        ended = [w for w in obj.workers.all() if w.state not in LIVE_WORKER_STATES]
        ended = sorted(ended, key=lambda w: w.ended_at or w.created_at, reverse=True)
        shown = workers + ended[:ENDED_WORKERS_SHOWN]
        return PoolWorkerSerializer(shown, many=True, context=self.context).data

    def get_decisions(self, obj) -> PoolDecisionSerializer(many=True):  # type: ignore[valid-type]
        return PoolDecisionSerializer(obj.decisions.all()[:DECISIONS_SHOWN], many=True).data


class PoolPatchSerializer(serializers.Serializer):
    """What an admin may change on a pool."""

    min_workers = serializers.IntegerField(
        required=False, min_value=LIMITS["min_workers"][0], max_value=LIMITS["min_workers"][1]
    )
    max_workers = serializers.IntegerField(
        required=False, min_value=LIMITS["max_workers"][0], max_value=LIMITS["max_workers"][1]
    )
    idle_timeout = serializers.FloatField(
        required=False, min_value=LIMITS["idle_timeout"][0], max_value=LIMITS["idle_timeout"][1]
    )
    boot_timeout = serializers.FloatField(
        required=False, min_value=LIMITS["boot_timeout"][0], max_value=LIMITS["boot_timeout"][1]
    )
    enabled = serializers.BooleanField(required=False)
    placement = serializers.CharField(
        required=False,
        max_length=64,
        help_text=f"which worker gets which run: {', '.join(POLICIES)} (docs/pools.md)",
    )


class PoolInSerializer(PoolPatchSerializer):
    """A new pool: what it is (name, backend, flavor, image) and what can be edited later."""

    name = serializers.SlugField(max_length=64)
    backend = serializers.CharField(max_length=64)
    flavor = serializers.CharField(max_length=200)
    image = serializers.CharField(max_length=80, help_text="a composed VM image's id or digest")
    nodes = serializers.IntegerField(required=False, min_value=1, max_value=1)


def _pools():
    return Pool.objects.select_related("backend", "image").prefetch_related(
        "workers", Prefetch("decisions", queryset=PoolDecision.objects.order_by("-at", "-id"))
    )


def _held() -> dict[str, list[str]]:
    held: dict[str, list[str]] = {}
    for pk, handle in Run.objects.filter(
        state__in=STARTED_STATES, handle__startswith="worker:"
    ).values_list("id", "handle"):
        held.setdefault(handle, []).append(str(pk))
    return held


def _get(name: str) -> Pool:
    pool = _pools().filter(name=name).first()
    if pool is None:
        raise NotFound(f"No pool named {name!r}.")
    return pool


class AdminPoolListView(APIView):
    permission_classes = [IsStaff]

    @extend_schema(responses=PoolOutSerializer(many=True))
    def get(self, request):
        return Response(
            PoolOutSerializer(_pools().order_by("name"), many=True, context={"held": _held()}).data
        )

    @extend_schema(request=PoolInSerializer, responses={201: PoolOutSerializer})
    def post(self, request):
        data = PoolInSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        pool = pool_create(data=dict(data.validated_data))
        return Response(
            PoolOutSerializer(_get(pool.name), context={"held": {}}).data,
            status=status.HTTP_201_CREATED,
        )


class AdminPoolDetailView(APIView):
    permission_classes = [IsStaff]

    @extend_schema(responses=PoolOutSerializer)
    def get(self, request, name: str):
        return Response(PoolOutSerializer(_get(name), context={"held": _held()}).data)

    @extend_schema(request=PoolPatchSerializer, responses=PoolOutSerializer)
    def patch(self, request, name: str):
        data = PoolPatchSerializer(data=request.data, partial=True)
        data.is_valid(raise_exception=True)
        pool = pool_update(pool=_get(name), data=dict(data.validated_data))
        return Response(PoolOutSerializer(_get(pool.name), context={"held": _held()}).data)

    @extend_schema(responses={204: None, 202: PoolOutSerializer})
    def delete(self, request, name: str):
        pool = _get(name)
        if pool_delete(pool=pool):
            return Response(status=status.HTTP_204_NO_CONTENT)
        return Response(
            PoolOutSerializer(_get(name), context={"held": _held()}).data,
            status=status.HTTP_202_ACCEPTED,
        )
