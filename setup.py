"""Map the top-level code folders into the one ``mol`` import namespace.

Subpackages are discovered, never listed by hand: a hand-written list once
dropped a subpackage from the wheel without anyone noticing.
"""

import tomllib
from pathlib import Path

from setuptools import find_packages, setup

FLOORS = tomllib.loads(Path(__file__).with_name("pyproject.toml").read_text())["tool"]["mol"]["floors"]
ROOTS = [folder for floor in FLOORS for folder in floor]
"""The code folders, from ``[tool.mol] floors`` in pyproject.toml (the one list of them)."""

packages: list[str] = []
package_dir: dict[str, str] = {}
for root in ROOTS:
    packages.append(f"mol.{root}")
    package_dir[f"mol.{root}"] = root
    packages += [f"mol.{root}.{sub}" for sub in find_packages(root)]

setup(
    packages=packages,
    package_dir=package_dir,
    package_data={
        "mol.hcp": ["schema.json", "examples/*.toml", "examples/**/*"],
        "mol.skills": ["**/*"],
        "mol.sandboxes": ["**/*.sh"],
        "mol.genui": ["node/*.json", "node/*.mjs", "node/*.js", "stubs/*", "examples/*"],
        "mol.eval": ["examples/**/*"],
    },
    include_package_data=True,
)
