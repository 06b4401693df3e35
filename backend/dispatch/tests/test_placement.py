"""Placement in the real lease (dispatch/pilots.py over the ingest API, real PostgreSQL):
which worker of a pool gets which run under each policy, that a run placed on a worker
that stops asking goes to another after the hold, what workers report of their caches, and
the operator setting a pool's policy (docs/pools.md, *Placement*)."""

from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from catalog.choices import ImageKind, ImageStatus
from catalog.images import image_digests
from catalog.models import Image
from core import jobs
from dispatch.pilots import worker_token
from orchestration.planning.placement import HashRing
from pools.models import Pool, PoolWorker
from studies import services
from studies.models import Run


def digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


class Pilot:
    """A worker of the pool and its pilot's calls (the pilot's own messages, over HTTP)."""

    def __init__(self, worker: PoolWorker) -> None:
        self.worker = worker
        self.id = str(worker.pk)
        self.client = APIClient()
        self.client.credentials(HTTP_AUTHORIZATION=f"Bearer {worker_token(worker_id=worker.pk)}")

    def post(self, what: str, body: dict):
        return self.client.post(
            f"/api/v1/ingest/workers/{self.worker.pk}/{what}/", body, format="json"
        )

    def lease(self, free_cores: int) -> list[str]:
        r = self.post("lease", {"free_cores": free_cores})
        assert r.status_code == 200, r.content
        return [spec["run_id"] for spec in r.json()["runs"]]


@pytest.fixture
def pool_of_three(api, monkeypatch):
    """A 4-core pool of three registered workers (ids in order w[0] < w[1] < w[2]) whose
    image is a composed VM image, and a study of four 1-core runs, admitted."""
    monkeypatch.setattr(jobs, "send", lambda *a, **k: None)
    spec = {"template": "cavity", "parameters": {"lid_velocity": {"values": [1, 2, 3, 4]}}}
    study = services.study_create(
        tenant=api.tenant, owner=api.tenant.user, spec={**spec, "name": "placed"}, submit=True
    )
    backend = Run.objects.filter(study=study).select_related("backend")[0].backend
    image = Image.objects.create(
        name="cfd-vm",
        kind=ImageKind.VM,
        digest=digest("cfd-vm"),
        closure=[{"name": "openfoam-core", "version": "12"}, {"name": "icofoam", "version": "12"}],
        status=ImageStatus.READY,
        references={backend.name: "glance-id"},
    )
    study.image = image
    study.save(update_fields=["image"])
    pool = Pool.objects.create(
        backend=backend, name="cfd", flavor="f", image=image, cores=4, memory_gb=8, max_workers=3
    )
    workers = [
        PoolWorker.objects.create(pool=pool, cores=4, server_id=f"srv{i}", server_name=f"w{i}")
        for i in range(3)
    ]
    pilots = sorted((Pilot(w) for w in workers), key=lambda p: p.id)
    for p in pilots:
        assert p.post("register", {"cores": 4}).status_code == 200
    runs = list(Run.objects.filter(study=study).order_by("index"))
    return pool, pilots, runs


def _admit(runs: list[Run]) -> list[str]:
    """Admit these runs now, one after the other (their order is the queue's)."""
    now = timezone.now()
    for i, run in enumerate(runs):
        Run.objects.filter(pk=run.pk).update(
            state="admitted", admitted_at=now + timedelta(milliseconds=i)
        )
    return [str(r.pk) for r in runs]


def test_least_loaded_is_the_default_and_gives_each_run_to_the_least_loaded_worker(pool_of_three):
    pool, (a, b, c), runs = pool_of_three
    assert pool.placement == "least_loaded"
    # c says it has 1 core free (load 0.75), b 3 (0.25); a asks now with 2 free (0.5)
    assert c.lease(1) == [] and b.lease(3) == []  # nothing waits yet
    first, second = _admit(runs[:2])
    # the first run goes to b (0.25), so does the second (0.5 ties a's 0.5 … a by id):
    # a, asking, takes only the second
    assert a.lease(2) == [second]
    assert b.lease(3) == [first]
    assert Run.objects.get(pk=first).handle.endswith(b.id)
    assert Run.objects.get(pk=second).handle.endswith(a.id)


def test_a_run_placed_on_a_worker_that_stops_asking_goes_to_another_after_the_hold(
    pool_of_three, settings
):
    pool, (a, b, c), runs = pool_of_three
    settings.POOL_PLACEMENT_HOLD = 5.0
    b.lease(4), c.lease(4)  # idle, both asking
    (only,) = _admit(runs[:1])
    assert a.lease(1) == []  # a (0.75) leaves it to the idle b
    # b goes quiet (its pilot is full or hangs): 6 s later it counts as full, a takes it
    PoolWorker.objects.filter(pk=b.worker.pk).update(asked_at=timezone.now() - timedelta(seconds=6))
    PoolWorker.objects.filter(pk=c.worker.pk).update(asked_at=timezone.now() - timedelta(seconds=6))
    assert a.lease(1) == [only]
    run = Run.objects.get(pk=only)
    assert run.state == "provisioning" and run.attempt == 1  # one claim, the usual fence
    assert b.lease(4) == []  # taken: b cannot take it again


def test_round_robin_gives_the_runs_to_the_workers_in_turn(pool_of_three):
    pool, (a, b, c), runs = pool_of_three
    Pool.objects.filter(pk=pool.pk).update(placement="round_robin")
    for p in (a, b, c):
        p.lease(4)
    r0, r1, r2, r3 = _admit(runs)
    # b asks first, but the first run is a's turn (ids in order): b waits for its own
    assert b.lease(4) == []
    assert a.lease(4) == [r0]
    assert c.lease(4) == []  # r1 is b's turn
    assert b.lease(4) == [r1]
    assert c.lease(4) == [r2]
    assert a.lease(4) == [r3]  # and round again
    pool.refresh_from_db()
    assert pool.placement_cursor == 1  # next: b


