"""The admission policies on real PostgreSQL, in small scenarios checked by hand: study
priority, backfill around a run with a reserved start, fair share across tenants, and six
concurrent schedulers under fair share that never pass a quota."""

import random
import threading
from datetime import timedelta

import pytest
from django.db import close_old_connections, connection
from django.utils import timezone

from catalog.models import Backend
from quotas.models import Quota
from scheduler.admission import admit
from studies.choices import HOLDING_STATES, RunState
from studies.models import Run
from studies.services import study_create
from studies.usage import usage_for_backend, usage_for_tenant


def _backend(policy: str, cores: int = 64, half_life: float = 0.0) -> Backend:
    return Backend.objects.update_or_create(
        name="shared",
        defaults={
            "kind": "noop",
            "cores": cores,
            "memory_gb": 256,
            "max_nodes": 1,
            "admission_policy": policy,
            "fair_share_half_life": half_life,
        },
    )[0]


def _submit(tenant, name, runs, processes=1, priority=None, wall=None):
    spec = {
        "name": name,
        "template": "cavity",
        "backend": "shared",
        "resources": {"processes": processes},
        "parameters": {"lid_velocity": {"linspace": [0.5, 2, runs]}} if runs > 1 else {},
        "reuse": False,  # runs identical to earlier completed ones would not queue
    }
    if priority:
        spec["priority"] = priority
    if wall:
        spec["convergence"] = {"max_wall_seconds": wall}
    study = study_create(tenant=tenant, owner=tenant.user, spec=spec, submit=True)
    return list(study.runs.order_by("index"))


def _running(runs, ago=0.0):
    """The runs were admitted and started `ago` seconds ago."""
    at = timezone.now() - timedelta(seconds=ago)
    Run.objects.filter(pk__in=[r.pk for r in runs]).update(
        state=RunState.RUNNING, admitted_at=at, started_at=at, attempt=1
    )


def _end(run):
    Run.objects.filter(pk=run.pk).update(
        state=RunState.COMPLETED, finished_at=timezone.now(), released_at=timezone.now()
    )


def _states(runs):
    by_id = dict(Run.objects.filter(pk__in=[r.pk for r in runs]).values_list("pk", "state"))
    return [by_id[r.pk] for r in runs]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("policy", ["fifo", "priority"])
def test_a_high_priority_study_goes_first_unless_the_backend_is_fifo(
    policy, make_tenant, catalog, scheduled
):
    tenant = make_tenant(cores=2, memory_gb=100, max_runs=100)
    _backend(policy)
    low = _submit(tenant, "low", 2, priority="low")
    normal = _submit(tenant, "normal", 2)
    high = _submit(tenant, "high", 2, priority="high")
    admitted = set(admit(tenant_id=tenant.id))
    if policy == "fifo":
        assert admitted == {r.pk for r in low}  # submission order, priority ignored
    else:
        assert admitted == {r.pk for r in high}
        for r in high:
            _end(r)
        assert set(admit(tenant_id=tenant.id)) == {r.pk for r in normal}
        for r in normal:
            _end(r)
        assert set(admit(tenant_id=tenant.id)) == {r.pk for r in low}


@pytest.mark.django_db(transaction=True)
def test_the_study_says_its_priority_and_a_wrong_one_is_a_clear_400(
    make_tenant, catalog, scheduled, client
):
    tenant = make_tenant(cores=2, memory_gb=100, max_runs=100)
    _backend("priority")
    client.force_login(tenant.user)
    spec = {"name": "p", "template": "cavity", "backend": "shared", "priority": "urgent"}
    r = client.post("/api/v1/studies/", spec, content_type="application/json")
    assert r.status_code == 400, r.content
    assert "priority must be low, normal or high" in r.content.decode()
    r = client.post(
        "/api/v1/studies/", {**spec, "priority": "high"}, content_type="application/json"
    )
    assert r.status_code == 201, r.content
    assert r.json()["priority"] == "high"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("policy", ["fifo", "priority"])
