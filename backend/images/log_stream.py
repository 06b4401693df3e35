"""A build's output, appended to its Image row about once a second (not per line)."""

from __future__ import annotations

import threading
import time
from typing import Any

from django.db.models import F, TextField, Value
from django.db.models.functions import Concat, Right

from catalog.models import Image

LOG_MAX_CHARS = 1_000_000  # the build log keeps its last million characters
FLUSH_SECONDS = 1.0


class LogStream:
    """Appends build output to Image.build_log about once a second (not per line)."""

    def __init__(self, image_id: int) -> None:
        self.image_id = image_id
        self.lines: list[str] = []
        self.value: float | None = None
        self.last = time.monotonic()
        self.lock = threading.Lock()

    def line(self, text: str) -> None:
        with self.lock:
            self.lines.append(text)
        if time.monotonic() - self.last >= FLUSH_SECONDS:
            self.flush()

    def progress(self, value: float) -> None:
        self.value = value

    def flush(self) -> None:
        with self.lock:
            chunk, self.lines = "".join(f"{x}\n" for x in self.lines), []
            self.last = time.monotonic()
        fields: dict[str, Any] = {}
        if chunk:
            fields["build_log"] = Right(
                Concat(F("build_log"), Value(chunk), output_field=TextField()), LOG_MAX_CHARS
            )
        if self.value is not None:
            fields["progress"] = min(self.value, 1.0)
        if fields:
            Image.objects.filter(pk=self.image_id).update(**fields)
