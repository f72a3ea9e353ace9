"""A sandbox: one hardened, long-lived container with a persistent shell, owned by ``async with``.

::

    async with open_sandbox(artifact.doc.sandbox, session_id=sid) as sandbox:
        result = await sandbox.run("pytest -q", timeout=60)
        await sandbox.write_file("notes.txt", b"...")

Every Docker call runs in a worker thread under a deadline (``docker.call``).
The container is removed when the ``async with`` ends, even on cancellation;
if the process dies first, the container's owner labels let ``gc_orphans``
remove it at the next start.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import anyio

from mol.core import tracing
from mol.core.errors import SandboxError, ShellDied
from mol.hcp.schema import SandboxConfig
from mol.sandboxes import docker, owner
from mol.sandboxes.control import EVERY, Control
from mol.sandboxes.egress import Gateway, proxy_environment
from mol.sandboxes.hardening import ENVIRONMENT, hardening
from mol.sandboxes.result import CommandResult
from mol.sandboxes.scripts import control_argv, shell_argv
from mol.sandboxes.shell import KILL_DEADLINE, Shell
from mol.sandboxes.stream import MuxSocket
from mol.sandboxes.transfer import SandboxFiles

STARTUP_DEADLINE = 30.0
"""Seconds a new shell may take to answer its first command."""

LOCK_WAIT = 30.0
"""Seconds ``close`` waits for a running command to end before removing the container."""


class Sandbox(SandboxFiles):
    """A running sandbox container with its control shell and command shell.

    ``mounts``: more writable folders besides the workspace and ``/tmp`` (an eval task's
    ``/tests`` and ``/logs``). ``seed``: copy what the image holds at the workspace path
    into the workspace (the workspace volume hides it otherwise). ``image``: the image's
    inspect data, when the caller has it already (one Docker call fewer).
    """

    def __init__(self, config: SandboxConfig | None = None, *, session_id: str | None = "",
                 mounts: Sequence[str] = (), seed: bool = False,
                 image: dict[str, Any] | None = None) -> None:
        self.config = config or SandboxConfig()
        self._image = image
        self.session_id = session_id
        """The session it belongs to; ``None`` for a pool's sandbox nobody has taken yet."""
        self.mounts = tuple(mounts)
        self.seed = seed
        self.id = ""
        """The container id (empty until started)."""
        self.uid = self.gid = 0
        self._control: Control | None = None
        self._shell: Shell | None = None
        self._lock = anyio.Lock()
        self._lost = False
        """The sandbox stopped answering and its container was killed: replace it."""
        self._gateway: Gateway | None = None

    @property
    def workspace(self) -> str:
        """The writable working directory inside the container."""
        return self.config.workspace

    def tokens(self) -> list[str]:
        """The marker tokens of its control and command shells (secrets no command sees)."""
        return [part.token for part in (self._control, self._shell) if part is not None]

    async def __aenter__(self) -> Sandbox:
        if not self.id:
            await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Create and start the container, then open its control and command shells."""
        from mol.sandboxes.users import resolve_user

        image = self._image or await docker.call(docker.inspect_image, self.config.image,
                                                 what=f"inspect image {self.config.image}")
        self.uid, self.gid = await resolve_user(self.config, image)
        token = Shell.new_token()
        if self.config.egress == "allowlist":
            self._gateway = Gateway(self.config)
            await self._gateway.start()
        try:
            self.id = await docker.call(
                docker.create_container, self.config.image, what="create a sandbox container",
                **self._create_options())
        except BaseException:
            await self._remove()
            raise
        try:
            # Attached before the start, the stream ends if the container exits at once.
            sock = await docker.call(docker.attach_socket, self.id, what="attach to the sandbox")
            self._control = Control(MuxSocket(sock), token)
            await docker.call(docker.start_container, self.id, what="start the sandbox")
            with anyio.fail_after(STARTUP_DEADLINE):
                await self._control.handshake()
            await self._new_shell()
            if self.seed:
                await self._seed(image["Id"])
        except BaseException as exc:
            await self.close()
            if isinstance(exc, ShellDied | TimeoutError):
                raise SandboxError(f"the sandbox in image {self.config.image} did not start "
                                   "(the image needs bash, and setpriv for a non-root user): "
                                   f"{exc}") from exc
            raise

    def _create_options(self) -> dict[str, Any]:
        options = {
            "entrypoint": ["bash"],
            "command": control_argv(),
            "stdin_open": True,
            "detach": True,
            "working_dir": self.workspace,
            "environment": ENVIRONMENT,
            "hostname": "sandbox",
            "name": owner.container_name(self.session_id),
            "labels": owner.labels("pool" if self.session_id is None else "session"),
            **hardening(self.config, uid=self.uid, gid=self.gid, mounts=self.mounts),
        }
        if self.config.egress == "none":
            options["network_mode"] = "none"
        elif self._gateway is not None:  # alone with its gateway on an internal network
            options["network_mode"] = self._gateway.network
            options["environment"] = {**ENVIRONMENT, **proxy_environment()}
        return options

    async def assign(self, session_id: str) -> None:
        """Hand a pool's sandbox to a session: its container is renamed after it."""
        self.session_id = session_id
        await docker.call(docker.rename_container, self.id, owner.container_name(session_id),
                          what="name the sandbox after its session")

    async def _new_shell(self) -> None:
        try:
            await self._open_shell()
        except (SandboxError, ShellDied):
            # No pid left for the new shell (a fork bomb): clear the sandbox, try once more.
            assert self._control is not None
            await self._control.sweep(EVERY, [])
            await self._open_shell()

    async def _open_shell(self) -> None:
        token = Shell.new_token()
        sock = await docker.call(
            docker.exec_socket, self.id, shell_argv(self.uid, self.gid),
            what="start the sandbox shell", user="0:0", workdir=self.workspace,
            environment={})
        assert self._control is not None
        shell = Shell(MuxSocket(sock), token, self._control,
                      pids_limit=self.config.pids_limit)
        try:
            await shell.handshake(STARTUP_DEADLINE)
        except BaseException:
            shell.close()
            raise
        self._shell = shell

    async def close(self) -> None:
        """Remove the container and everything in it; safe to call twice.

        A command still running gets ``LOCK_WAIT`` seconds to end first, so a sandbox is
        never removed under a command that another task is reading.
        """
        with anyio.CancelScope(shield=True):
            with anyio.move_on_after(LOCK_WAIT):
                async with self._lock:
                    await self._remove()
                    return
            await self._remove()

    async def _remove(self) -> None:
        if self._shell:
            self._shell.close()
        if self._control:
            self._control.close()
        self._shell = self._control = None
        container, self.id = self.id, ""
        gateway, self._gateway = self._gateway, None
        with anyio.CancelScope(shield=True):
            if container:
                await docker.call(docker.remove_container, container, what="remove the sandbox")
            if gateway is not None:
                await gateway.close()

    async def _kill(self) -> None:
        """Kill the container from outside (the Docker engine): every process in it ends."""
        self._lost = True
        with anyio.CancelScope(shield=True):
            try:
                await docker.call(docker.kill_container, self.id, what="kill the sandbox",
                                  deadline=KILL_DEADLINE)
            except SandboxError:
                pass  # removed when it is replaced or closed, which force-kills it anyway

    async def _replace(self) -> None:
        """A fresh container for a sandbox that stopped answering."""
        await self._remove()
        self._lost = False
        await self.start()

    async def run(self, command: str, *, timeout: float | None = None,  # noqa: ASYNC109 (kills in-sandbox processes)
                  on_output: Callable[[bytes], None] | None = None,
                  clean: bool = False) -> CommandResult:
        """Run ``command`` in the persistent shell (``cd`` and ``export`` carry over).

        ``timeout`` defaults to ``[sandbox] timeout_sec``; past it the command and
        every process it started are killed. ``on_output`` sees raw output as it
        arrives (for streaming); the result keeps at most ``max_output_bytes``. A
        sandbox that stopped answering is killed, and the next command runs in a fresh
        one (the result says so). ``clean``: run it in a bash of its own, from the
        workspace, with none of what earlier commands set (variables, functions,
        options, ``PATH``) and keeping nothing; the next ordinary command finds the
        state, ``$?`` too, as it was.
        """
        if "\0" in command:
            raise ValueError("a command cannot contain a NUL byte")
        if not self.id:
            raise SandboxError("the sandbox is not running")
        timeout = timeout or self.config.timeout_sec
        with tracing.span("sandbox", op="run", sandbox=self.id[:12], command=command,
                          timeout=timeout) as span:
            async with self._lock:
                replaced = self._lost
                if replaced:
                    await self._replace()
                fresh = self._shell is None or not self._shell.alive
                if fresh:
                    await self._new_shell()
                assert self._shell is not None and self._control is not None
                result = await self._shell.run(
                    command, timeout=timeout, limit=self.config.max_output_bytes,
                    on_output=on_output, clean=clean)
                if not self._control.alive:
                    await self._kill()
                if fresh or replaced:
                    result = dataclasses.replace(result, fresh_shell=fresh,
                                                 fresh_sandbox=replaced)
            span.note(result=result)
        return result


@contextlib.asynccontextmanager
async def open_sandbox(config: SandboxConfig | None = None, *, session_id: str = "",
                       pool: Any = None) -> AsyncIterator[Sandbox]:
    """A started sandbox for ``config``: taken from ``pool`` (a ``SandboxPool``) when one is
    given and serves these settings, else started cold."""
    config = config or SandboxConfig()
    if pool is not None and pool.serves(config):
        sandbox = await pool.acquire(session_id)
    else:
        sandbox = Sandbox(config, session_id=session_id)
    async with sandbox:
        yield sandbox