def test_backfill_lets_a_short_run_pass_a_wide_one_only_when_it_does_not_delay_it(
    policy, make_tenant, catalog, scheduled
):
    """Quota of 4 cores; a 2-core run started now with a 100 s wall limit; queued: a 4-core
    run (reserved for when the 2-core run ends, at +100 s), then a 1-core run with a 50 s
    limit (gone before then: it may go first), then a 1-core run with a 500 s limit (it
    would still hold a core at +100 s and delay the wide run: it waits)."""
    tenant = make_tenant(cores=4, memory_gb=100, max_runs=100)
    _backend(policy)
    (held,) = _submit(tenant, "held", 1, processes=2, wall=100)
    _running([held])
    (wide,) = _submit(tenant, "wide", 1, processes=4, wall=100)
    (short,) = _submit(tenant, "short", 1, wall=50)
    (long,) = _submit(tenant, "long", 1, wall=500)
    admitted = admit(tenant_id=tenant.id)
    if policy == "fifo":
        assert admitted == []  # strict: nothing passes the wide run
        return
    assert admitted == [short.pk]
    long.refresh_from_db()
    assert long.state == RunState.PENDING
    wide.refresh_from_db()
    assert wide.wait_reason == "quota"
    assert "its start is reserved in" in wide.wait_detail, wide.wait_detail


@pytest.mark.django_db(transaction=True)
def test_no_backfill_past_a_wide_run_whose_start_depends_on_a_run_with_no_wall_limit(
    make_tenant, catalog, scheduled
):
    tenant = make_tenant(cores=4, memory_gb=100, max_runs=100)
    _backend("priority")
    (held,) = _submit(tenant, "held", 1, processes=2)  # no max_wall_seconds: end unknown
    _running([held])
    _submit(tenant, "wide", 1, processes=4)
    _submit(tenant, "short", 1, wall=10)
    assert admit(tenant_id=tenant.id) == []


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("policy", ["fifo", "fair_share"])
def test_freed_capacity_goes_to_the_tenant_below_its_fair_share_not_the_oldest_run(
    policy, make_tenant, catalog, scheduled
):
    """A 4-core backend: tenant a holds all 4 cores and has 2 older runs queued; tenant b
    then queues 2. One of a's runs ends: fifo gives the core to a's older run; fair share
    holds it for b (a holds 3 of 4 cores = 75 % for a 50 % share, b none)."""
    _backend(policy, cores=4)
    a = make_tenant("a", cores=8, memory_gb=64, max_runs=8)
    b = make_tenant("b", cores=8, memory_gb=64, max_runs=8)
    a_runs = _submit(a, "a", 6)
    assert len(admit(tenant_id=a.id)) == 4
    b_runs = _submit(b, "b", 2)
    assert admit(tenant_id=b.id) == []
    _end(a_runs[0])
    scheduled.clear()
    admitted_a = admit(tenant_id=a.id)
    if policy == "fifo":
        assert admitted_a == [a_runs[4].pk]
        return
    assert admitted_a == []
    detail = Run.objects.get(pk=a_runs[4].pk).wait_detail
    assert "tenant a is above its fair share: 75 % of cores for a 50 % share" in detail, detail
    assert scheduled == [b.id]  # b's turn is enqueued
    assert admit(tenant_id=b.id) == [b_runs[0].pk]
    # now a holds 3, b 1: when another of a's runs ends, b (25 %) is still below a (50 %)
    _end(a_runs[1])
    assert admit(tenant_id=a.id) == []
    assert admit(tenant_id=b.id) == [b_runs[1].pk]
    # b has nothing left to wait for: what frees up next is a's again
    _end(a_runs[2])
    assert admit(tenant_id=a.id) == [a_runs[4].pk]


@pytest.mark.django_db(transaction=True)
def test_a_heavier_weight_is_a_larger_share(make_tenant, catalog, scheduled):
    """Weights 3 (a) and 1 (b): a's share is 75 %. a holds 2 of 4 cores (50 %, ratio 0.67)
    and b 1 (25 %, ratio 1.0): the freed core goes to a, although b holds less."""
    _backend("fair_share", cores=4)
    a = make_tenant("a", cores=8, memory_gb=64, max_runs=8)
    b = make_tenant("b", cores=8, memory_gb=64, max_runs=8)
    Quota.objects.filter(tenant=a).update(share_weight=3.0)
    b_runs = _submit(b, "b", 3)
    _running(b_runs[:1])
    a_runs = _submit(a, "a", 6)
    _running(a_runs[:3])
    assert admit(tenant_id=b.id) == []  # the backend is full: both wait for it
    assert admit(tenant_id=a.id) == []
    _end(a_runs[0])  # a holds 2 (ratio 0.67), b 1 (ratio 1.0)
    assert admit(tenant_id=b.id) == []  # held for a
    assert "above its fair share: 25 % of cores for a 25 % share" in (
        Run.objects.get(pk=b_runs[1].pk).wait_detail
    )
    assert admit(tenant_id=a.id) == [a_runs[3].pk]


