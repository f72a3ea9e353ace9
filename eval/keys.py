"""What an eval result is keyed by, and when a stored one may stand in for running it again.

A result (one episode's row) holds for a task and epoch under a **key**: the HCP's behaviour
digest (``Artifact.behaviour_digest``: the document without its deployment fields, so
moving the engine keeps results), the task's digest (its files), the epoch, the engine's
**model fingerprint** and mol's version. Nothing is reused across a different key:
``reusable`` says whether a stored row still holds. The one exception is explicit: a row
``mol evolve`` *inherited* from a parent run (``Episode.inherited``) ran under the parent's
behaviour, and stands for the candidate because the slice analysis showed the candidate
cannot change that episode; it still needs the same task digest, model and mol version.

The model fingerprint is ``models:`` + a digest of what the engine's ``GET /v1/models``
lists for the adapters' engine names (id, root, parent, max_model_len, owned_by; never
``created``, which is the engine's start time), or ``hcp:`` + a digest of what the HCP says
of the model (base, model prefix, engine names, local model files) when the engine does not
list them (and always for ``engine.kind = "local"``, whose model is the HCP's).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mol.core import __version__
from mol.core.errors import EvalError
from mol.hcp.digest import digest_value

MODEL_FIELDS = ("id", "root", "parent", "max_model_len", "owned_by")


@dataclass(frozen=True)
class ResultKey:
    """What a result of one (task, epoch) holds under, besides the task's digest."""

    behaviour_digest: str
    model: str
    mol_version: str = __version__


def reusable(row: Any, task_digest: str, key: ResultKey) -> bool:
    """Whether the stored ``row`` (an ``Episode``) is a result under ``key`` for the task's
    current folder (``task_digest``)."""
    behaviour = row.behaviour_digest == key.behaviour_digest or bool(row.inherited)
    return (behaviour and row.task_digest == task_digest and row.model == key.model
            and row.mol_version == key.mol_version)


def engine_names(artifact: Any) -> list[str]:
    """The engine's names of the artifact's adapters, sorted."""
    doc = artifact.doc
    return sorted({doc.engine_name(name) for name in doc.adapters})


def hcp_fingerprint(artifact: Any) -> str:
    """The model as the HCP names it (when the engine does not list its models)."""
    engine, model = artifact.doc.engine, artifact.doc.model
    return "hcp:" + digest_value({
        "base": model.base, "prefix": engine.model_prefix, "names": engine_names(artifact),
        "kind": engine.kind, "local_model": engine.local_model,
        "local_loras": dict(engine.local_loras)})


async def model_fingerprint(artifact: Any, engine_url: str | None = None) -> str:
    """The fingerprint of the model the artifact's engine serves (see the module's text)."""
    from mol.runtime import LiteLLMEngine

    if artifact.doc.engine.kind == "local":
        return hcp_fingerprint(artifact)
    listed = await LiteLLMEngine.from_artifact(artifact, engine_url).models()
    names = set(engine_names(artifact))
    served = sorted(({k: entry.get(k) for k in MODEL_FIELDS} for entry in listed or []
                     if entry.get("id") in names), key=lambda e: str(e["id"]))
    return "models:" + digest_value(served) if served else hcp_fingerprint(artifact)


def claim(store: Any, artifact: Any, agent: str, adapter: str | None,
          extra: dict[str, Any]) -> None:
    """Make ``store``'s folder a run of the artifact's behaviour, agent and adapter pin (or
    check that it is one). A folder written before behaviour digests existed is a run of its
    ``hcp_digest``, and holds only runs of that exact artifact."""
    found = store.meta()
    if found.get("hcp_digest") not in (None, artifact.digest) and \
            "behaviour_digest" not in found:
        raise EvalError(f"{store.folder} holds another run (hcp_digest is "
                        f"{found['hcp_digest']!r}, not {artifact.digest!r}): give another --out")
    store.claim({"behaviour_digest": artifact.behaviour_digest, "agent": agent,
                 "adapter": adapter or ""}, {"hcp_digest": artifact.digest, **extra})
