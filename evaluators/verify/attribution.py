"""The parent half of per-line attribution: read what the child wrote on fd 2 and put each host
sync, transfer and compilation on the line of the user's code that caused it, first step apart.

What the child writes there (see probe.py): the transfer guard's own lines (from C++, one per
transfer, with the thread that made it), and the probe's markers, each carrying the run's nonce:

    snippet-begin / snippet-end / explicit-begin / explicit-end    the measured region
    d:SITE:LINE:PATH        a site id for a file and line (sent once, before first use)
    t:TID:CTX               the guard lines thread TID wrote since its last marker belong to CTX
    s:TID:CTX:HOW:BYTES:LIB a host sync (a read of a device value) at CTX, from library line LIB
    c:TID:CTX:LIB:FUN       a compilation at CTX
    a:TID:CTX:BYTES:LIB:FUN a call of compiled program FUN at CTX that consumed BYTES of donated,
                            aliased input (per device)
    l:HEADER:ACT:N          loop HEADER ran N iterations in frame activation ACT

CTX is `SITE.ACT<SITE<SITE|HEADER.ACT.ITER,...`: the user's frames from the innermost out (the
innermost with its frame activation) and the loops around them with the iteration each was in.

Counts of transfers are the guard's lines, which the child cannot hide without touching fd 2
(detected: see probe.Guard); the markers only say where. A guard line that no marker claims is
counted but "not attributed to a line". Which loop is "the step": of the loops around an event,
the one that ran the most iterations in one frame activation (the training loop, not a loop over
three parameters inside the step function, and across epochs the inner batch loop). Its first
iteration is the first (compiling) step; the rest are the steady steps.
"""
from __future__ import annotations

import linecache
import math
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from urllib.parse import unquote

from jaxmem.evaluators.verify import probe

_MARK = re.compile(re.escape(probe.MARK_PREFIX) + r"([0-9a-f]*):(.*?)@@")
_GUARD = re.compile(r"(?:^[IWEF]\d{4} [\d:.]+\s+(\d+) \S+)?\] (host-to-device|device-to-host|device-to-device) "
                    r"transfer:(.*)$")
_AVAL = re.compile(r"aval=ShapedArray\((\w+)\[([\d,\s]*)\]")
_REGION = (probe.BEGIN, probe.END, probe.EXPLICIT_BEGIN, probe.EXPLICIT_END)
ITEMSIZE = {"bool": 1, "int4": 0.5, "uint4": 0.5, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "int32": 4,
            "uint32": 4, "int64": 8, "uint64": 8, "float16": 2, "bfloat16": 2, "float32": 4, "float64": 8,
            "complex64": 8, "complex128": 16}
KINDS = {"host-to-device": "h2d", "device-to-host": "d2h", "device-to-device": "d2d"}
# The metrics a line can carry, as the verifier names them (device_put's transfers are the explicit ones).
METRIC_NAMES = {"sync": "host_syncs", "h2d": "implicit_h2d_transfers", "h2d_explicit": "explicit_h2d_transfers",
                "d2h": "d2h_transfers", "d2d": "d2d_transfers", "compile": "compiles",
                # Calls whose donated inputs were aliased to outputs; their "bytes" are the aliased bytes.
                "alias": "aliased_calls"}
# A line outside the user's loops whose every run makes at least this many of one event has a loop
# of its own inside the call (a library's): those are per-step costs of that loop.
LIBRARY_LOOP_MIN = 10


@dataclass
class GuardCounts:
    h2d: int = 0
    h2d_explicit: int = 0
    d2h: int = 0
    d2d: int = 0


@dataclass
class Event:
    kind: str                     # sync, h2d (implicit), h2d_explicit, d2h, d2d, compile, alias
    ctx: str                      # the marker's context, parsed later
    explicit: bool = False
    nbytes: float | None = None
    how: str = ""                 # syncs: the read (item, __float__, np.asarray, ...); compiles, alias: the function
    lib: int | None = None        # the library line between the user's line and JAX, as a site


@dataclass
class Stream:
    """Everything one child wrote on fd 2, read."""
    counts: GuardCounts = field(default_factory=GuardCounts)
    stderr: str = ""
    problems: list[str] = field(default_factory=list)
    sites: dict[int, tuple[str, int]] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    loops: dict[tuple[int, int], int] = field(default_factory=dict)   # (header site, activation) -> iterations
    unattributed: Counter = field(default_factory=Counter)
    markers: Counter = field(default_factory=Counter)                  # s, c, t, ... seen
    ended: bool = False


