"""A user's run command (`jaxmem review PATH --run-cmd "python train.py --steps 5"`), read.

Only Python runs: `python SCRIPT [ARGS]` or `python -m MODULE [ARGS]`, after optional `NAME=VALUE`
environment assignments. The word `python` stands for the interpreter the operator configured
(JAXMEM_RUN_PYTHON, default the one running jaxmem); the script is a file of the reviewed tree,
which is the working directory. Nothing here runs anything: runner.run_command does, in the sandbox.
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from jaxmem.core.errors import UsageError

_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.S)
_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")
# Interpreter options that change nothing measured (output is unbuffered, nothing is written); any
# other is refused rather than silently dropped.
_HARMLESS = frozenset({"-u", "-B"})
USAGE = ('give --run-cmd a Python command: "python SCRIPT [ARGS]" or "python -m MODULE [ARGS]", optionally '
         'after NAME=VALUE environment settings, e.g. --run-cmd "MPLBACKEND=Agg python train.py --steps 5"')


class CommandError(UsageError):
    """A run command jaxmem cannot run; the message says what it accepts."""


@dataclass(frozen=True)
class Command:
    text: str
    env: dict[str, str] = field(default_factory=dict)
    script: Path | None = None         # resolved, inside the tree
    module: str | None = None
    argv: tuple[str, ...] = ()

    @property
    def target(self) -> str:
        return f"-m {self.module}" if self.module else str(self.script)


def parse(text: str, tree: Path) -> Command:
    """Read `text` as a command to run in `tree` (its working directory); CommandError if it is not
    one jaxmem runs."""
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise CommandError(f"--run-cmd {text!r} cannot be read ({exc}); {USAGE}") from None
    env: dict[str, str] = {}
    while words and _ASSIGNMENT.match(words[0]):
        name, value = _ASSIGNMENT.match(words.pop(0)).groups()
        env[name] = value
    if not words or not _PYTHON.match(Path(words[0]).name):
        got = words[0] if words else "nothing"
        raise CommandError(f"--run-cmd runs Python only, got {got!r}; {USAGE}")
    words.pop(0)
    while words and words[0].startswith("-") and words[0] != "-m":
        option = words.pop(0)
        if option not in _HARMLESS:
            raise CommandError(f"--run-cmd: the interpreter option {option!r} is not supported; {USAGE}")
    if not words:
        raise CommandError(f"--run-cmd {text!r} names no script; {USAGE}")
    tree = Path(tree).resolve()
    if words[0] == "-m":
        if len(words) < 2 or not re.fullmatch(r"[A-Za-z_][\w.]*", words[1]):
            raise CommandError(f"--run-cmd: -m needs a module name; {USAGE}")
        return Command(text, env, module=words[1], argv=tuple(words[2:]))
    script = (tree / words[0]).resolve()
    if not script.is_relative_to(tree):
        raise CommandError(f"--run-cmd: {words[0]} is outside the reviewed tree {tree}; only the tree is mounted "
                           "in the sandbox")
    if not script.is_file():
        raise CommandError(f"--run-cmd: {words[0]} is not a file in {tree}")
    return Command(text, env, script=script, argv=tuple(words[1:]))
