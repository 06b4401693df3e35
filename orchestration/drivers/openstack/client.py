"""The cloud as the driver reaches it: one openstacksdk connection per cloud and credentials
in a process, and API calls retried on what may pass, their failures as DriverError.

openstacksdk is imported when a connection or a call needs it, not with the driver: most
processes that load the drivers never talk to a cloud.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from orchestration.drivers.base import DriverError
from orchestration.drivers.openstack.settings import AUTH_FIELDS

__all__ = ["COMPUTE_MICROVERSION", "RETRY_DELAYS", "OpenStackClient"]

COMPUTE_MICROVERSION = "2.79"  # ≥ 2.37 for networks='none'
RETRY_DELAYS = (0.5, 1.0, 2.0, 4.0, 8.0)
T = TypeVar("T")

_CONNECTIONS: dict[str, Any] = {}
_CONNECTIONS_LOCK = threading.Lock()


class OpenStackClient:
    """A project in a cloud, as a backend's checked settings (settings.validate_settings) and
    its secrets name it. `clock` and `sleep` are attributes so that tests and benchmarks can
    replace them."""

    def __init__(self, settings: Mapping[str, Any], secrets: Mapping[str, Any]) -> None:
        self.settings = dict(settings)
        self.secrets = dict(secrets)
        self.clock: Callable[[], float] = time.time
        self.sleep: Callable[[float], Any] = time.sleep

    def connection_key(self) -> str:
        """What tells one cloud, project and set of credentials from another (the key of
        the connection and flavor caches)."""
        keys = ("cloud", "clouds_yaml", "region", "api_timeout", *AUTH_FIELDS)
        return json.dumps(
            [{k: self.settings.get(k) for k in keys}, self.secrets], sort_keys=True, default=str
        )

    @property
    def conn(self) -> Any:
        """One openstacksdk Connection per cloud and credentials in this process."""
        key = self.connection_key()
        with _CONNECTIONS_LOCK:
            found = _CONNECTIONS.get(key)
            if found is None:
                found = self._connect()
                _CONNECTIONS[key] = found
        return found

    def _connect(self) -> Any:
        import openstack
        import openstack.config

        options: dict[str, Any] = {
            "compute_api_version": COMPUTE_MICROVERSION,
            "api_timeout": self.settings["api_timeout"],
        }
        if self.settings["region"]:
            options["region_name"] = self.settings["region"]
        try:
            if self.settings["auth_url"]:
                auth = {k: self.settings[k] for k in AUTH_FIELDS if self.settings.get(k)}
                if self.secrets.get("application_credential_secret"):
                    auth["application_credential_secret"] = self.secrets[
                        "application_credential_secret"
                    ]
                    auth_type = "v3applicationcredential"
                elif self.secrets.get("password"):
                    auth["password"] = self.secrets["password"]
                    auth_type = "password"
                else:
                    raise DriverError(
                        "auth_url is set but no secret is stored: give secrets."
                        "application_credential_secret (or secrets.password)"
                    )
                return openstack.connection.Connection(auth=auth, auth_type=auth_type, **options)
            files = [self.settings["clouds_yaml"]] if self.settings["clouds_yaml"] else None
            config = openstack.config.OpenStackConfig(config_files=files)
            region = config.get_one(cloud=self.settings["cloud"], **options)
            return openstack.connection.Connection(config=region)
        except DriverError:
            raise
        except Exception as exc:  # noqa: BLE001 — openstacksdk raises many kinds
            raise DriverError(f"cannot connect to the cloud: {exc}", retryable=True) from exc

    def call(self, what: str, fn: Callable[[], T], *, retries: Sequence[float] = RETRY_DELAYS) -> T:
        """An API call with retries on what may pass (5xx, 429, 409, connection errors); a
        failure is a DriverError saying `what` failed (retryable when it may pass, or when
        the project's quota refused). A missing resource (openstacksdk's ResourceNotFound)
        is raised as it is, for the caller to decide what gone means."""
        from keystoneauth1 import exceptions as ks_exc
        from openstack import exceptions as os_exc

        delays = list(retries)
        while True:
            try:
                return fn()
            except os_exc.ResourceNotFound:
                raise
            except os_exc.HttpException as exc:
                status = getattr(exc, "status_code", None) or 0
                transient = status >= 500 or status in (409, 429) or status == 0
                quota = status == 403 and "quota" in str(exc).lower()
                if not transient or not delays:
                    raise DriverError(
                        f"{what}: {_short(exc)}", retryable=transient or quota
                    ) from exc
            except (
                ks_exc.ConnectFailure,
                ks_exc.ConnectTimeout,
                ks_exc.RetriableConnectionFailure,
                ks_exc.DiscoveryFailure,
                ks_exc.EndpointNotFound,
                os_exc.SDKException,
            ) as exc:
                if not delays:
                    raise DriverError(f"{what}: {_short(exc)}", retryable=True) from exc
            self.sleep(delays.pop(0))


def _short(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:500]
