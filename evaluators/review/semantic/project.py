"""Facts across the files of one reviewed tree: a step jitted in `train.py`, called in `main.py`.

When a directory is reviewed, every file's module name is known from its path, so an import of a
function from another file of the tree (`from .train import train_step`, `from pkg.steps import
update`) can be followed there: whether it is a jitted callable (and what it donates), what kind
its results are, whether it trains. The other file is parsed and modelled on first use only, once
per process, so a review pays for the imports it follows and nothing more. A single file, standard
input, or the changed files pre-commit passes know only what they contain.
"""
from __future__ import annotations

import ast
import os
import re
from pathlib import Path

from jaxmem.evaluators.review.semantic import exports
from jaxmem.evaluators.review.semantic.facts import FunctionFacts
from jaxmem.evaluators.review.semantic.hostreads import reads_host
from jaxmem.evaluators.review.semantic.mentions import CONVERT_WORDS, HOST_READ_WORDS, LOAD_WORDS, mentions
from jaxmem.evaluators.review.semantic.names import TIMERS

IMPORT_LINES = re.compile(r"^\s*(?:from\s+([.\w]+)\s+import|import\s+([\w.]+))", re.MULTILINE)
MAX_BYTES = 1_000_000  # what the reviewer reads of a file at most (evaluators/review/config.py)


TREE_WORDS = " jit pmap float( .item("
_TREE_BYTES = (b"jit", b"pmap", b"float(", b".item(", b".tolist(")
_UNKNOWN = object()


