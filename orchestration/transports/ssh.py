"""The SSH transport: commands on a login node, files over SFTP (paramiko).

- Key-based authentication only; the private key (and its passphrase) come from the
  backend's encrypted secrets and never touch the disk here.
- The host key is verified against a known_hosts entry stored with the backend: an unknown
  or changed key is refused, with the presented key in the message so an admin can compare
  it out of band and store it. There is no trust on first use.
- Connections are pooled per endpoint and shared by every driver object of the process:
  at most `max_connections` connections, each carrying at most `max_sessions` concurrent
  channels (commands or SFTP), below sshd's defaults (MaxStartups 10:30:100, MaxSessions 10; sshd frees a
  session a moment after the client closed it, so a refused channel is retried),
  so a burst of 500 submissions waits for a channel instead of opening 500 sessions.
- Connecting retries with exponential backoff (sshd drops connections beyond MaxStartups);
  a command is retried only when its channel could not be opened, so it never runs twice.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import hashlib
import io
import logging
import os
import posixpath
import shlex
import socket
import stat
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence

import paramiko

from orchestration.backoff import backoff_delays
from orchestration.transports.base import CommandResult, FileSpec, TransportError

__all__ = ["SSHPool", "SSHTransport", "host_key_line", "load_private_key", "pool_for"]


class _RefusedChannelFilter(logging.Filter):
    """paramiko logs every refused channel as an ERROR; the pool retries them, so drop those."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "open FAILED" not in record.getMessage()


logging.getLogger("paramiko.transport").addFilter(_RefusedChannelFilter())

_KEY_CLASSES: tuple[type[paramiko.PKey], ...] = (
    paramiko.Ed25519Key,
    paramiko.ECDSAKey,
    paramiko.RSAKey,
)


def load_private_key(text: str, passphrase: str | None = None) -> paramiko.PKey:
    """A private key from its OpenSSH/PEM text; TransportError when it cannot be read."""
    if not text or "PRIVATE KEY" not in text:
        raise TransportError("the SSH private key is missing or not a private key")
    problems = []
    for cls in _KEY_CLASSES:
        try:
            return cls.from_private_key(io.StringIO(text), password=passphrase or None)
        except paramiko.PasswordRequiredException as exc:
            raise TransportError("the SSH private key needs a passphrase") from exc
        except (paramiko.SSHException, ValueError) as exc:
            problems.append(f"{cls.__name__}: {exc}")
    raise TransportError("cannot read the SSH private key (" + "; ".join(problems) + ")")


def _host_id(host: str, port: int) -> str:
    return host if port == 22 else f"[{host}]:{port}"


def host_key_line(host: str, port: int, key: paramiko.PKey) -> str:
    return f"{_host_id(host, port)} {key.get_name()} {key.get_base64()}"


