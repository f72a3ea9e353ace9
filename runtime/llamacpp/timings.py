"""What the local engine evaluated for each request, from llama.cpp's own performance counters.

A request to the local engine may evaluate its prompt more than once: ``mol-chatml-tools``
asks the model to choose between a message and a tool call, then for the call's arguments
or (without the tools) for the message. Each of those runs ``Llama.generate`` once; a
``Meter`` wraps an adapter's ``generate`` and keeps one ``Evaluation`` per run, read from
llama.cpp's counters (``llama_perf_context``: ``n_p_eval`` prompt tokens decoded in batches,
``n_eval`` single-token decodes, and their milliseconds), reset at the start of each run.

llama.cpp counts a batch of one token as a single-token decode, which is what a prompt
whose every token but the last is already in the KV cache costs; since each token the model
samples, but the last, is decoded once afterwards, the prompt's share of the decodes is
``n_p_eval + n_eval - (sampled - 1)``. (``llama_perf_context`` reports a count of 0 as 1;
its time, 0, tells.)

A response then reports them the way llama.cpp's own server does (``timings``: ``cache_n``,
``prompt_n``, ``prompt_ms``, ``predicted_n``, ``predicted_ms`` and their rates) and the way
OpenAI's API does (``usage.prompt_tokens_details.cached_tokens``): ``prompt_tokens`` and
``cache_n`` describe the request's own prompt (its first evaluation: the conversation, and
the tools when it has them), ``prompt_n`` and ``predicted_n`` everything the request cost.
This module works on the ``Llama`` object it is given and never imports llama_cpp
(``mol.runtime.llamacpp.server`` does, and hands the counters in).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

Counters = Callable[[], Any]
"""Reads llama.cpp's ``llama_perf_context_data`` of one context (``n_p_eval``, ``n_eval``,
``t_p_eval_ms``, ``t_eval_ms``)."""


@dataclass
class Evaluation:
    """One run of ``Llama.generate``: its prompt, and what it cost."""

    prompt_tokens: int
    """Tokens of the prompt it was given."""
    prompt_n: int = 0
    """Of those, the ones evaluated (the rest were reused from the KV cache or the prompt
    cache)."""
    prompt_ms: float = 0.0
    predicted_n: int = 0
    """Tokens sampled."""
    predicted_ms: float = 0.0

    @property
    def cache_n(self) -> int:
        """Prompt tokens reused, not evaluated."""
        return max(0, self.prompt_tokens - self.prompt_n)

    def read(self, counters: Any, sampled: int) -> None:
        """Take llama.cpp's counters after the ``sampled``-th token was sampled."""
        # llama_perf_context reports each count as at least 1 (its printer divides by them):
        # a count with no time spent is none.
        batched = counters.n_p_eval if counters.t_p_eval_ms > 0 else 0
        single = counters.n_eval if counters.t_eval_ms > 0 else 0
        self.prompt_n = batched + single - (sampled - 1)
        self.prompt_ms = counters.t_p_eval_ms
        self.predicted_n = sampled
        self.predicted_ms = counters.t_eval_ms


class Meter:
    """The evaluations of one adapter's ``Llama`` since ``start`` (requests run one at a time,
    so those are the current request's)."""

    def __init__(self, llama: Any, counters: Counters, reset: Callable[[], None]) -> None:
        self.evaluations: list[Evaluation] = []
        generate = llama.generate

        def metered(tokens: Any, *args: Any, **kwargs: Any) -> Iterator[int]:
            reset()
            evaluation = Evaluation(len(tokens))
            self.evaluations.append(evaluation)
            sampled = 0
            for token in generate(tokens, *args, **kwargs):
                sampled += 1
                # Read at every token: the caller stops iterating whenever it has enough.
                evaluation.read(counters(), sampled)
                yield token

        llama.generate = metered  # Llama._create_completion calls self.generate

    def start(self) -> None:
        """Forget the evaluations of the previous request."""
        self.evaluations.clear()

    def timings(self) -> dict[str, Any]:
        """The request's ``timings``, in the shape of llama.cpp's server."""
        first = self.evaluations[0] if self.evaluations else Evaluation(0)
        prompt_n = sum(e.prompt_n for e in self.evaluations)
        prompt_ms = sum(e.prompt_ms for e in self.evaluations)
        predicted_n = sum(e.predicted_n for e in self.evaluations)
        predicted_ms = sum(e.predicted_ms for e in self.evaluations)
        return {"cache_n": first.cache_n, "prompt_n": prompt_n, "prompt_ms": prompt_ms,
                **_rates("prompt", prompt_n, prompt_ms),
                "predicted_n": predicted_n, "predicted_ms": predicted_ms,
                **_rates("predicted", predicted_n, predicted_ms)}

    def usage(self, reported: dict[str, Any] | None = None) -> dict[str, Any]:
        """OpenAI's ``usage`` of the request: the prompt is the request's own (the stock chat
        formats report the last evaluation's, or a sum over several), ``cached_tokens`` what
        of it was reused; the completion tokens as ``reported``, else every token sampled."""
        first = self.evaluations[0] if self.evaluations else Evaluation(0)
        completion = (reported or {}).get("completion_tokens")
        if completion is None:
            completion = sum(e.predicted_n for e in self.evaluations)
        return {"prompt_tokens": first.prompt_tokens, "completion_tokens": completion,
                "total_tokens": first.prompt_tokens + completion,
                "prompt_tokens_details": {"cached_tokens": first.cache_n}}


def _rates(part: str, n: int, ms: float) -> dict[str, float]:
    return {f"{part}_per_token_ms": ms / n if n else 0.0,
            f"{part}_per_second": 1000.0 * n / ms if ms else 0.0}
