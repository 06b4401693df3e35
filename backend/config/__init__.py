import functools

import redis.utils

from config.celery_app import app as celery_app

# redis-py 7 looks its own version up in the package metadata (a pass of the email parser,
# about 7 ms of CPU) for every new connection: the channel layer's per-event-loop pools, Celery
# and the cache all make them. The version does not change while the process runs.
redis.utils.get_lib_version = functools.cache(redis.utils.get_lib_version)

__all__ = ["celery_app"]
