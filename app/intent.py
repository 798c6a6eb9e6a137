"""Which card (or out-of-scope area) a question is about, learned from the stored questions.

Every card carries user-style questions (and every out-of-scope area its own); their vectors are
already in the store. A linear model over them is a second opinion beside nearest-neighbour search:
one stored question that happens to sit close to a real question (long, with logs and library
names) matters less than where the question falls among all of a card's questions.

Ridge regression on one-hot labels, solved in closed form: a 385 x 385 system, a few milliseconds,
deterministic, no iterative solver and no extra dependency. On the development sets it ranked as well
as multinomial logistic regression (main + real-dev recall, summed: 5.313 against 5.322).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from app import stamped

SCOPE_PREFIX = "scope:"  # label of an out-of-scope area's questions (see corpus/scope/)
RIDGE = 1.0  # regularisation, chosen on main + real dev (0.1 and 10 ranked slightly worse)


class Intent:
    def __init__(self, classes: list[str], weights: np.ndarray):
        self.classes, self.weights = classes, weights
        self._scope = np.array([c.startswith(SCOPE_PREFIX) for c in classes])

    @classmethod
    def fit(cls, vectors: np.ndarray, labels: list[str], ridge: float = RIDGE) -> "Intent":
        classes = sorted(set(labels))
        index = {c: i for i, c in enumerate(classes)}
        y = np.zeros((len(labels), len(classes)), dtype=np.float64)
        y[np.arange(len(labels)), [index[label] for label in labels]] = 1.0
        x = _with_bias(np.asarray(vectors, dtype=np.float64))
        weights = np.linalg.solve(x.T @ x + ridge * np.eye(x.shape[1]), x.T @ y)
        return cls(classes, weights.astype(np.float32))

    def save(self, path: Path, stamp: str) -> None:
        stamped.save(path, stamp, {"classes": self.classes}, {"weights": self.weights})

    @classmethod
    def load(cls, path: Path, stamp: str) -> "Intent | None":
        got = stamped.load(path, stamp)
        return None if got is None else cls(got[0]["classes"], got[1]["weights"])

    def scores(self, vector) -> np.ndarray:
        return (_with_bias(np.asarray(vector, dtype=np.float32)[None]) @ self.weights)[0]

    def topics(self, vector) -> list[str]:
        """Card topics, best first (out-of-scope areas left out)."""
        s = self.scores(vector)
        return [self.classes[i] for i in np.argsort(-s) if not self._scope[i]]

    def score_of(self, vector, topics: list[str]) -> list[float]:
        """The classifier's scores of these card topics (-inf for one it does not know)."""
        s = self.scores(vector)
        index = {c: i for i, c in enumerate(self.classes)}
        return [float(s[index[t]]) if t in index else float("-inf") for t in topics]

    def scope_margin(self, vector) -> tuple[float, str]:
        """Best out-of-scope area's score minus the best card's, and that area's id."""
        s = self.scores(vector)
        if not self._scope.any() or self._scope.all():
            return float("-inf"), ""
        best = int(np.argmax(np.where(self._scope, s, -np.inf)))
        return float(s[best] - s[~self._scope].max()), self.classes[best]


def _with_bias(x: np.ndarray) -> np.ndarray:
    return np.hstack([x, np.ones((x.shape[0], 1), dtype=x.dtype)])
