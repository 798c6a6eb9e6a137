"""The package metadata says what the code needs: every folder with an __init__.py is a listed
package, and every third-party module the product imports comes from a distribution pyproject.toml
names itself (base or an extra), not one that only happens to arrive through another package."""
from __future__ import annotations

import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

from tests.helpers import imports

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
FOLDERS = PYPROJECT["tool"]["setuptools"]["package-dir"]


def test_every_package_folder_is_listed():
    found = set()
    for name, folder in FOLDERS.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            found.add(".".join([name, *rel.parts]))
    assert found == set(PYPROJECT["tool"]["setuptools"]["packages"])


def _name(req: str) -> str:
    return re.split(r"[\s\[<>=!~;]", req, maxsplit=1)[0].lower().replace("_", "-")


def test_every_third_party_import_is_declared():
    project = PYPROJECT["project"]
    declared = {_name(r) for r in project["dependencies"]}
    for extra, reqs in project["optional-dependencies"].items():
        if extra != "dev":
            declared |= {_name(r) for r in reqs if not r.startswith("jaxmem")}
    dists = {k: {d.lower().replace("_", "-") for d in v} for k, v in packages_distributions().items()}
    missing = {}
    for folder in ("app", "core", "ingest", "evaluators"):
        for path in (ROOT / folder).rglob("*.py"):
            for mod in imports(path):
                top = mod.split(".")[0]
                if top in sys.stdlib_module_names or top == "jaxmem" or top == "__future__":
                    continue
                if not dists.get(top, set()) & declared:
                    missing.setdefault(top, []).append(path.relative_to(ROOT).as_posix())
    assert not missing, f"imported but not declared in pyproject.toml: {missing}"