def _nbytes(detail: str) -> float | None:
    m = _AVAL.search(detail)
    if not m or m.group(1) not in ITEMSIZE:
        return None
    dims = [int(d) for d in m.group(2).replace(" ", "").split(",") if d]
    return ITEMSIZE[m.group(1)] * math.prod(dims)


def parse(text: str, nonce: str = "") -> Stream:
    """Count guard lines inside the snippet's marked region, attribute them, and keep the rest as
    the user's stderr; note what looks tampered with (markers missing, repeated, out of order, not
    this run's)."""
    s = Stream()
    kept: list[str] = []
    inside = explicit = False
    seen: list[str] = []
    pending: dict[str, list[Event]] = defaultdict(list)
    for line in text.splitlines():
        m = _MARK.search(line)
        if m:
            if m.group(1) != nonce:  # a marker, but not one of this run's
                s.problems.append("a marker that is not this run's appeared on file descriptor 2")
                continue
            line = line[:m.start()] + line[m.end():]
            body = m.group(2)
            if body in _REGION:
                seen.append(body)
                if body == probe.BEGIN and (inside or probe.END in seen[:-1] or seen.count(probe.BEGIN) > 1):
                    s.problems.append("the snippet-begin marker appeared twice or late")
                if body == probe.END and probe.BEGIN not in seen:
                    s.problems.append("the snippet-end marker came without a snippet-begin marker before it "
                                      "(file descriptor 2 was truncated or rewritten)")
                inside = {probe.BEGIN: True, probe.END: False}.get(body, inside)
                explicit = {probe.EXPLICIT_BEGIN: True, probe.EXPLICIT_END: False}.get(body, explicit)
                s.ended = s.ended or body == probe.END
            else:
                _event_marker(s, body, inside, pending)
            if line:
                kept.append(line)
            continue
        if probe.MARK_PREFIX in line:
            s.problems.append("a marker that is not this run's appeared on file descriptor 2")
            continue
        g = _GUARD.search(line)
        if g:
            if inside:
                kind = KINDS[g.group(2)]
                if kind == "h2d":
                    s.counts.h2d += 1
                    s.counts.h2d_explicit += explicit
                elif kind == "d2h":
                    s.counts.d2h += 1
                else:
                    s.counts.d2d += 1
                tally = "h2d_explicit" if kind == "h2d" and explicit else kind
                pending[g.group(1) or "?"].append(Event(tally, "", explicit, _nbytes(g.group(3))))
            continue
        if line:
            kept.append(line)
    for events in pending.values():
        for e in events:
            s.unattributed[e.kind] += 1
    s.stderr = "\n".join(kept)
    return s


def _event_marker(s: Stream, body: str, inside: bool, pending: dict[str, list[Event]]) -> None:
    kind, _, rest = body.partition(":")
    s.markers[kind] += 1
    try:
        if kind == "d":
            site, line, path = rest.split(":", 2)
            s.sites[int(site)] = (unquote(path), int(line))
            return
        if kind == "l":
            header, act, n = rest.split(":")
            s.loops[(int(header), int(act))] = max(s.loops.get((int(header), int(act)), 0), int(n))
            return
        if not inside:
            s.problems.append("an attribution marker appeared outside the measured region")
            return
        if kind == "t":
            tid, ctx = rest.split(":", 1)
            for e in pending.pop(tid, []):
                e.ctx = ctx
                s.events.append(e)
        elif kind == "s":
            _tid, ctx, how, nbytes, lib = rest.split(":")
            s.events.append(Event("sync", ctx, nbytes=float(nbytes) if nbytes else None, how=how,
                                  lib=int(lib) if lib else None))
        elif kind == "c":
            _tid, ctx, lib, fun = rest.split(":")
            s.events.append(Event("compile", ctx, how=unquote(fun), lib=int(lib) if lib else None))
        elif kind == "a":
            _tid, ctx, nbytes, lib, fun = rest.split(":")
            s.events.append(Event("alias", ctx, nbytes=int(nbytes), how=unquote(fun), lib=int(lib) if lib else None))
        else:
            s.problems.append(f"an unknown marker ({kind}) appeared on file descriptor 2")
    except ValueError:
        s.problems.append("a malformed marker appeared on file descriptor 2")


