"""Task images: built from a task's ``environment/`` with the Docker engine, cached by digest.

The tag is ``mol-task:<digest>`` of the build context's files, so an unchanged environment
is built once per Docker engine, tasks with identical environments share one image, and an
edited one gets a new tag. Base images must be on the engine already (``FROM
mol-sandbox:bookworm``): nothing is pulled. A task without an ``environment/Dockerfile``
runs in the HCP's ``[sandbox] image``.
"""

from __future__ import annotations

from collections.abc import Callable

import anyio

from mol.eval.tasks import Task
from mol.hcp.digest import digest_tree

LABEL = "org.mol.task"
"""Label of a task image: the name of the task it was first built for."""

_locks: dict[str, anyio.Lock] = {}


def image_tag(task: Task) -> str | None:
    """The tag of ``task``'s image, or ``None`` when it has no ``environment/``."""
    if task.environment is None:
        return None
    return f"mol-task:{digest_tree(task.environment)[7:23]}"


async def ensure_image(task: Task, default: str,
                       progress: Callable[[str], None] = lambda line: None) -> str:
    """The image ``task`` runs in: built (once, under the task's build timeout) when it has
    an environment and the engine lacks its tag, else ``default``."""
    from mol.sandboxes import docker

    tag = image_tag(task)
    if tag is None or task.environment is None:
        return default
    async with _locks.setdefault(tag, anyio.Lock()):
        if await docker.call(docker.image_exists, tag, what=f"look up image {tag}"):
            return tag
        progress(f"building {tag} for task {task.name}")

        def step(line: str) -> None:  # the build's steps, not every line it logs
            if line.startswith("Step "):
                progress(f"  {line[:120]}")

        await docker.call(docker.build_image, str(task.environment), tag,
                          labels={LABEL: task.name}, progress=step,
                          what=f"build the image of task {task.name}",
                          deadline=task.config.build_timeout)
        progress(f"built {tag}")
    return tag
