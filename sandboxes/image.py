"""Build the default sandbox image offline: debootstrap a minimal Debian, import it.

No container registry is needed (there is none here, and users behind
firewalls have none either): ``debootstrap --variant=minbase`` fetches Debian
packages from a mirror, a ``mol`` user (uid 1000) and ``/workspace`` are
added in a chroot, and the tree is streamed as a tar into ``docker import``.
An imported image has no ``USER``, ``WORKDIR`` or ``ENV``: they are set with
``--change`` instructions. Needs root (debootstrap, chroot) and about 1.5
minutes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from mol.core.errors import SandboxError

DEFAULT_TAG = "mol-sandbox:bookworm"
SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
PACKAGES = ["python3", "git", "procps", "ca-certificates"]
"""On top of minbase (bash, coreutils, grep, sed, tar ...)."""

CHANGES = [
    "USER 1000:1000",
    "WORKDIR /workspace",
    "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "ENV LANG=C.UTF-8",
    'CMD ["/bin/bash"]',
    "LABEL org.mol.image=sandbox",
]
"""``docker import --change`` instructions: what a Dockerfile would have said."""

SETUP = (
    "useradd --create-home --uid 1000 --user-group --shell /bin/bash mol"
    " && mkdir -p /workspace && chown mol:mol /workspace"
    " && apt-get clean && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin"
)

Progress = Callable[[str], None]


def build(tag: str = DEFAULT_TAG, *, mirror: str = MIRROR,
          progress: Progress = lambda line: None) -> str:
    """Build the sandbox image ``tag``; returns its id. Blocking (run it in a thread)."""
    from mol.sandboxes import docker

    _check_host()
    started = time.monotonic()

    def say(message: str) -> None:
        progress(f"[{time.monotonic() - started:5.1f}s] {message}")

    with tempfile.TemporaryDirectory(prefix="mol-image-") as scratch:
        root = Path(scratch) / "root"
        say(f"debootstrap {SUITE} (minbase + {', '.join(PACKAGES)}) from {mirror}")
        _run(["debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}",
              SUITE, str(root), mirror], say)
        say("adding user mol (uid 1000) and /workspace")
        _run(["chroot", str(root), "/bin/sh", "-c", SETUP], say)
        say(f"importing into Docker as {tag}")
        with docker.translated(f"import image {tag}"):
            docker.import_image(_tar_chunks(root, say), tag, CHANGES)
        image_id = docker.inspect_image(tag)["Id"]
    say(f"built {tag} ({image_id[:19]})")
    return image_id


def _check_host() -> None:
    if os.geteuid() != 0:
        raise SandboxError("building the sandbox image needs root (debootstrap and chroot); "
                           "run 'sudo mol sandbox image build'")
    if not shutil.which("debootstrap"):
        raise SandboxError("debootstrap is not installed: apt-get install debootstrap")


def _run(command: list[str], say: Progress) -> None:
    """Run a build step, reporting its stages; ``SandboxError`` with its tail on failure."""
    tail: list[str] = []
    stage, count = "", 0
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, errors="replace") as process:
        assert process.stdout is not None
        for line in process.stdout:
            line = line.rstrip()
            tail = [*tail[-19:], line]
            if line.startswith(("E: ", "W: ")):
                say(line)
            if not line.startswith("I: "):
                continue
            # debootstrap says "I: Retrieving libc6 2.36-9" or "I: Unpacking libc6..." once
            # per package: count those instead of printing hundreds of lines.
            verb, _, rest = line[3:].partition(" ")
            words = rest.split()
            name = words[0].rstrip(".") if words else ""
            dots = rest.endswith("...")
            if verb in PER_PACKAGE and (len(words), dots) in ((2, False), (1, True)):
                count = count + 1 if verb == stage else 1
                stage = verb
                if count % 25 == 1:
                    say(f"{verb.lower()} packages: {count} ({name})")
            else:
                stage = ""
                say(line[3:])
    if process.returncode:
        raise SandboxError(f"{command[0]} failed (exit {process.returncode}):\n"
                           + "\n".join(tail))


PER_PACKAGE = ("Retrieving", "Validating", "Extracting", "Unpacking", "Configuring")


def _tar_chunks(root: Path, say: Progress) -> Iterator[bytes]:
    """The root filesystem as a tar stream (numeric owners kept), with progress."""
    with subprocess.Popen(["tar", "--numeric-owner", "-C", str(root), "-c", "."],
                          stdout=subprocess.PIPE) as process:
        assert process.stdout is not None
        sent, reported = 0, 0
        while chunk := process.stdout.read(1 << 20):
            sent += len(chunk)
            if sent - reported >= 64 << 20:
                reported = sent
                say(f"  {sent >> 20} MiB sent")
            yield chunk
    if process.returncode:
        raise SandboxError(f"tar of the image root failed (exit {process.returncode})")
