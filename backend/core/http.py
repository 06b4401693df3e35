"""File downloads that stream under ASGI.

Django's FileResponse iterates its file synchronously; under ASGI Django then reads the
whole iterator into memory before the first byte goes out (a result archive of a few
hundred MB would sit in the web process). These responses read the file a megabyte at a
time in a worker thread and send each piece as it comes.
"""

from __future__ import annotations

import os
from typing import IO

from asgiref.sync import sync_to_async
from django.http import StreamingHttpResponse
from django.utils.http import content_disposition_header

CHUNK = 1 << 20


async def _chunks(fh: IO[bytes]):
    try:
        while chunk := await sync_to_async(fh.read, thread_sensitive=False)(CHUNK):
            yield chunk
    finally:
        await sync_to_async(fh.close, thread_sensitive=False)()


def file_download(fh: IO[bytes], *, filename: str, content_type: str) -> StreamingHttpResponse:
    """An attachment streamed from an open binary file (closed when sent). The file name
    may be any Unicode text: it is sent as RFC 6266's filename* too."""
    response = StreamingHttpResponse(_chunks(fh), content_type=content_type)
    try:
        response["Content-Length"] = str(os.fstat(fh.fileno()).st_size - fh.tell())
    except (OSError, AttributeError, ValueError):
        pass
    response["Content-Disposition"] = content_disposition_header(True, filename)
    return response
