"""Run the image end-to-end tests last.

The live stack (uvicorn + a Celery worker with beat) is session-scoped and starts with the
first test that needs it. Collected in directory order, backend/catalog/tests/test_e2e_images.py
would start it before backend/scheduler/ and backend/quotas/ tests, whose expectations a
ticking scheduler would break. So its tests move to the end of the session.
"""

from __future__ import annotations


def pytest_collection_modifyitems(session, config, items) -> None:
    ours = [i for i in items if i.nodeid.startswith("backend/catalog/tests/test_e2e_images.py")]
    if ours:
        items[:] = [*(i for i in items if i not in ours), *ours]