class Project:
    """Module names of the reviewed files, and their functions' facts, computed on demand."""

    def __init__(self, files: dict[str, str]):
        self.files = files  # dotted module name -> path
        self._by_path = {p: m for m, p in files.items()}
        self._tops = frozenset(m.split(".")[0] for m in files)  # the tree's top-level packages
        self._facts: dict[str, dict[str, FunctionFacts] | None] = {}
        # Trees and models built for an imported module's facts, kept for that file's own review
        # (trees never change): each file parsed once per process, modelled once unless cyclic.
        self._kept: dict[str, tuple[str, ast.Module, object | None]] = {}
        self._building: list[str] = []  # modules whose facts are being computed, outermost first
        self._tainted: set[str] = set()  # of those, the ones that read an unfinished module
        self._due: set[str] = set()  # files this process will still review: only theirs are kept
        # Files it has reviewed, once a batch is expected: a worker of a pool may yet be given any
        # other file of the tree, so a tree or model built for an importer is kept for it too.
        self._done: set[str] | None = None
        self._words: dict[str, bool] = {}
        self._answers: dict[str, FunctionFacts | None] = {}  # function(): final answers by qualname
        self._exports: dict[str, dict[str, str]] = {}  # module -> name it re-exports -> what it is
        self._stars: dict[str, dict[str, str]] = {}  # module -> what `from module import *` binds
        self._real: dict[str, str] = {}  # a path as given -> resolved (each resolve() is a few lstat calls)
        self._suffix: dict[str, str | None] = {}
        self._packages: dict[str, bool] = {}
        self.memo: dict = {}  # tree-wide indexes built on first need (importers.py)
        # Packages of the tree: every proper prefix of a module name (`src` of `src.training`).
        # Modules by their last component: an import matches a module of the tree only if they
        # end the same (the suffix matches below), so each lookup reads a handful, not the tree.
        self._by_last: dict[str, list[str]] = {}
        for m in files:
            self._by_last.setdefault(m.rpartition(".")[2], []).append(m)
        self._prefixes = frozenset(".".join(m.split(".")[:i]) for m in files for i in range(1, m.count(".") + 1))

    @classmethod
    def of_paths(cls, roots: list[str], files: list[str]) -> Project:
        """Module names relative to each reviewed directory (`src/pkg/mod.py` under `src/` is
        `pkg.mod`); a file given on its own is its stem."""
        out: dict[str, str] = {}
        real: dict[str, str] = {}
        dirs = [Path(r).resolve() for r in roots if Path(r).is_dir()]
        for f in files:
            p = Path(f).resolve()
            real[f] = str(p)
            if not f.endswith(".py"):
                continue
            base = next((d for d in dirs if d in p.parents), p.parent)
            parts = list(p.relative_to(base).with_suffix("").parts)
            if parts and parts[-1] == "__init__":
                parts.pop()
            if parts:
                out[".".join(parts)] = str(p)
        project = cls(out)
        project._real = real
        return project

    def reviewed_paths(self) -> list[str]:
        """Every reviewed file (notebooks too), resolved: what a tree-wide word count reads."""
        return list(dict.fromkeys(self._real.values()))

    def real(self, path: str) -> str:
        got = self._real.get(path)
        if got is None:
            got = self._real[path] = str(Path(path).resolve())
        return got

    def prefilter_text(self, source: str, module: str | None = None) -> str:
        """Words the rules' text prefilter should also see: a file that imports from a module of
        the tree that makes jitted callables (its text says jit or pmap) may call one without
        writing either word itself, and one that imports from the tree may call a helper there that
        reads its arguments on the host (`float(`, `.item(`). `module`: the file's own module name,
        so that `from model import *` in `demos/a/main.py` reads `demos/a/model.py` (beside)."""
        if not self.files:
            return ""
        for m in IMPORT_LINES.finditer(source):
            name = m.group(1) or m.group(2)
            if name.startswith(".") or self._package_in_tree(name):
                return TREE_WORDS  # `from pkg.src import training_utils`: modules of the tree
            found = self._module_for(self.beside(name, module))
            if found is not None and self._speaks_to_rules(found):
                return TREE_WORDS
        return ""

    def _package_in_tree(self, dotted: str) -> bool:
        """`searchless_chess.src` names a package whose modules are in the tree (`src.training`)."""
        if dotted not in self._packages:
            parts = dotted.split(".")
            self._packages[dotted] = any(".".join(parts[k:]) in self._prefixes for k in range(len(parts)))
        return self._packages[dotted]

    def _speaks_to_rules(self, module: str) -> bool:
        if module not in self._words:
            try:
                with open(self.files[module], "rb") as fh:
                    raw = fh.read(MAX_BYTES)
                # `from utils.means import Mean` where Mean's `__call__` does `val.item()`: the
                # importer's calls of it read device values without the importer saying so.
                self._words[module] = any(w in raw for w in _TREE_BYTES)
            except OSError:
                self._words[module] = False
        return self._words[module]

    def beside(self, dotted: str, importer: str | None) -> str:
        """`from dt_model import GPT` in `DT/train.py`: a script's own folder comes first on
        sys.path, so an absolute import of a module that sits beside the importing file means
        that file (`DT.dt_model`), even when sibling folders hold modules of the same name."""
        if not importer or "." not in importer or dotted in self.files:
            return dotted
        here = f"{importer.rpartition('.')[0]}.{dotted}"
        return here if here in self.files else dotted

    def is_package(self, module: str | None) -> bool:
        """The module is a package's `__init__.py`: its relative imports start from itself."""
        path = self.files.get(module) if module else None
        return path is not None and os.path.basename(path) == "__init__.py"

    def reexport(self, dotted: str, name: str) -> str | None:
        """What `from <dotted> import <name>` binds when that module of the tree imported `name`
        itself at top level (`from .common_utils import jax, jnp, functools`, where common_utils
        does `import jax` and `import jax.numpy as jnp`): the absolute name, else None."""
        target = self._reexport_once(dotted, name)
        # `from src.diffusion import step`, where src/diffusion/__init__.py imported it from
        # `.losses`, whose __init__.py imported it from its module: follow the chain (a few hops).
        for _ in range(4):
            if target is None:
                break
            base, _, leaf = target.rpartition(".")
            deeper = self._reexport_once(base, leaf) if base else None
            if deeper is None or deeper == target:
                break
            target = deeper
        return target

    def _reexport_once(self, dotted: str, name: str) -> str | None:
        module = self._module_for(dotted)
        if module is None:
            return None
        if module not in self._exports:
            self._exports[module] = {}  # an import cycle reads nothing, not a recursion
            self._exports[module] = exports.top_level_imports(self, self.files[module], module)
        return self._exports[module].get(name)

    def star_exports(self, dotted: str) -> dict[str, str]:
        """What `from <dotted> import *` binds when that is a module of the tree: the names its own
        top-level imports bind (a shared `imports.py` with `import jax`, `from functools import
        partial`), its functions and classes, and what its own star imports bring; `__all__`,
        when written as a literal list, limits them, and names starting with `_` are left out."""
        module = self._module_for(dotted)
        if module is None:
            return {}
        if module not in self._stars:
            self._stars[module] = {}  # a cycle of star imports reads nothing more
            self._stars[module] = exports.star_names(self, dotted, module)
        return self._stars[module]

    def expect(self, paths: list[str]) -> None:
        """This process will review `paths`: a tree parsed for their facts is worth keeping (one
        reviewed already, or by another worker, would be kept for nothing)."""
        self._due.update(self.real(p) for p in paths)
        self._done = self._done if self._done is not None else set()

    def may_review(self, path: str) -> bool:
        """Whether this process may still review `path` (resolved): a tree or model is kept for it."""
        return path in self._due or (self._done is not None and path not in self._done)

    def source_tree(self, path: str, needs: bytes | None = None) -> tuple[str, ast.Module] | None:
        """The text and tree of a file of the tree (`path` as in `files`), parsed once per process:
        a tree parsed here for another file's sake is kept for the file's own review when this
        process will review it (a re-export lookup and a facts build share it too). None when the
        file cannot be read or parsed, is over MAX_BYTES, or lacks `needs`."""
        from jaxmem.evaluators.review.astutil import parse

        kept = self._kept.get(path)
        if kept is not None:
            return kept[0], kept[1]
        try:
            with open(path, "rb") as fh:
                raw = fh.read(MAX_BYTES + 1)
            if len(raw) > MAX_BYTES or (needs is not None and needs not in raw):
                return None
            text = raw.decode("utf-8")
            tree = parse(text, path)
        except (OSError, UnicodeDecodeError, SyntaxError, ValueError, RecursionError):
            return None
        if self.may_review(path):
            self._kept[path] = (text, tree, None)
        return text, tree

    def take(self, path: str, source: str) -> tuple[ast.Module | None, object | None]:
        """The tree parsed from `source` for another file's review, and its model (semantic.Analysis)
        when that model is what the file's own review would build: (None, None) if there was none."""
        if not self._due:
            return None, None
        resolved = self.real(path)
        self._due.discard(resolved)
        self._done.add(resolved)
        kept = self._kept.pop(resolved, None)
        return (kept[1], kept[2]) if kept is not None and kept[0] == source else (None, None)

    def names_module(self, dotted: str) -> bool:
        """`dotted` is a module of the reviewed tree (not a class or a function in one)."""
        return self._module_for(dotted) is not None

    def module_of(self, path: str) -> str | None:
        return self._by_path.get(self.real(path))

    def _module_for(self, dotted: str) -> str | None:
        """The reviewed module an import names: exactly, or by its trailing components (the tree
        may be reviewed from inside the package: `stoix.utils.x` is `utils.x` here), or as the
        tail of one module of the tree (reviewed from above the package's folder)."""
        if dotted in self.files:
            return dotted
        if dotted not in self._suffix:
            same_end = self._by_last.get(dotted.rpartition(".")[2], ())
            matches = [m for m in same_end if dotted.endswith("." + m)]
            if not matches:
                # The package sits in a folder of the tree (`src/pkg/mod.py` reviewed from the
                # repository root is `src.pkg.mod`; the code imports `pkg.mod`): one match only.
                deeper = [m for m in same_end if m.endswith("." + dotted)]
                matches = deeper if len(deeper) == 1 else []
            self._suffix[dotted] = max(matches, key=len) if matches else None
        return self._suffix[dotted]

    def function(self, qualname: str) -> FunctionFacts | None:
        """Facts of `pkg.mod.f`, or of a method `pkg.mod.Class.m` (recorded as `Class.m`)."""
        hit = self._answers.get(qualname, _UNKNOWN)
        if hit is not _UNKNOWN:  # the model asks of every call it reads (`jnp.zeros` too)
            return hit
        facts, final = self._function(qualname)
        if final:
            self._answers[qualname] = facts
        return facts

    def _function(self, qualname: str) -> tuple[FunctionFacts | None, bool]:
        """The facts, and whether they are final (not read while their module is being modelled)."""
        module, _, name = qualname.rpartition(".")
        found = self._module_for(module) if module else None
        if found is None and module.count("."):
            module, _, cls = module.rpartition(".")
            found, name = self._module_for(module), f"{cls}.{name}"
        if found is None:
            return None, True
        if found not in self._facts:
            self._facts[found] = None  # an import cycle reads "unknown", not a recursion
            self._building.append(found)
            try:
                self._facts[found] = _module_facts(self.files[found], found, self)
            finally:
                self._building.pop()
        elif found in self._building:
            # A cycle: the modules being modelled read "unknown" here, where their own reviews
            # (later, with this module's facts known) may read more: their models are not kept.
            self._tainted.update(self._building)
        facts = self._facts[found]
        return (facts.get(name) if facts else None), found not in self._building


