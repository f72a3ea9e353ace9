"""What skills cost: HCP load time with and without them, and prompt size saved by disclosure.

Loads the shipped ``venti`` example as it is (four built-in skills, used by
L1-L3) and a baseline copy with ``skills.builtin = false`` and no adapter
skills, in the same run; prints medians and the ratio. Then compares the
size of L2's catalog with what putting every L2 skill body in the prompt
would cost. Ends with one JSON line of the figures.

    python bench/skills_load.py [--rounds N]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from mol.hcp.loader import load
from mol.plugins.catalog import adapter_skills, catalog_text

EXAMPLES = Path(__file__).resolve().parents[1] / "hcp" / "examples"


def _baseline(folder: Path) -> Path:
    """A copy of venti.toml without skills: no adapter lists any, built-ins off."""
    text = (EXAMPLES / "venti.toml").read_text()
    lines = [line for line in text.splitlines() if not line.startswith("skills = ")]
    path = folder / "venti-noskills.toml"
    path.write_text("\n".join(lines) + "\n[skills]\nbuiltin = false\n")
    return path


def _median_ms(path: Path, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        load(path)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "examples"
        shutil.copytree(EXAMPLES, folder)
        with_skills, without = folder / "venti.toml", _baseline(folder)
        load(with_skills), load(without)  # warm imports (YAML, pydantic) before timing
        skills_ms = _median_ms(with_skills, args.rounds)
        base_ms = _median_ms(without, args.rounds)
        artifact = load(with_skills)
    catalog = len(catalog_text(artifact, "L2").encode())
    bodies = sum(len(s.body.encode()) for s in adapter_skills(artifact, "L2"))
    print(f"HCP load, venti with 4 skills:    median {skills_ms:.2f} ms ({args.rounds} rounds)")
    print(f"HCP load, baseline without skills: median {base_ms:.2f} ms")
    print(f"ratio with/without: {skills_ms / base_ms:.2f}x (+{skills_ms - base_ms:.2f} ms)")
    print(f"L2 prompt: catalog {catalog} bytes vs all bodies up front {bodies} bytes "
          f"({bodies / catalog:.1f}x)")
    print(json.dumps({"load_ms_skills": round(skills_ms, 3), "load_ms_baseline": round(base_ms, 3),
                      "load_ratio": round(skills_ms / base_ms, 3), "l2_catalog_bytes": catalog,
                      "l2_bodies_bytes": bodies}))


if __name__ == "__main__":
    main()