# ---- from events to lines ---------------------------------------------------------------------
@dataclass
class _Ctx:
    sites: list[int]
    activation: int | None
    loops: list[tuple[int, int, int]]   # (header site, activation, iteration), innermost first


def _ctx(text: str) -> _Ctx:
    frames, _, loops = text.partition("|")
    sites: list[int] = []
    activation = None
    for i, part in enumerate(p for p in frames.split("<") if p):
        site, _, act = part.partition(".")
        if i == 0 and act:
            activation = int(act)
        if not sites or sites[-1] != int(site):
            sites.append(int(site))
    parsed = []
    for part in (p for p in loops.split(",") if p):
        h, a, n = part.split(".")
        parsed.append((int(h), int(a), int(n)))
    return _Ctx(sites, activation, parsed)


class _Tally:
    """One metric at one line: how often, in which step, how many bytes."""

    def __init__(self) -> None:
        self.total = 0
        self.first = 0
        self.steady = 0
        self.outside = 0
        self.steps_with: set = set()
        self.loops: Counter = Counter()
        self.activations: set = set()
        self.nbytes = 0.0
        self.bytes_unknown = 0
        self.explicit = 0
        self.how: Counter = Counter()
        self.inside: Counter = Counter()
        self.outside_lib: Counter = Counter()    # library lines of the events outside the user's loops
        self.compiles = False

    def add(self, e: Event, step: tuple | None, first: bool, activation: int | None, lib: str | None) -> None:
        self.total += 1
        self.compiles = e.kind == "compile"
        if step is None:
            self.outside += 1
            self.activations.add(activation)
            if lib:
                self.outside_lib[lib] += 1
        elif first:
            self.first += 1
            self.loops[step[0]] += 1
        else:
            self.steady += 1
            self.steps_with.add(step)
            self.loops[step[0]] += 1
        if e.nbytes is None:
            self.bytes_unknown += 1
        else:
            self.nbytes += e.nbytes
        self.explicit += e.explicit
        if e.how:
            self.how[e.how] += 1
        if lib:
            self.inside[lib] += 1


def summarize(stream: Stream, *, shorten=None, ran: dict[str, list[int]] | None = None) -> dict:
    """Per-line costs of one run, from its stream: what the review and the reports read.

    `shorten(path)` turns a path into what a user reads (relative to the reviewed tree); `ran`: the
    lines of each file that ran (the probe's tracer saw them), passed through."""
    shorten = shorten or (lambda p: p)
    iterations: dict[int, int] = defaultdict(int)        # header -> iterations over all activations
    most: dict[int, int] = defaultdict(int)              # header -> most iterations in one activation
    first_act: dict[int, int] = {}
    for (header, act), n in stream.loops.items():
        iterations[header] += n
        most[header] = max(most[header], n)
        first_act[header] = min(first_act.get(header, act), act)
    own: dict[tuple[int, str], _Tally] = defaultdict(_Tally)      # (innermost site, kind)
    under: dict[tuple[int, str], _Tally] = defaultdict(_Tally)    # (any site of the chain, kind)
    callers: dict[int, Counter] = defaultdict(Counter)
    chains: dict[int, set] = defaultdict(set)          # innermost site -> every site that led to it
    unattributed = Counter(stream.unattributed)
    for e in stream.events:
        c = _ctx(e.ctx)
        if not c.sites:
            unattributed[e.kind] += 1
            continue
        step = None
        first = False
        if c.loops:
            # The step: the loop around this event that ran the most iterations in one activation.
            h, a, n = max(reversed(c.loops), key=lambda loop: most.get(loop[0], n_or(loop)))
            step = (h, a, n)
            first = n == 1 and a == first_act.get(h, a)
        lib = _where(stream, e.lib) if e.lib else None
        own[(c.sites[0], e.kind)].add(e, step, first, c.activation, lib)
        if len(c.sites) > 1:
            callers[c.sites[0]][c.sites[1]] += 1
            if len(chains[c.sites[0]]) < 64:
                chains[c.sites[0]].update(c.sites[1:])
        for site in dict.fromkeys(c.sites):
            under[(site, e.kind)].add(e, step, first, c.activation, lib)

    def lines(table: dict[tuple[int, str], _Tally]) -> list[dict]:
        by_site: dict[int, dict] = {}
        for (site, kind), t in table.items():
            path, line = stream.sites.get(site, ("?", 0))
            row = by_site.setdefault(site, {"path": shorten(path), "abspath": path, "line": line,
                                            "source": linecache.getline(path, line).strip(), "metrics": {}})
            row["metrics"][METRIC_NAMES[kind]] = _stats(t, stream, iterations, shorten)
        return sorted(by_site.values(), key=lambda r: (r["path"], r["line"]))

    own_lines = lines(own)
    site_of = {v: k for k, v in stream.sites.items()}
    for row in own_lines:
        site = site_of.get((row["abspath"], row["line"]))
        if site in callers:
            row["called_from"] = [_where(stream, s, shorten) for s, _n in callers[site].most_common(3)]
            # Every line of the user's code on the way here (callers of callers too), as (path, line).
            row["via"] = sorted([stream.sites[s][0], stream.sites[s][1]] for s in chains[site] if s in stream.sites)
    loops = [{"path": shorten(stream.sites.get(h, ("?", 0))[0]), "line": stream.sites.get(h, ("?", 0))[1],
              "iterations": n, "most_in_one_run": most[h],
              "activations": sum(1 for (hh, _a) in stream.loops if hh == h)}
             for h, n in sorted(iterations.items(), key=lambda kv: -kv[1])]
    totals = Counter(e.kind for e in stream.events) + stream.unattributed
    return {
        "lines": own_lines,            # each event once, on the innermost line of the user's code
        "inclusive": lines(under),     # each event on every line of the user's call chain (call sites too)
        "loops": loops,
        "unattributed": {METRIC_NAMES[k]: n for k, n in sorted(unattributed.items()) if n},
        "totals": {METRIC_NAMES[k]: n for k, n in sorted(totals.items())},
        "ran": dict(ran or {}),        # absolute path -> the lines that ran
    }


