"""`Client`: the portal's REST API (/api/v1/) over httpx, with its errors as exceptions."""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
from collections.abc import Iterable, Iterator, Mapping
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import IO, Any
from urllib.parse import quote

import httpx
import yaml

from . import config
from .archive import pack_case
from .errors import ApiError, UnavailableError, UsageError, error_from_response
from .models import (
    ENDPOINTS,
    ApiTokenRecord,
    LogTail,
    Me,
    NewApiToken,
    Preview,
    Results,
    RunRecord,
    StudyRecord,
    Telemetry,
    Template,
    Token,
    Upload,
    build,
)
from .study import Run, Study

try:  # the installed distribution's (clients/python/pyproject.toml)
    __version__ = version("windtunnel-client")
except PackageNotFoundError:  # pragma: no cover - run from a source tree, not installed
    __version__ = "0+unknown"

_KNOWN = frozenset(ENDPOINTS)
_UUID = re.compile(r"^[0-9a-fA-F]{8}-?([0-9a-fA-F]{4}-?){3}[0-9a-fA-F]{12}$")

Spec = Mapping[str, Any] | str | os.PathLike[str]


class Client:
    """A portal and a token: `Client("http://127.0.0.1:8000", "wt_…")`, or
    `Client.from_env()` (WINDTUNNEL_URL and WINDTUNNEL_TOKEN, or `windtunnel login`)."""

    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url = config.normalize_url(url)
        self.token = token
        self.timeout = timeout
        headers = {"User-Agent": f"windtunnel-client/{__version__}", "Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Token {token}"
        self.http = httpx.Client(
            base_url=f"{self.url}/api/v1/",
            headers=headers,
            timeout=timeout,
            transport=transport,
        )

    @classmethod
    def from_env(cls, *, profile: str | None = None, timeout: float = 30.0) -> Client:
        """The portal of WINDTUNNEL_URL with WINDTUNNEL_TOKEN, else a profile stored by
        `windtunnel login` (`profile`, WINDTUNNEL_PROFILE, or the default one)."""
        url, token = config.resolve(profile=profile)
        return cls(url, token, timeout=timeout)

    @classmethod
    def login(
        cls, url: str, *, username: str, password: str, name: str = "windtunnel-cli"
    ) -> tuple[Client, Token]:
        """Sign in with a password: an API token named `name` (replacing the one of that name,
        if any) and a client using it."""
        with cls(url) as anonymous:
            answer = anonymous.call(
                "post",
                "/api/v1/auth/token/",
                json={"username": username, "password": password, "name": name},
            )
            token = build(Token, answer.json())
        return cls(url, token.token), token

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Client({self.url!r})"

    # --- the HTTP layer --------------------------------------------------------------------

    def call(
        self, method: str, endpoint: str, *, id: str | None = None, **kwargs: Any
    ) -> httpx.Response:
        """One request to an endpoint of the schema (`"/api/v1/runs/{id}/log/"`): its answer,
        or the portal's error raised as ApiError (AuthError, ServerError), UnavailableError
        when the portal cannot be reached."""
        with self._stream_or_send(method, endpoint, id=id, stream=False, **kwargs) as response:
            return response

    @contextlib.contextmanager
    def stream(
        self, endpoint: str, *, id: str | None = None, **kwargs: Any
    ) -> Iterator[httpx.Response]:
        """A GET whose body is read as it comes (`response.iter_bytes()`)."""
        with self._stream_or_send("get", endpoint, id=id, stream=True, **kwargs) as response:
            yield response

    @contextlib.contextmanager
    def _stream_or_send(
        self, method: str, endpoint: str, *, id: str | None, stream: bool, **kwargs: Any
    ) -> Iterator[httpx.Response]:
        if (method, endpoint) not in _KNOWN:  # models.ENDPOINTS is checked against the schema
            raise ValueError(f"{method.upper()} {endpoint} is not in windtunnel.models.ENDPOINTS")
        path = endpoint.removeprefix("/api/v1/")
        if id is not None:
            path = path.replace("{id}", quote(str(id), safe=""))
        try:
            if stream:
                with self.http.stream(method.upper(), path, **kwargs) as response:
                    if response.is_error:
                        response.read()
                        raise error_from_response(response)
                    yield response
                return
            response = self.http.request(method.upper(), path, **kwargs)
        except httpx.TimeoutException:
            raise UnavailableError(
                f"{self.url} did not answer within {self.timeout:g} s; try again, or check "
                "that the portal is up (GET /healthz)"
            ) from None
        except httpx.TransportError as exc:
            raise UnavailableError(
                f"cannot reach the portal at {self.url} ({exc}); is it running, and is "
                f"{config.ENV_URL} right?"
            ) from None
        if response.is_error:
            raise error_from_response(response)
        yield response

    def get_json(self, endpoint: str, *, id: str | None = None, **kwargs: Any) -> Any:
        return self.call("get", endpoint, id=id, **kwargs).json()

    # --- the API ---------------------------------------------------------------------------

    def me(self) -> Me:
        """Who this token signs in, and the tenant."""
        return build(Me, self.get_json("/api/v1/me/"))

    def tokens(self) -> list[ApiTokenRecord]:
        """Your API tokens: names, when each was made and last used, expiry (never keys)."""
        return [build(ApiTokenRecord, t) for t in self.get_json("/api/v1/tokens/")]

    def token_create(self, name: str, *, expires_in_days: int | None = None) -> NewApiToken:
        """A new API token named `name` (expiring after `expires_in_days`, or never): its
        key is in the answer this once."""
        body: dict[str, Any] = {"name": name}
        if expires_in_days is not None:
            body["expires_in_days"] = expires_in_days
        return build(NewApiToken, self.call("post", "/api/v1/tokens/", json=body).json())

    def token_revoke(self, token: str | int) -> ApiTokenRecord:
        """Revoke one of your tokens, by name (or, when no name matches, by id): it opens
        nothing from then on. The revoked token's record."""
        mine = self.tokens()
        found = next((t for t in mine if t.name == str(token)), None) or next(
            (t for t in mine if str(t.id) == str(token).strip()), None
        )
        if found is None:
            raise ApiError(
                f"you have no API token named {str(token)!r} (nor with that id); "
                "`windtunnel tokens` lists yours",
                status=404,
                code="not_found",
            )
        self.call("delete", "/api/v1/tokens/{id}/", id=str(found.id))
        return found

    def templates(self) -> list[Template]:
        """The case templates a study can start from."""
        return [build(Template, t) for t in self.get_json("/api/v1/templates/")]

    def template(self, name: str) -> Template:
        """One template: its parameters (type, unit, default, bounds), objectives, demo."""
        return build(Template, self.get_json("/api/v1/templates/{id}/", id=name))

    def upload(self, case: str | os.PathLike[str]) -> Upload:
        """Upload a case: a folder is packed as .tar.gz; a .tar.gz, .tgz or .zip file is sent
        as it is. The answer lists the {{ placeholders }} found in its files."""
        path = Path(case).expanduser()
        if path.is_dir():
            name, body = pack_case(path)
            with body:
                return self._upload(name, body)
        if not path.is_file():
            raise UsageError(f"{case}: no such file or folder")
        with path.open("rb") as f:
            return self._upload(path.name, f)

    def _upload(self, name: str, body: IO[bytes]) -> Upload:
        response = self.call(
            "post", "/api/v1/uploads/", files={"file": (name, body, "application/octet-stream")}
        )
        return build(Upload, response.json())

    def preview(
        self, spec: Spec, *, case: str | os.PathLike[str] | Upload | None = None
    ) -> Preview:
        """What a spec would make (run count, first rows, steps, quota impact); creates
        nothing. `case` as for submit()."""
        body = self._spec_with_case(spec, case)
        return build(Preview, self.call("post", "/api/v1/studies/preview/", json=body).json())

    def submit(
        self,
        spec: Spec,
        *,
        case: str | os.PathLike[str] | Upload | None = None,
        draft: bool = False,
    ) -> Study:
        """Create and submit a study (`draft=True`: save it only). `spec` is a dict, or the
        path of a YAML or JSON file (docs/study-spec.md). `case` runs it on an uploaded case
        instead of a template: an upload, its id, or a folder or archive to upload first."""
        body = self._spec_with_case(spec, case)
        if draft:
            body["draft"] = True
        answer = self.call("post", "/api/v1/studies/", json=body).json()
        return Study(self, build(StudyRecord, answer))

    def _spec_with_case(
        self, spec: Spec, case: str | os.PathLike[str] | Upload | None
    ) -> dict[str, Any]:
        body = dict(load_spec(spec)) if not isinstance(spec, Mapping) else dict(spec)
        if case is not None:
            body.pop("template", None)
            body["case"] = self._case_id(case)
        return body

    def _case_id(self, case: str | os.PathLike[str] | Upload) -> str:
        if isinstance(case, Upload):
            return case.id
        path = Path(case).expanduser()
        if path.exists():
            return self.upload(path).id
        if isinstance(case, str) and _UUID.match(case):
            return case
        raise UsageError(f"--case {case}: not an upload id, nor a case folder or archive here")

    def study(self, study_id: str) -> Study:
        """A study by id."""
        return Study(self, build(StudyRecord, self.get_json("/api/v1/studies/{id}/", id=study_id)))

    def run(self, run_id: str) -> Run:
        """A run by id."""
        return Run(self, build(RunRecord, self.get_json("/api/v1/runs/{id}/", id=run_id)))

    # used by Study and Run

    def study_runs(self, study_id: str, *, state: str | None = None) -> list[RunRecord]:
        """Every run of a study (all pages), in index order; only those in `state` if given."""
        params: dict[str, Any] = {"page_size": 1000}
        if state:
            params["state"] = state
        out: list[RunRecord] = []
        page = 1
        while True:
            body = self.get_json(
                "/api/v1/studies/{id}/runs/", id=study_id, params={**params, "page": page}
            )
            out += [build(RunRecord, r) for r in body["results"]]
            if not body.get("next"):
                return out
            page += 1

    def resume_runs(
        self,
        run_ids: list[str],
        *,
        iterations: int | None = None,
        time: str = "latest",
        settings: dict[str, dict[str, str]] | None = None,
    ) -> dict[str, Any]:
        """Continue (or restart) ended runs of any studies from their writes (Run.resume
        for each; Study.resume_runs for a study's at once): {"continued": [run ids],
        "skipped": [{"run", "index", "reason"}]}."""
        if len(run_ids) == 1:
            run = self.run(run_ids[0]).resume(iterations=iterations, time=time, settings=settings)
            return {"continued": [run.id], "skipped": []}
        by_study: dict[str, list[str]] = {}
        for run_id in run_ids:
            by_study.setdefault(self.run(run_id).record.study, []).append(run_id)
        done: dict[str, Any] = {"continued": [], "skipped": []}
        for study_id, ids in by_study.items():
            part = self.study(study_id).resume_runs(
                ids, iterations=iterations, time=time, settings=settings
            )
            done["continued"] += part["continued"]
            done["skipped"] += part["skipped"]
        return done

    def study_results(self, study_id: str) -> Results:
        return build(Results, self.get_json("/api/v1/studies/{id}/results/", id=study_id))

    def telemetry(
        self, run_id: str, *, series: list[str] | None = None, max_points: int = 2000, **params: Any
    ) -> Telemetry:
        query = {"max_points": max_points, **params}
        if series:
            query["series"] = ",".join(series)
        return build(
            Telemetry, self.get_json("/api/v1/runs/{id}/telemetry/", id=run_id, params=query)
        )

    def log_tail(self, run_id: str, *, lines: int = 200) -> LogTail:
        return build(
            LogTail, self.get_json("/api/v1/runs/{id}/log/", id=run_id, params={"lines": lines})
        )


def load_spec(spec: str | os.PathLike[str]) -> dict[str, Any]:
    """A study spec from a YAML or JSON file (`-` reads standard input)."""
    path = Path(spec)
    try:
        text = path.read_text(encoding="utf-8") if str(spec) != "-" else sys.stdin.read()
    except FileNotFoundError:
        raise UsageError(f"{spec}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{spec}: cannot read it ({exc})") from None
    try:
        data = yaml.safe_load(text) if path.suffix.lower() != ".json" else json.loads(text)
    except (yaml.YAMLError, json.JSONDecodeError) as exc:
        raise UsageError(f"{spec} is not valid YAML: {_yaml_problem(exc)}") from None
    if not isinstance(data, dict):
        raise UsageError(
            f"{spec}: a study spec is a mapping (name: …, template: …, parameters: …), "
            f"not {type(data).__name__}; see docs/study-spec.md"
        )
    return data


def _yaml_problem(exc: Exception) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    if mark is not None:
        return f"line {mark.line + 1}, column {mark.column + 1}: {problem}"
    return str(problem)


__all__ = ["ApiError", "Client", "load_spec"]


def settings_from_text(items: Iterable[str]) -> dict[str, dict[str, str]]:
    """FILE:KEY=VALUE texts (fvSolution:relaxationFactors.equations.U=0.5) as a restart's
    settings; ValueError naming a text that is not of that form."""
    out: dict[str, dict[str, str]] = {}
    for text in items:
        where, sep, value = text.partition("=")
        file, colon, key = where.partition(":")
        if not sep or not colon or not file or not key:
            raise ValueError(
                f"{text!r}: give FILE:KEY=VALUE, e.g. fvSolution:relaxationFactors.equations.U=0.5"
            )
        out.setdefault(file, {})[key] = value
    return out
