"""The one module that imports the Docker SDK; every Docker error is translated here.

Functions here are blocking. Async code calls them through ``call``, which runs
them in a worker thread under a deadline and turns every SDK, HTTP or socket
error into a ``SandboxError`` (keeping the cause)::

    docker.errors.ImageNotFound / NotFound   -> SandboxError (names what is missing)
    no engine answering                      -> DockerUnavailable
    deadline passed                          -> SandboxTimeout
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import socket
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import anyio

from mol.core.errors import DockerUnavailable, SandboxError, SandboxTimeout

T = TypeVar("T")

DEADLINE = 60.0
"""Seconds any single Docker API call may take before ``SandboxTimeout``."""

_lock = threading.Lock()
_client: Any = None


def client() -> Any:
    """The process's Docker client, created (and pinged) on first use."""
    global _client
    with _lock:
        if _client is None:
            import docker

            with translated("connect to the Docker engine"):
                candidate = docker.from_env(timeout=int(DEADLINE), max_pool_size=64)
                candidate.ping()
            _client = candidate
        return _client


def engine_address() -> str:
    """Where the Docker engine is expected (for error messages)."""
    return os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"


@contextmanager
def translated(what: str) -> Iterator[None]:
    """Translate Docker SDK and transport errors raised while doing ``what``."""
    import docker.errors
    import requests.exceptions

    try:
        yield
    except SandboxError:
        raise
    except docker.errors.NotFound as exc:
        raise SandboxError(f"cannot {what}: {_explain(exc)}") from exc
    except docker.errors.APIError as exc:
        raise SandboxError(f"cannot {what}: {_explain(exc)}") from exc
    except (requests.exceptions.ConnectionError, FileNotFoundError, ConnectionError) as exc:
        raise DockerUnavailable(
            f"no Docker engine answers at {engine_address()} (cannot {what}): "
            "start dockerd or set DOCKER_HOST") from exc
    except requests.exceptions.Timeout as exc:
        raise SandboxTimeout(f"the Docker engine did not answer in time (cannot {what})") from exc
    except docker.errors.DockerException as exc:
        if "Error while fetching server API version" in str(exc):
            raise DockerUnavailable(
                f"no Docker engine answers at {engine_address()}: start dockerd or set "
                "DOCKER_HOST") from exc
        raise SandboxError(f"cannot {what}: {exc}") from exc


def _explain(exc: Any) -> str:
    return str(getattr(exc, "explanation", None) or exc)


async def call(func: Callable[..., T], *args: Any, what: str, deadline: float = DEADLINE,
               **kwargs: Any) -> T:
    """Run a blocking Docker operation in a worker thread under ``deadline`` seconds."""

    def run() -> T:
        with translated(what):
            return func(*args, **kwargs)

    try:
        with anyio.fail_after(deadline):
            return await anyio.to_thread.run_sync(run, abandon_on_cancel=True)
    except TimeoutError as exc:
        raise SandboxTimeout(f"cannot {what}: no answer within {deadline:g} s") from exc


# -- images ---------------------------------------------------------------------------


def inspect_image(name: str) -> dict[str, Any]:
    """The image's attributes, or a ``SandboxError`` saying how to get it."""
    import docker.errors

    try:
        return client().api.inspect_image(name)
    except docker.errors.ImageNotFound as exc:
        raise SandboxError(
            f"sandbox image {name!r} is not on this Docker engine: build the default one "
            "with 'mol sandbox image build', or set [sandbox] image to one you have") from exc


def image_exists(name: str) -> bool:
    """Whether the engine has an image called ``name``."""
    import docker.errors

    try:
        client().api.inspect_image(name)
    except docker.errors.ImageNotFound:
        return False
    return True


