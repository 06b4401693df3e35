"""Background work at the lowest priority (core.runtime.in_background): a large study's
cancel or delete, whose bulk would otherwise slow the pages users open meanwhile."""

from __future__ import annotations

import os
import threading

import psutil
import pytest
from django.contrib.auth import get_user_model
from django.db import connection

from core.runtime import BACKGROUND_NICE, in_background


def _seen() -> dict:
    """What the work sees of itself: its thread and priority, its database server process."""
    with connection.cursor() as cur:
        cur.execute("SELECT pg_backend_pid()")
        server = cur.fetchone()[0]
    return {
        "thread": threading.get_ident(),
        "nice": os.getpriority(os.PRIO_PROCESS, threading.get_native_id()),
        "server": server,
        "server_nice": psutil.Process(server).nice(),
        "users": get_user_model().objects.count(),
    }


@pytest.mark.skipif(os.geteuid() != 0, reason="a database server is lowered by root only")
@pytest.mark.django_db(transaction=True)
def test_background_work_runs_at_the_lowest_priority_and_so_does_its_database_work() -> None:
    get_user_model().objects.create(username="committed")
    seen = in_background(_seen)
    assert seen["thread"] != threading.get_ident()
    assert seen["nice"] == BACKGROUND_NICE
    # the test database is this machine's own PostgreSQL: its server process is lowered too
    assert seen["server_nice"] == BACKGROUND_NICE
    assert seen["users"] == 1  # it sees what was committed
    # the caller keeps its priority, and the work's server process was raised back before its
    # connection was released (a pool would hand it to other work)
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == 0
    try:
        assert psutil.Process(seen["server"]).nice() == 0
    except psutil.NoSuchProcess:  # or it ended with the connection
        pass
    mine = _seen()
    assert mine["server_nice"] == 0


@pytest.mark.django_db(transaction=True)
def test_what_background_work_raises_reaches_the_caller() -> None:
    def fail() -> None:
        raise ValueError("the study is gone")

    with pytest.raises(ValueError, match="the study is gone"):
        in_background(fail)


@pytest.mark.django_db
def test_inside_a_transaction_the_work_runs_here_and_sees_it() -> None:
    get_user_model().objects.create(username="uncommitted")
    seen = in_background(_seen)
    assert seen["thread"] == threading.get_ident() and seen["users"] == 1