def test_random_gives_each_run_to_one_worker_with_room(pool_of_three):
    pool, pilots, runs = pool_of_three
    Pool.objects.filter(pk=pool.pk).update(placement="random")
    for p in pilots:
        p.lease(4)
    waiting = set(_admit(runs))
    leased: list[str] = []
    for _ in range(5):  # a few rounds of asks: every run is leased once
        for p in pilots:
            leased += p.lease(4)
    assert sorted(leased) == sorted(waiting)


def test_image_aware_sends_the_image_to_its_owner_until_it_is_loaded_past_the_threshold(
    pool_of_three, settings
):
    pool, pilots, runs = pool_of_three
    Pool.objects.filter(pk=pool.pk).update(placement="image_aware")
    settings.POOL_PLACEMENT_THRESHOLD = 0.5
    owner_id = HashRing([p.id for p in pilots]).owner(pool.image.digest)
    owner = next(p for p in pilots if p.id == owner_id)
    others = [p for p in pilots if p is not owner]
    for p in pilots:
        p.lease(4)
    first, second, third, _ = _admit(runs)
    assert others[1].lease(4) == []  # it leaves them to the owner
    # the owner takes runs of its image while its load stays at most 0.5: three of the four
    # (0 → 0.25 → 0.5 → 0.75); the fourth spills to the least-loaded other worker (both
    # idle and holding nothing: the first by id)
    assert owner.lease(4) == [first, second, third]
    assert others[0].lease(4) == [str(runs[3].pk)]


def test_image_aware_spill_prefers_a_worker_that_holds_the_image(pool_of_three, settings):
    pool, pilots, runs = pool_of_three
    Pool.objects.filter(pk=pool.pk).update(placement="image_aware")
    owner_id = HashRing([p.id for p in pilots]).owner(pool.image.digest)
    owner = next(p for p in pilots if p.id == owner_id)
    bare, holder = [p for p in pilots if p is not owner]
    cache = list(image_digests(image=pool.image))
    assert holder.post("heartbeat", {"runs": [], "cache": cache}).status_code == 200
    owner.lease(0)  # full
    bare.lease(4)  # idle, holds nothing
    holder.lease(2)  # half busy, holds the image
    (only,) = _admit(runs[:1])
    assert bare.lease(4) == []
    assert holder.lease(2) == [only]


def test_a_pilot_reports_what_its_cache_holds_and_the_lease_names_the_image(pool_of_three, staff):
    pool, (a, b, _), runs = pool_of_three
    held = [digest("base"), digest("layer")]
    assert a.post("register", {"cores": 4, "cache": held}).status_code == 200
    a.worker.refresh_from_db()
    assert a.worker.cache == held
    assert a.post("heartbeat", {"runs": [], "cache": held[:1]}).status_code == 200
    a.worker.refresh_from_db()
    assert a.worker.cache == held[:1]
    assert a.post("heartbeat", {"runs": []}).status_code == 200  # said nothing: unchanged
    a.worker.refresh_from_db()
    assert a.worker.cache == held[:1]
    # the operator sees it on the pool's page
    page = staff.get(f"/api/v1/admin/pools/{pool.name}/").json()
    assert {w["id"]: w["cache"] for w in page["workers"]}[a.id] == held[:1]
    # a lease answer names the leased runs' image digests (the pilot records them)
    _admit(runs[:1])
    answer = a.post("lease", {"free_cores": 4}).json()
    assert len(answer["runs"]) == 1
    assert answer["cache"] == list(image_digests(image=pool.image))
    assert len(answer["cache"]) == 3  # the image and its two package layers


@pytest.mark.parametrize(
    ("what", "body", "field"),
    [
        ("register", {"cache": ["latest"]}, "cache"),
        ("heartbeat", {"runs": [], "cache": ["sha256:" + "A" * 64]}, "cache"),
        ("heartbeat", {"runs": [], "cache": "sha256:" + "a" * 64}, "cache"),
        ("heartbeat", {"runs": [], "cache": [digest(str(i)) for i in range(257)]}, "cache"),
    ],
)
def test_junk_in_a_cache_report_is_a_400_naming_the_field(pool_of_three, what, body, field):
    _, (a, _, _), _ = pool_of_three
    r = a.post(what, body)
    assert r.status_code == 400, r.content
    assert field in (r.json().get("field") or "") + r.json()["message"]
    a.worker.refresh_from_db()
    assert a.worker.cache == []


def test_the_operator_sets_a_pools_placement_and_an_unknown_one_is_a_400(pool_of_three, staff):
    pool, _, _ = pool_of_three
    r = staff.patch(
        f"/api/v1/admin/pools/{pool.name}/", {"placement": "image_aware"}, format="json"
    )
    assert r.status_code == 200, r.content
    assert r.json()["placement"] == "image_aware"
    pool.refresh_from_db()
    assert pool.placement == "image_aware"
    r = staff.patch(f"/api/v1/admin/pools/{pool.name}/", {"placement": "fastest"}, format="json")
    assert r.status_code == 400
    assert r.json()["field"] == "placement"
    for name in ("round_robin", "random", "least_loaded", "image_aware"):
        assert name in r.json()["message"]
    pool.refresh_from_db()
    assert pool.placement == "image_aware"  # unchanged
    assert staff.get("/api/v1/admin/pools/").json()[0]["placement"] == "image_aware"