def n_or(loop: tuple[int, int, int]) -> int:
    """A loop that never reported its iterations (its frame still ran at the end): its iteration."""
    return loop[2]


def _where(stream: Stream, site: int | None, shorten=None) -> str:
    path, line = stream.sites.get(site, ("?", 0))
    if shorten is not None:
        path = shorten(path)
    else:
        for marker in ("/site-packages/", "/dist-packages/"):
            if marker in path:
                path = path.split(marker, 1)[1]
    return f"{path}:{line}"


def _stats(t: _Tally, stream: Stream, iterations: dict[int, int], shorten) -> dict:
    out: dict = {"total": t.total}
    if t.loops:
        header = t.loops.most_common(1)[0][0]
        steady_steps = max(0, iterations.get(header, 0) - 1)
        out.update(loop=_where(stream, header, shorten), first_step=t.first, steady_steps=steady_steps,
                   steady_total=t.steady, steps_with=len(t.steps_with),
                   per_step=round(t.steady / steady_steps, 3) if steady_steps else None)
    if t.outside:
        runs = len(t.activations)
        out.update(outside_loops=t.outside, runs_of_line=runs, per_run=round(t.outside / runs, 3) if runs else None)
        if t.outside_lib and runs:
            # A library's own loop repeats one of its lines: how often its busiest line did it per run.
            out["per_run_of_busiest_library_line"] = round(t.outside_lib.most_common(1)[0][1] / runs, 3)
    if t.bytes_unknown < t.total:
        out["bytes"] = int(t.nbytes)
        if t.bytes_unknown:
            out["bytes_not_shown"] = t.bytes_unknown   # JAX's C++ fast path logs no shape
    elif t.total and not t.compiles:
        out["bytes"] = None
    if t.explicit:
        out["explicit"] = t.explicit
    if t.how:
        out["how"] = dict(t.how.most_common())
    if t.inside:
        out["inside"] = [w for w, _n in t.inside.most_common(3)]
    return out


def per_step(stats: dict, metric: str = "") -> bool:
    """Whether a metric at a line is a per-step cost: in at least half of the steady steps of its
    loop (3 or more iterations), or, for syncs and transfers, many times from one library line in
    every run of a line outside the user's loops (a loop inside the library it calls; a library
    converting a few arrays once, or compiling its pieces once, is not one)."""
    steady = stats.get("steady_steps") or 0
    if steady >= 2 and stats.get("steps_with", 0) * 2 >= steady and stats.get("steady_total"):
        return True
    return metric != "compiles" and (stats.get("per_run_of_busiest_library_line") or 0) >= LIBRARY_LOOP_MIN
