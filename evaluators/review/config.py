"""`[tool.jaxmem]` in pyproject.toml: select, ignore, exclude, max-file-size, include-tests."""
from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

KEYS = ("select", "ignore", "exclude", "max-file-size", "include-tests", "show-possible", "baseline")
DEFAULT_MAX_BYTES = 1_000_000  # larger .py files are generated code, not something to review


class ConfigError(ValueError):
    """A bad [tool.jaxmem] section: names the file, the key and the valid choices."""


@dataclass
class ReviewConfig:
    select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    max_file_size: int = DEFAULT_MAX_BYTES
    include_tests: bool = False  # review tests/, test_*.py, *_test.py, conftest.py inside directories
    show_possible: bool = False  # also findings whose premises were not proven
    baseline: str | None = None  # a baseline file of accepted findings (relative to the pyproject)
    source: Path | None = None


def find_pyproject(start: Path) -> Path | None:
    start = start.resolve()
    for d in [start, *start.parents] if start.is_dir() else [start.parent, *start.parent.parents]:
        candidate = d / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def _str_list(value: object, key: str, path: Path) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    raise ConfigError(f"{path}: [tool.jaxmem] {key} must be a string or a list of strings, got {value!r}")


def load(path: Path | None) -> ReviewConfig:
    if path is None:
        return ReviewConfig()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the configuration: {exc}") from exc
    section = data.get("tool", {}).get("jaxmem", {})
    if not isinstance(section, dict):
        raise ConfigError(f"{path}: [tool.jaxmem] must be a table")
    review = section.get("review", {})
    if not isinstance(review, dict):
        raise ConfigError(f"{path}: [tool.jaxmem.review] must be a table")
    for key in review:
        if key not in KEYS:
            raise ConfigError(f"{path}: unknown key [tool.jaxmem.review] {key!r}; valid keys: {', '.join(KEYS)}")
    # [tool.jaxmem] is shared with other jaxmem commands: read only this command's keys there.
    merged = {k: v for k, v in section.items() if k in KEYS}
    merged.update(review)
    cfg = ReviewConfig(source=path)
    for key, value in merged.items():
        if key in ("select", "ignore", "exclude"):
            setattr(cfg, key, _str_list(value, key, path))
        elif key == "max-file-size":
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ConfigError(f"{path}: [tool.jaxmem] max-file-size must be a positive number of bytes, got {value!r}")
            cfg.max_file_size = value
        elif key in ("include-tests", "show-possible"):
            if not isinstance(value, bool):
                raise ConfigError(f"{path}: [tool.jaxmem] {key} must be true or false, got {value!r}")
            setattr(cfg, key.replace("-", "_"), value)
        elif key == "baseline":
            if not isinstance(value, str) or not value:
                raise ConfigError(f"{path}: [tool.jaxmem] baseline must be a file path, got {value!r}")
            cfg.baseline = str(path.parent / value)
    return cfg
