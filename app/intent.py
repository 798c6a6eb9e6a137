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

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from app import stamped

SCOPE_PREFIX = "scope:"  # label of an out-of-scope area's questions (see corpus/scope/)
RIDGE = 1.0  # regularisation, chosen on main + real dev (0.1 and 10 ranked slightly worse)


class Intent:
    def __init__(self, classes: list[str], weights: np.ndarray):
        self.classes, self.weights = classes, weights
        self._scope = np.array([c.startswith(SCOPE_PREFIX) for c in classes])
        self._index = {c: i for i, c in enumerate(classes)}

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

    def read(self, vector) -> "Reading":
        """One question's scores, computed once for everything retrieval asks of them."""
        return Reading(self, self.scores(vector))

    def topics(self, vector) -> list[str]:
        return self.read(vector).topics()

    def scope_margin(self, vector) -> tuple[float, str]:
        return self.read(vector).scope_margin()


@dataclass(frozen=True)
class Reading:
    intent: Intent
    scores: np.ndarray

    def topics(self) -> list[str]:
        """Card topics, best first (out-of-scope areas left out)."""
        i = self.intent
        return [i.classes[j] for j in np.argsort(-self.scores) if not i._scope[j]]

    def scope_margin(self) -> tuple[float, str]:
        """Best out-of-scope area's score minus the best card's, and that area's id."""
        i, s = self.intent, self.scores
        if not i._scope.any() or i._scope.all():
            return float("-inf"), ""
        best = int(np.argmax(np.where(i._scope, s, -np.inf)))
        return float(s[best] - s[~i._scope].max()), i.classes[best]

    def gap(self, first: str, second: str) -> float:
        """Score of card `first` minus that of `second` (inf when the classifier lacks either)."""
        index = self.intent._index
        if first not in index or second not in index:
            return float("inf")
        return float(self.scores[index[first]] - self.scores[index[second]])


def _with_bias(x: np.ndarray) -> np.ndarray:
    return np.hstack([x, np.ones((x.shape[0], 1), dtype=x.dtype)])
