"""Where the client finds its portal and token.

In order: what the caller passes (`--url`, `--token`), then `WINDTUNNEL_URL` and
`WINDTUNNEL_TOKEN`, then a profile stored by `windtunnel login` (`--profile`,
`WINDTUNNEL_PROFILE`, or the default one). Profiles live in one TOML file in the user's config
directory (`~/.config/windtunnel/config.toml` on Linux, or `WINDTUNNEL_CONFIG`), readable by
its owner only (mode 0600):

    default = "local"

    [profiles.local]
    url = "http://127.0.0.1:8000"
    token = "wt_…"
    tenant = "demo"
    username = "demo"
"""

from __future__ import annotations

import dataclasses
import json
import os
import tomllib
from pathlib import Path

import platformdirs

from .errors import ConfigError, UsageError

ENV_URL = "WINDTUNNEL_URL"
ENV_TOKEN = "WINDTUNNEL_TOKEN"
ENV_PROFILE = "WINDTUNNEL_PROFILE"
ENV_CONFIG = "WINDTUNNEL_CONFIG"


@dataclasses.dataclass(frozen=True)
class Profile:
    """A portal and a token for it, stored under a name."""

    name: str
    url: str
    token: str
    tenant: str = ""
    username: str = ""


@dataclasses.dataclass
class Config:
    """The stored profiles and which one is used by default."""

    profiles: dict[str, Profile] = dataclasses.field(default_factory=dict)
    default: str = ""


def config_path() -> Path:
    """The config file: `WINDTUNNEL_CONFIG`, else config.toml in the user's config directory."""
    explicit = os.environ.get(ENV_CONFIG)
    if explicit:
        return Path(explicit).expanduser()
    return Path(platformdirs.user_config_dir("windtunnel")) / "config.toml"


def normalize_url(url: str) -> str:
    """The portal's base URL: a scheme (http:// if none), no trailing slash or /api/v1."""
    url = url.strip()
    if not url:
        raise UsageError("the portal URL is empty; give it as http://host:port")
    if "://" not in url:
        url = "http://" + url
    url = url.rstrip("/")
    for suffix in ("/api/v1", "/api"):
        if url.endswith(suffix):
            url = url[: -len(suffix)]
    return url


def load(path: Path | None = None) -> Config:
    """The stored profiles (none when the file does not exist)."""
    path = path or config_path()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Config()
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML ({exc}); fix or delete it") from None
    profiles = {}
    for name, entry in (data.get("profiles") or {}).items():
        if isinstance(entry, dict) and entry.get("url") and entry.get("token"):
            profiles[name] = Profile(
                name=name,
                url=str(entry["url"]),
                token=str(entry["token"]),
                tenant=str(entry.get("tenant", "")),
                username=str(entry.get("username", "")),
            )
    return Config(profiles=profiles, default=str(data.get("default", "")))


def save(config: Config, path: Path | None = None) -> Path:
    """Write the profiles, readable by their owner only (0600), replacing the file at once."""
    path = path or config_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    lines = []
    if config.default:
        lines += [f"default = {_toml_str(config.default)}", ""]
    for profile in config.profiles.values():
        lines.append(f"[profiles.{_toml_str(profile.name)}]")
        for key in ("url", "token", "tenant", "username"):
            lines.append(f"{key} = {_toml_str(getattr(profile, key))}")
        lines.append("")
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # whatever the umask
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write("\n".join(lines))
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def _toml_str(value: str) -> str:
    # a JSON string is a TOML basic string (the same escapes: \" \\ \n \t \uXXXX)
    return json.dumps(value, ensure_ascii=True)


def store(profile: Profile, *, make_default: bool = True, path: Path | None = None) -> Path:
    """Add or replace a profile (the default one unless asked otherwise)."""
    config = load(path)
    config.profiles[profile.name] = profile
    if make_default or not config.default:
        config.default = profile.name
    return save(config, path)


def forget(name: str, *, path: Path | None = None) -> bool:
    """Remove a stored profile; whether there was one."""
    config = load(path)
    if config.profiles.pop(name, None) is None:
        return False
    if config.default == name:
        config.default = next(iter(config.profiles), "")
    save(config, path)
    return True


def resolve(
    *, url: str | None = None, token: str | None = None, profile: str | None = None
) -> tuple[str, str]:
    """The portal URL and token to use (see the module's docstring for the order)."""
    url = url or os.environ.get(ENV_URL) or None
    token = token or os.environ.get(ENV_TOKEN) or None
    if url and token:
        return normalize_url(url), token
    config = load()
    wanted = profile or os.environ.get(ENV_PROFILE) or None
    chosen: Profile | None = None
    if wanted:
        chosen = config.profiles.get(wanted)
        if chosen is None:
            known = ", ".join(sorted(config.profiles)) or "none"
            raise ConfigError(
                f"no profile named {wanted!r} in {config_path()} (profiles: {known}); "
                f"run `windtunnel login URL --name {wanted}`"
            )
    elif url:  # a URL without a token: the profile stored for that portal, if any
        base = normalize_url(url)
        chosen = next((p for p in config.profiles.values() if p.url == base), None)
    else:
        chosen = config.profiles.get(config.default) or next(iter(config.profiles.values()), None)
    if chosen is None:
        if url:
            raise ConfigError(
                f"no token for {normalize_url(url)}: set {ENV_TOKEN}, or run "
                f"`windtunnel login {normalize_url(url)}`"
            )
        raise ConfigError(
            f"no portal configured: set {ENV_URL} and {ENV_TOKEN}, or run "
            "`windtunnel login URL` once"
        )
    return normalize_url(url or chosen.url), token or chosen.token