def fingerprint(key: paramiko.PKey) -> str:
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def parse_known_hosts(text: str) -> paramiko.HostKeys:
    """The host keys an admin pasted (ssh-keyscan's lines). A line that is not one is refused
    naming its number and host field only: what was pasted may be a private key."""
    if "PRIVATE KEY" in (text or ""):
        raise TransportError(
            "known_hosts holds a private key: put the login node's host keys there (the "
            "output of ssh-keyscan -p PORT HOST), and the private key in private_key",
            retryable=False,
        )
    keys = paramiko.HostKeys()
    for number, line in enumerate((text or "").splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        where = f"known_hosts line {number} (host {line.split()[0][:60]!r})"
        try:
            entry = paramiko.hostkeys.HostKeyEntry.from_line(line)
        except Exception as exc:  # paramiko's InvalidHostKey is a bare Exception; binascii too
            raise TransportError(
                f"{where} is not a host key line ({type(exc).__name__}); paste the output of "
                "ssh-keyscan -p PORT HOST",
                retryable=False,
            ) from exc
        if entry is None:
            raise TransportError(
                f"{where} is not 'HOST KEYTYPE BASE64KEY'; paste the output of ssh-keyscan",
                retryable=False,
            )
        for name in entry.hostnames:
            keys.add(name, entry.key.get_name(), entry.key)
    return keys


@dataclasses.dataclass
class _Conn:
    transport: paramiko.Transport
    sessions: int = 0
    last_used: float = dataclasses.field(default_factory=time.monotonic)


class SSHPool:
    """Bounded connections and channels to one endpoint, shared by threads."""

    def __init__(
        self,
        *,
        host: str,
        port: int,
        user: str,
        pkey: paramiko.PKey,
        known_hosts: str,
        connect_timeout: float = 10.0,
        retries: int = 5,
        max_connections: int = 2,
        max_sessions: int = 6,
        acquire_timeout: float = 120.0,
        idle_timeout: float = 300.0,
    ) -> None:
        self.host, self.port, self.user = host, port, user
        self.pkey = pkey
        self.host_keys = parse_known_hosts(known_hosts)
        self.connect_timeout = connect_timeout
        self.retries = retries
        self.max_connections = max(1, max_connections)
        self.max_sessions = max(1, max_sessions)
        self.acquire_timeout = acquire_timeout
        self.idle_timeout = idle_timeout
        self._cond = threading.Condition()
        self._conns: list[_Conn] = []
        self._connecting = 0
        # counters for tests and benchmarks
        self.connections_opened = 0
        self.peak_sessions = 0
        self.channels_refused = 0

    # -- connections ----------------------------------------------------------------------

    def _connect_once(self) -> paramiko.Transport:
        try:
            sock = socket.create_connection((self.host, self.port), timeout=self.connect_timeout)
        except OSError as exc:
            raise TransportError(
                f"cannot connect to {self.host}:{self.port}: {exc}", retryable=True
            ) from exc
        transport = paramiko.Transport(sock)
        transport.banner_timeout = self.connect_timeout
        transport.handshake_timeout = self.connect_timeout
        try:
            transport.start_client(timeout=self.connect_timeout)
            self._verify_host_key(transport.get_remote_server_key())
            transport.auth_publickey(self.user, self.pkey)
        except paramiko.AuthenticationException as exc:
            transport.close()
            raise TransportError(
                f"SSH login as {self.user}@{self.host} refused: {exc}; is the public key in "
                "~/.ssh/authorized_keys on the login node?"
            ) from exc
        except TransportError:
            transport.close()
            raise
        except (paramiko.SSHException, OSError, EOFError) as exc:
            transport.close()  # e.g. sshd dropped us beyond MaxStartups: try again later
            raise TransportError(
                f"SSH handshake with {self.host}:{self.port} failed: {exc or type(exc).__name__}",
                retryable=True,
            ) from exc
        transport.set_keepalive(30)
        return transport

    def _verify_host_key(self, key: paramiko.PKey) -> None:
        host_id = _host_id(self.host, self.port)
        known = self.host_keys.lookup(host_id)
        if known and key.get_name() in known:
            if known[key.get_name()] == key:
                return
            raise TransportError(
                f"HOST KEY MISMATCH for {host_id}: the server presented {key.get_name()} "
                f"{fingerprint(key)}, which differs from the stored key; refusing to connect "
                "(if the host was really re-keyed, store its new key)"
            )
        raise TransportError(
            f"unknown host key for {host_id}: the server presented {key.get_name()} "
            f"{fingerprint(key)}. Compare it with the login node's key (ssh-keygen -lf "
            "/etc/ssh/ssh_host_*_key.pub) and store this known_hosts line with the backend: "
            f"{host_key_line(self.host, self.port, key)}"
        )

    def _connect(self) -> paramiko.Transport:
        delays = backoff_delays(self.retries, base=0.3)
        while True:
            try:
                transport = self._connect_once()
                self.connections_opened += 1
                return transport
            except TransportError as exc:
                if not exc.retryable or not delays:
                    raise
                time.sleep(delays.pop(0))

    # -- channels -------------------------------------------------------------------------

    def _acquire(self) -> _Conn:
        deadline = time.monotonic() + self.acquire_timeout
        with self._cond:
            while True:
                self._drop_dead()
                free = [
                    c
                    for c in self._conns
                    if c.transport.is_active() and c.sessions < self.max_sessions
                ]
                if free:
                    conn = min(free, key=lambda c: c.sessions)
                    conn.sessions += 1
                    self._note_peak()
                    return conn
                if len(self._conns) + self._connecting < self.max_connections:
                    self._connecting += 1
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TransportError(
                        f"all {self.max_connections}×{self.max_sessions} SSH channels to "
                        f"{self.host} stayed busy for {self.acquire_timeout:g} s",
                        retryable=True,
                    )
                self._cond.wait(min(remaining, 1.0))
        try:
            transport = self._connect()
        except BaseException:
            with self._cond:
                self._connecting -= 1
                self._cond.notify_all()
            raise
        with self._cond:
            self._connecting -= 1
            conn = _Conn(transport, sessions=1)
            self._conns.append(conn)
            self._note_peak()
            self._cond.notify_all()
            return conn

    def _release(self, conn: _Conn) -> None:
        with self._cond:
            conn.sessions -= 1
            conn.last_used = time.monotonic()
            self._drop_dead()
            self._cond.notify_all()

    def _drop_dead(self) -> None:
        now = time.monotonic()
        keep = []
        for conn in self._conns:
            idle = conn.sessions == 0 and now - conn.last_used > self.idle_timeout
            if conn.sessions == 0 and (idle or not conn.transport.is_active()):
                conn.transport.close()
            else:
                keep.append(conn)
        self._conns = keep

    def _note_peak(self) -> None:
        self.peak_sessions = max(self.peak_sessions, sum(c.sessions for c in self._conns))

    @contextlib.contextmanager
    def channel_slot(self) -> Iterator[paramiko.Transport]:
        conn = self._acquire()
        try:
            yield conn.transport
        finally:
            self._release(conn)

    def open_channel(self, transport: paramiko.Transport) -> paramiko.Channel:
        try:
            return transport.open_session(timeout=self.connect_timeout)
        except (paramiko.SSHException, OSError, EOFError) as exc:
            if transport.is_active():
                # refused ("no more sessions": sshd frees a closed session a moment after we
                # closed it; paramiko may report it as ChannelException or as "Unable to open
                # channel"): the connection itself is fine, so try again shortly
                self.channels_refused += 1
                raise TransportError(
                    f"{self.host} refused an SSH channel: {exc}", retryable=True
                ) from exc
            raise TransportError(  # the connection died: the next acquire makes a new one
                f"the SSH connection to {self.host} was lost: {exc}", retryable=True
            ) from exc

    @property
    def open_connections(self) -> int:
        with self._cond:
            return sum(1 for c in self._conns if c.transport.is_active())

    def close(self) -> None:
        with self._cond:
            for conn in self._conns:
                conn.transport.close()
            self._conns = []


_POOLS: dict[str, SSHPool] = {}
_POOLS_LOCK = threading.Lock()


def pool_for(key: str, factory: Callable[[], SSHPool]) -> SSHPool:
    with _POOLS_LOCK:
        pool = _POOLS.get(key)
        if pool is None:
            pool = _POOLS[key] = factory()
        return pool


def close_all_pools() -> None:
    with _POOLS_LOCK:
        pools = list(_POOLS.values())
        _POOLS.clear()
    for pool in pools:
        pool.close()


class SSHTransport:
    remote = True

    def __init__(
        self,
        *,
        host: str,
        user: str,
        private_key: str,
        known_hosts: str,
        port: int = 22,
        passphrase: str | None = None,
        connect_timeout: float = 10.0,
        command_timeout: float = 60.0,
        retries: int = 5,
        max_connections: int = 2,
        max_sessions: int = 6,
        env: Mapping[str, str] | None = None,
    ) -> None:
        if not host:
            raise TransportError("the SSH transport needs a host")
        if not user:
            raise TransportError("the SSH transport needs a user")
        if not (known_hosts or "").strip():
            raise TransportError(
                f"no known_hosts entry for {host}: store the login node's host key with the "
                "backend (the check action shows the key the server presents)"
            )
        self.host, self.port, self.user = host, int(port), user
        self.command_timeout = command_timeout
        self.retries = retries
        self.env = dict(env or {})
        material = "\0".join([private_key, passphrase or "", known_hosts]).encode()
        self.key = (
            f"ssh:{user}@{host}:{self.port}:{hashlib.sha256(material).hexdigest()[:16]}"
            f":{max_connections}x{max_sessions}"
        )

        def make() -> SSHPool:
            return SSHPool(
                host=host,
                port=self.port,
                user=user,
                pkey=load_private_key(private_key, passphrase),
                known_hosts=known_hosts,
                connect_timeout=connect_timeout,
                retries=retries,
                max_connections=max_connections,
                max_sessions=max_sessions,
            )

        self.pool = pool_for(self.key, make)
        self._home: str | None = None

    # -- commands -------------------------------------------------------------------------

    def command_line(self, argv: Sequence[str], env: Mapping[str, str] | None = None) -> str:
        words = [shlex.quote(str(a)) for a in argv]
        merged = {**self.env, **(env or {})}
        if merged:
            words = ["env", *(shlex.quote(f"{k}={v}") for k, v in merged.items()), *words]
        return " ".join(words)

    def run(
        self,
        argv: Sequence[str],
        *,
        input: bytes | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        command = self.command_line(argv, env)
        if input is None:
            command += " </dev/null"
        timeout = timeout or self.command_timeout
        delays = backoff_delays(self.retries + 6, base=0.05, cap=2.0)
        while True:
            with self.pool.channel_slot() as transport:
                try:
                    channel = self.pool.open_channel(transport)
                except TransportError:
                    if not delays:
                        raise
                    channel = None
                if channel is not None:
                    return self._exec(channel, command, input, timeout, argv[0])
            time.sleep(delays.pop(0))

    def _exec(
        self,
        channel: paramiko.Channel,
        command: str,
        input: bytes | None,
        timeout: float,
        name: str,
    ) -> CommandResult:
        try:
            channel.settimeout(timeout)
            channel.exec_command(command)
            if input is not None:
                # the command reads stdin to its end, so it cannot have closed the channel
                # before our EOF. Without input the command line says </dev/null instead:
                # an EOF sent after a fast command's channel closed is a protocol error for
                # which sshd drops the whole connection, and every channel on it.
                channel.sendall(input)
                channel.shutdown_write()
            stdout = channel.makefile("rb").read()
            stderr = channel.makefile_stderr("rb").read()
            deadline = time.monotonic() + timeout
            while not channel.exit_status_ready():
                if time.monotonic() > deadline:
                    raise TimeoutError()
                channel.status_event.wait(0.1)
            code = channel.recv_exit_status()
        except TimeoutError as exc:
            raise TransportError(
                f"{name} on {self.host} did not answer within {timeout:g} s", retryable=True
            ) from exc
        except (paramiko.SSHException, OSError, EOFError) as exc:
            raise TransportError(
                f"the SSH connection to {self.host} failed during {name}: {exc}", retryable=True
            ) from exc
        finally:
            channel.close()
        return CommandResult(
            code, stdout.decode("utf-8", "replace"), stderr.decode("utf-8", "replace")
        )

    # -- files ----------------------------------------------------------------------------

    @contextlib.contextmanager
    def _sftp(self) -> Iterator[paramiko.SFTPClient]:
        delays = backoff_delays(self.retries + 6, base=0.05, cap=2.0)
        while True:
            with self.pool.channel_slot() as transport:
                try:
                    sftp = paramiko.SFTPClient.from_transport(transport)
                except (paramiko.SSHException, OSError, EOFError) as exc:
                    self.pool.channels_refused += 1  # refused, or the connection died
                    if not delays:
                        raise TransportError(
                            f"cannot open SFTP to {self.host}: {exc}", retryable=True
                        ) from exc
                    sftp = None
                if sftp is not None:
                    try:
                        channel = sftp.get_channel()
                        assert channel is not None  # an SFTP client opened on a transport has one
                        channel.settimeout(self.command_timeout)
                        yield sftp
                        return
                    except (paramiko.SSHException, OSError, EOFError) as exc:
                        raise TransportError(
                            f"SFTP to {self.host} failed: {exc}", retryable=True
                        ) from exc
                    finally:
                        sftp.close()
            time.sleep(delays.pop(0))

    @staticmethod
    def _makedirs(sftp: paramiko.SFTPClient, path: str, made: set[str]) -> None:
        if path in made or path in ("", "/"):
            return
        try:
            if stat.S_ISDIR(sftp.stat(path).st_mode or 0):
                made.add(path)
                return
        except FileNotFoundError:
            pass
        SSHTransport._makedirs(sftp, posixpath.dirname(path), made)
        try:
            sftp.mkdir(path, mode=0o700)
        except OSError:
            if not stat.S_ISDIR(sftp.stat(path).st_mode or 0):
                raise
        made.add(path)

    def write_files(self, files: Sequence[FileSpec]) -> None:
        if not files:
            return
        with self._sftp() as sftp:
            made: set[str] = set()
            for spec in files:
                self._makedirs(sftp, posixpath.dirname(spec.path), made)
                tmp = f"{spec.path}.{uuid.uuid4().hex[:8]}.part"
                with sftp.open(tmp, "wb") as fh:
                    sftp.chmod(tmp, spec.mode)
                    fh.set_pipelined(True)
                    fh.write(spec.data)
                sftp.posix_rename(tmp, spec.path)

    def put_tree(self, local_dir: str, remote_dir: str) -> None:
        with self._sftp() as sftp:
            try:
                sftp.stat(remote_dir)
                return  # staged before (names carry a content signature)
            except FileNotFoundError:
                pass
            made: set[str] = set()
            parent = posixpath.dirname(remote_dir)
            self._makedirs(sftp, parent, made)
            tmp = f"{remote_dir}.{uuid.uuid4().hex[:8]}.part"
            sftp.mkdir(tmp, mode=0o700)
            for dirpath, dirnames, filenames in os.walk(local_dir):
                rel = os.path.relpath(dirpath, local_dir)
                base = tmp if rel == "." else posixpath.join(tmp, *rel.split(os.sep))
                for name in sorted(dirnames):
                    if os.path.islink(os.path.join(dirpath, name)):
                        raise TransportError(f"symbolic link in the case: {rel}/{name}")
                    sftp.mkdir(posixpath.join(base, name), mode=0o700)
                for name in sorted(filenames):
                    src = os.path.join(dirpath, name)
                    if os.path.islink(src) or not os.path.isfile(src):
                        raise TransportError(f"not a regular file in the case: {rel}/{name}")
                    sftp.put(src, posixpath.join(base, name), confirm=False)
            try:
                sftp.posix_rename(tmp, remote_dir)
            except OSError:
                # staged by someone else meanwhile: drop ours
                self.run(["rm", "-rf", "--", tmp])
                sftp.stat(remote_dir)

    def exists(self, path: str) -> bool:
        with self._sftp() as sftp:
            try:
                sftp.stat(path)
                return True
            except FileNotFoundError:
                return False

    def home(self) -> str:
        if self._home is None:
            with self._sftp() as sftp:
                self._home = sftp.normalize(".")
        return self._home

    def close(self) -> None:
        return None  # pooled connections outlive a transport object