def _module_facts(path: str, module: str, project: Project) -> dict[str, FunctionFacts] | None:
    from jaxmem.evaluators.review import semantic
    from jaxmem.evaluators.review.semantic import clocks, helpers, loads
    from jaxmem.evaluators.review.semantic.branches import periodic_predicate
    from jaxmem.evaluators.review.semantic.training import gradient_decorator, steps_once, trains
    from jaxmem.evaluators.review.semantic.walk import At

    got = project.source_tree(path)
    if got is None:
        return None
    text, tree = got
    lines = text.splitlines()
    a = semantic.build(tree, lines, module=module, project=project)
    due = project.may_review(path)
    keep = due and module not in project._tainted  # not a model that read a module still being modelled
    if due:
        project._kept[path] = (text, tree, a if keep else None)
    scope = a.module_scope
    out: dict[str, FunctionFacts] = {}
    for name, bindings in scope.bindings.items():  # timer helpers: methods of the module's classes
        b = bindings[-1]
        cls = a.classes.get(b.node) if b.how == "class" else None
        if cls is None:
            continue
        if cls.network and cls.framework:
            # `model = GPT(cfg)` in another file of the tree: a network one calls (JM307).
            out[name] = FunctionFacts(None, None, None, False, network=cls.framework)
        enter, leave = cls.methods.get("__enter__"), cls.methods.get("__exit__")
        for mname, m in cls.methods.items():
            if clocks.reads_clock(a, m):
                out[f"{name}.{mname}"] = FunctionFacts(None, None, None, False, reads_clock=True,
                                                       clock_context=clocks.is_context_clock(a, m))
            elif m not in a.jitted_defs and mentions(lines, m, (*CONVERT_WORDS, "self.")) and (
                    converted := helpers.converted_params(a, m)):
                # A method that reads its arguments on the host (`self.log_loss(loss)` in a subclass).
                out[f"{name}.{mname}"] = FunctionFacts(None, None, None, False, converts=tuple(converted.items()),
                                                       signature=helpers.signature(m))
            elif cls.network and helpers.runs_layers(a, cls, m):
                # `model.step(token, cache)` through a typed receiver in another file: a forward pass.
                out[f"{name}.{mname}"] = FunctionFacts(None, None, None, False, forward=True)
            elif m in a.jitted_defs:
                # `@partial(jax.jit, ...)` on a method: a call through a typed receiver in another
                # file (`agent: DrQAgent` ... `agent.update(batch)`) dispatches compiled work.
                out[f"{name}.{mname}"] = FunctionFacts(
                    jit=a.jitted_defs[m], returns=a.return_kind(m), returns_strict=a.return_kind(m, True),
                    trains=trains(m, At(a, a.scopes.get(m) or scope)))
            elif not mname.startswith("__") and (made := semantic.returned_jit(a, m, None)) is not None:
                # `builder.make_step_fn(nets)` returning `jax.jit(fn)`: a factory method; what a
                # caller in another file binds from it is a jitted callable.
                out[f"{name}.{mname}"] = FunctionFacts(None, None, None, False, makes_jit=made)
            elif not mname.startswith("__") and a.return_kind(m) == "jax":
                # `specter.spectralEMD(a, b)` on an instance made in another file: device arrays out.
                out[f"{name}.{mname}"] = FunctionFacts(None, "jax", a.return_kind(m, True), False)
        for attr, found in cls.attrs.items():
            # `self.model_step = jax.jit(model_step)` in a method (`__init__`, `create_fns`): a
            # caller in another file holding an instance (`model = GPT(cfg)`) calls compiled work.
            jits = [b.info for b in found if b.info is not None]
            if jits and len(jits) == len(found) and f"{name}.{attr}" not in out:
                out[f"{name}.{attr}"] = _jit_facts(a, jits[-1], scope)
        if enter is not None and leave is not None and clocks.reads_clock(a, enter) and clocks.reads_clock(a, leave):
            out[name] = FunctionFacts(None, None, None, False, clock_context=True)
    for name, bindings in scope.bindings.items():
        b = bindings[-1]
        if b.how == "def" and isinstance(b.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            fn = b.node
            inner = a.scopes.get(fn)
            parts = a.returned_parts(fn)
            out[name] = FunctionFacts(
                jit=a.jitted_defs.get(fn), returns=a.return_kind(fn), returns_strict=a.return_kind(fn, True),
                trains=trains(fn, At(a, inner or scope)), makes_jit=semantic.returned_jit(a, fn, None),
                makes_returns=_made_returns(a, fn),
                makes_jits=tuple(semantic.returned_jit(a, fn, i) for i in range(len(parts))),
                reads_clock=clocks.reads_clock(a, fn), clock_context=clocks.is_context_clock(a, fn),
                loads=mentions(lines, fn, LOAD_WORDS) and loads.loads(a, fn), grad_decorated=gradient_decorator(a, fn),
                converts=(converts := tuple(helpers.converted_params(a, fn).items())
                          if mentions(lines, fn, CONVERT_WORDS) else ()),
                array_params=tuple(helpers.array_params(a, fn)) if converts else (),
                signature=helpers.signature(fn), periodic=mentions(lines, fn, ("%",)) and periodic_predicate(fn),
                parts=parts, host_reads=mentions(lines, fn, HOST_READ_WORDS) and reads_host(a, fn),
                one_step=steps_once(fn, At(a, inner or scope)))
        elif b.how == "assign" and b.factory is not None:
            out[name] = FunctionFacts(jit=None, returns=None, returns_strict=None, trains=False, jit_maker=b.factory)
        elif b.how == "assign" and b.info is not None:
            out[name] = _jit_facts(a, b.info, scope)
        elif b.how == "assign" and b.index is None and isinstance(b.value, (ast.Name, ast.Attribute)) \
                and a.qualname(b.value) in TIMERS:
            # `timer = time.perf_counter` in a benchmark's common module: a clock by another name
            out[name] = FunctionFacts(None, None, None, False, reads_clock=True, clock=True)
    if not keep:
        a.release()
    return out


def _made_returns(a, fn) -> tuple[str | None, str | None]:
    """A factory that returns a def it defines (`def step(batch): ... return loss` ... `return step`):
    the kinds that def's calls give, default and strict."""
    made = a.returned_def(fn)
    return (a.return_kind(made), a.return_kind(made, True)) if made is not None and made is not fn else (None, None)


def _jit_facts(a, info, scope) -> FunctionFacts:
    """A jitted callable bound by assignment (`step = jax.jit(train_step)`, or `self.step = ...` in
    a method): arrays out; it trains when the function it wraps, resolved from `scope`, does."""
    from jaxmem.evaluators.review.semantic.training import trains
    from jaxmem.evaluators.review.semantic.walk import At

    wrapped = info.wrapped
    fn = a.resolve_def(wrapped, scope) if isinstance(wrapped, (ast.Name, ast.Attribute)) else wrapped
    fn = fn if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) else None
    return FunctionFacts(jit=info, returns="jax", returns_strict="jax",
                         trains=fn is not None and trains(fn, At(a, a.scopes.get(fn) or scope)))