def read_image_file(image: str, path: str, labels: dict[str, str],
                    limit: int = 1 << 20) -> bytes | None:
    """A tar archive of a file or folder of an image (``/etc/passwd``, a task's working
    folder), read from a never-started container; ``None`` when the image has no such path.
    The container carries ``labels`` (the owner's: one a killed runtime left is an orphan)."""
    api = client().api
    container = api.create_container(image, command=["true"], network_disabled=True,
                                     labels=labels)["Id"]
    try:
        data, _ = get_archive(container, path, limit)
        return data
    except SandboxError:
        return None
    finally:
        api.remove_container(container, force=True, v=True)


def import_image(chunks: Iterable[bytes], tag: str, changes: list[str]) -> str:
    """Import a root filesystem tar stream as image ``tag``; returns the engine's reply."""
    from docker.utils import parse_repository_tag

    repository, version = parse_repository_tag(tag)
    # A generator is sent with chunked transfer encoding: the tar never sits in memory.
    reply = client().api.import_image(src=iter(chunks), repository=repository, tag=version,
                                      changes=changes, stream_src=True)
    return reply if isinstance(reply, str) else json.dumps(reply)


def build_image(context: str, tag: str, *, labels: dict[str, str] | None = None,
                progress: Callable[[str], None] = lambda line: None) -> str:
    """Build ``context``'s Dockerfile as ``tag`` (base images must be local: nothing is
    pulled); each line of the build log goes to ``progress``. Returns the image id."""
    api = client().api
    tail: list[str] = []
    image_id = ""
    for chunk in api.build(path=context, tag=tag, rm=True, forcerm=True, pull=False,
                           decode=True, labels=labels or {}):
        if "error" in chunk:
            log = "\n".join(tail[-15:])
            raise SandboxError(f"building image {tag} failed: {str(chunk['error']).strip()}"
                               + (f"\n{log}" if log else ""))
        image_id = (chunk.get("aux") or {}).get("ID", image_id)
        for line in str(chunk.get("stream", "")).splitlines():
            if line.strip():
                tail = [*tail[-30:], line.rstrip()]
                progress(line.rstrip())
    return image_id or api.inspect_image(tag)["Id"]


# -- containers -----------------------------------------------------------------------


def create_container(image: str, **kwargs: Any) -> str:
    """Create (not start) a container; returns its id."""
    from docker.types import DriverConfig, Mount

    mounts = [Mount(m["target"], None, type="volume",
                    driver_config=DriverConfig("local", m["driver_opts"]))
              for m in kwargs.pop("volume_mounts", [])]
    return client().containers.create(image, mounts=mounts, **kwargs).id


def start_container(container: str) -> None:
    """Start a created container."""
    client().api.start(container)


def remove_container(container: str) -> None:
    """Remove a container and its anonymous volumes, whatever its state; gone is fine."""
    import docker.errors

    try:
        client().api.remove_container(container, force=True, v=True)
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as exc:
        if "already in progress" not in str(exc):
            raise


def rename_container(container: str, name: str) -> None:
    """Give a container a new name."""
    client().api.rename(container, name)


def kill_container(container: str) -> None:
    """SIGKILL a container's init from outside: every process in it ends at once."""
    import docker.errors

    try:
        client().api.kill(container)
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as exc:
        if "is not running" not in str(exc):
            raise


def container_state(container: str) -> dict[str, Any]:
    """The container's ``State`` (``Running``, ``ExitCode``, ``OOMKilled`` ...)."""
    return client().api.inspect_container(container)["State"]


def list_containers(label: str) -> list[dict[str, Any]]:
    """Every container (running or not) carrying ``label``: ``Id``, ``Labels``, ``State``."""
    return client().api.containers(all=True, filters={"label": label})


def _raw_socket(response_socket: Any) -> socket.socket:
    """Our own socket for an upgraded (hijacked) Docker connection."""
    raw = getattr(response_socket, "_sock", response_socket)
    if not isinstance(raw, socket.socket):
        raise SandboxError("the Docker connection is not a plain socket (ssh:// or npipe "
                           "engines are not supported for sandboxes)")
    own = raw.dup()
    # Drop the SDK's handles on the connection; ``own`` keeps it open.
    for handle in (getattr(response_socket, "_response", None), response_socket):
        with contextlib.suppress(Exception):
            if handle is not None:
                handle.close()
    return own


