"""Text a function's body must hold before an imported module's facts about it are worked out."""
from __future__ import annotations

import ast

# Text a function's body must hold before these facts are worked out: most functions of an imported
# module are neither loaders nor host readers, and working it out for each cost a fifth of a
# review. What it gives up: a loader reached through a local helper whose call shows none of
# these words (`w = read_weights(p)`, itself calling `np.load`) is not recorded.
CONVERT_WORDS = ("float(", "int(", "bool(", "complex(", ".item(", ".tolist(", "asarray(", "array(", "device_get(",
                 "any(", "all(")
# hostreads.reads_host: a host copy or a wait somewhere in the body.
HOST_READ_WORDS = ("device_get(", "block_until_ready(", "asarray(", "array(", ".item(", ".tolist(", "__array__(")
LOAD_WORDS = ("load", "restore", "fromfile", "memmap", "File(", "as_numpy", "from_bytes", "msgpack")


def mentions(lines: list[str], fn: ast.AST, words: tuple[str, ...]) -> bool:
    body = "\n".join(lines[fn.lineno - 1:getattr(fn, "end_lineno", fn.lineno)])
    return any(w in body for w in words)
