"""A machine-wide queue for verifier runs: `slots` at once, first come first served, across every
process that shares the data directory (the web app, the Slack bot, the CLI).

Each waiting run holds a ticket file named by its arrival time; a run may start when fewer than
`slots` tickets are ahead of it and it holds one of the slot locks (`flock`, released by the
kernel if the process dies). Tickets of dead processes are ignored and swept. The position a
waiting run reports is the number of tickets ahead of it.
"""
from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

POLL_S = 0.2


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class RunQueue:
    def __init__(self, folder: Path, slots: int = 1):
        if slots < 1:
            raise ValueError(f"slots must be at least 1, got {slots}")
        self.folder, self.slots = Path(folder), slots
        self.folder.mkdir(parents=True, exist_ok=True)

    def _tickets(self) -> list[Path]:
        live = []
        for path in sorted(self.folder.glob("ticket-*")):
            try:
                pid = int(path.name.split("-")[2])
            except (IndexError, ValueError):
                continue
            if _alive(pid):
                live.append(path)
            else:
                path.unlink(missing_ok=True)  # its process died while waiting
        return live

    def waiting(self) -> int:
        """Runs queued or running on this machine now."""
        return len(self._tickets())

    @contextmanager
    def slot(self, on_wait: Callable[[int], None] | None = None, timeout_s: float | None = None) -> Iterator[None]:
        """Hold a slot for the duration of the block. `on_wait(position)` is called whenever the
        position changes (1 = next). Raises TimeoutError after `timeout_s` of waiting."""
        ticket = self.folder / f"ticket-{time.time_ns():020d}-{os.getpid()}-{id(self)}-{time.monotonic_ns()}"
        ticket.touch()
        lock = None
        started = time.monotonic()
        try:
            last = None
            while True:
                tickets = self._tickets()
                ahead = tickets.index(ticket) if ticket in tickets else 0
                if ahead < self.slots:
                    lock = self._try_lock()
                    if lock is not None:
                        break
                position = max(1, ahead - self.slots + 1)
                if position != last and on_wait:
                    on_wait(position)
                last = position
                if timeout_s is not None and time.monotonic() - started > timeout_s:
                    raise TimeoutError(f"waited {timeout_s:g} s for a verifier slot")
                time.sleep(POLL_S)
            yield
        finally:
            if lock is not None:
                fcntl.flock(lock, fcntl.LOCK_UN)
                os.close(lock)
            ticket.unlink(missing_ok=True)

    def _try_lock(self) -> int | None:
        for i in range(self.slots):
            fd = os.open(self.folder / f"slot-{i}.lock", os.O_CREAT | os.O_RDWR, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return fd
            except BlockingIOError:
                os.close(fd)
        return None