def attach_socket(container: str) -> socket.socket:
    """A socket to the main process's stdin and (multiplexed) stdout and stderr."""
    sock = client().api.attach_socket(
        container, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1})
    return _raw_socket(sock)


def exec_socket(container: str, command: list[str], *, user: str, workdir: str,
                environment: dict[str, str]) -> socket.socket:
    """Start ``command`` in the container; a socket to its stdin and multiplexed output."""
    api = client().api
    exec_id = api.exec_create(container, command, stdin=True, stdout=True, stderr=True,
                              tty=False, user=user, workdir=workdir,
                              environment=environment)["Id"]
    return _raw_socket(api.exec_start(exec_id, socket=True))


def exec_run(container: str, command: list[str], *, user: str = "") -> tuple[int, bytes]:
    """Run a command to completion the ``docker exec`` way; returns (exit code, output)."""
    result = client().containers.get(container).exec_run(command, user=user)
    return result.exit_code, result.output


# -- networks -------------------------------------------------------------------------


def create_network(name: str, *, internal: bool, labels: dict[str, str]) -> str:
    """Create a bridge network (``internal``: no route out of it); returns its id."""
    return client().api.create_network(name, driver="bridge", internal=internal,
                                       labels=labels, check_duplicate=True)["Id"]


def connect_network(network: str, container: str, aliases: list[str]) -> None:
    """Attach a container to a network under ``aliases`` (names others there resolve)."""
    client().api.connect_container_to_network(container, network, aliases=aliases)


def remove_network(network: str) -> None:
    """Remove a network; gone is fine."""
    import docker.errors

    try:
        client().api.remove_network(network)
    except docker.errors.NotFound:
        pass


def list_networks(label: str) -> list[dict[str, Any]]:
    """Every network carrying ``label``: ``Id``, ``Name``, ``Labels``."""
    return client().api.networks(filters={"label": label})


def container_address(container: str, network: str) -> str:
    """A container's IP address on one of its networks."""
    networks = client().api.inspect_container(container)["NetworkSettings"]["Networks"]
    return networks[network]["IPAddress"]


# -- files ----------------------------------------------------------------------------


def path_stat(container: str, path: str) -> dict[str, Any] | None:
    """Docker's stat of ``path`` in the container (``mode``, ``linkTarget``); ``None`` if absent."""
    api = client().api
    response = api.head(api._url("/containers/{0}/archive", container), params={"path": path})
    if response.status_code == 404:
        return None
    api._raise_for_status(response)
    header = response.headers.get("X-Docker-Container-Path-Stat", "")
    return json.loads(base64.b64decode(header)) if header else None


def put_archive(container: str, directory: str, data: bytes) -> None:
    """Extract a tar archive into ``directory`` of the container."""
    client().api.put_archive(container, directory, data)


def get_archive(container: str, path: str, limit: int) -> tuple[bytes, dict[str, Any]]:
    """A tar archive of ``path``; ``SandboxError`` when it exceeds ``limit`` bytes."""
    stream, stat = client().api.get_archive(container, path, chunk_size=None)
    data = bytearray()
    for chunk in stream:
        data += chunk
        if len(data) > limit:
            close = getattr(stream, "close", None)
            if close:
                close()
            raise SandboxError(f"{path} is larger than {limit} bytes")
    return bytes(data), stat


MODE_SYMLINK = 1 << 27
"""Go's ``os.ModeSymlink`` bit in the ``mode`` of Docker's path stats."""

MODE_DIR = 1 << 31
"""Go's ``os.ModeDir`` bit in the ``mode`` of Docker's path stats."""
