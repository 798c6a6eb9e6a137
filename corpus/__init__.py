"""The curated corpus as package data: cards, snippet pairs, scope, seeds, shipped vectors and
evidence. Nothing here runs; `jaxmem.core.layout` finds this folder through importlib.resources,
so an installed wheel and a source checkout read the same files."""