@pytest.mark.django_db(transaction=True)
def test_recent_use_decays_into_the_share(make_tenant, catalog, scheduled):
    """Half-life 60 s: tenant a ran 4 cores for the last 5 minutes (its recent average is
    ~4 cores, all of the backend) and holds nothing now; b holds 1 core. A freed core goes to
    b: a used more, recently, although it holds less now."""
    _backend("fair_share", cores=4, half_life=60)
    a = make_tenant("a", cores=8, memory_gb=64, max_runs=8)
    b = make_tenant("b", cores=8, memory_gb=64, max_runs=8)
    past = _submit(a, "past", 4)
    ago = timezone.now() - timedelta(seconds=300)
    Run.objects.filter(pk__in=[r.pk for r in past]).update(
        state=RunState.COMPLETED,
        admitted_at=ago,
        started_at=ago,
        released_at=timezone.now(),
        finished_at=timezone.now(),
    )
    b_runs = _submit(b, "b", 5)
    _running(b_runs[:4])  # b fills the backend
    assert admit(tenant_id=b.id) == []  # its fifth run waits for the backend
    a_runs = _submit(a, "a", 2)
    assert admit(tenant_id=a.id) == []  # a's runs wait for it too
    _end(b_runs[0])  # b holds 3 cores (75 %); a holds none but used ~100 % recently
    assert admit(tenant_id=a.id) == []
    assert "above its fair share: 9" in Run.objects.get(pk=a_runs[0].pk).wait_detail
    assert admit(tenant_id=b.id) == [b_runs[4].pk]


@pytest.mark.django_db(transaction=True)
def test_six_concurrent_schedulers_under_fair_share_never_pass_a_quota_or_the_backend(
    make_tenant, catalog
):
    _backend("fair_share", cores=6)
    tenants = [make_tenant(n, cores=4, memory_gb=100, max_runs=100) for n in ("fa", "fb", "fc")]
    for t in tenants:
        _submit(t, t.name, 12)
    stop = threading.Event()
    peaks: dict[str, list[int]] = {name: [] for name in [t.name for t in tenants] + ["backend"]}
    errors: list[BaseException] = []
    backend_id = Backend.objects.get(name="shared").pk

    def guard(fn):
        def run():
            try:
                fn()
            except BaseException as exc:  # noqa: BLE001
                errors.append(exc)
            finally:
                connection.close()

        return run

    def scheduler(seed):
        rng = random.Random(seed)

        def loop():
            while not stop.is_set():
                admit(tenant_id=rng.choice(tenants).id, publish=False)

        return loop

    def finisher():
        rng = random.Random(1)
        while not stop.is_set():
            held = list(
                Run.objects.filter(backend_id=backend_id, state__in=HOLDING_STATES).values_list(
                    "id", flat=True
                )
            )
            if held:
                _end(Run(pk=rng.choice(held)))
            if not Run.objects.filter(backend_id=backend_id).exclude(state="completed").exists():
                stop.set()

    def monitor():
        while not stop.is_set():
            for t in tenants:
                peaks[t.name].append(usage_for_tenant(tenant_id=t.id).cores)
            peaks["backend"].append(usage_for_backend(backend_id=backend_id).cores)

    threads = [threading.Thread(target=guard(scheduler(i))) for i in range(6)]
    threads += [threading.Thread(target=guard(f)) for f in (finisher, monitor)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=180)
    stop.set()
    close_old_connections()
    assert not errors, errors
    for t in tenants:
        assert max(peaks[t.name]) <= 4, (t.name, max(peaks[t.name]))
    assert max(peaks["backend"]) <= 6
    assert max(peaks["backend"]) >= 2  # the backend was actually shared
    assert Run.objects.filter(backend_id=backend_id, state="completed").count() == 36
