"""The question classifier: fitted from labelled vectors, it ranks cards, measures how far an
out-of-scope area leads, and survives a round trip through its stamped file."""
from __future__ import annotations

import numpy as np

from jaxmem.app.intent import Intent


def clusters(seed: int = 0):
    """Three well-separated groups of unit vectors: two cards and one out-of-scope area."""
    rng = np.random.default_rng(seed)
    centres = np.eye(3, 16) * 4
    vectors, labels = [], []
    for centre, label in zip(centres, ["gpu-preallocation", "buffer-donation", "scope:jax-installation"]):
        for _ in range(20):
            v = centre + rng.normal(size=16)
            vectors.append(v / np.linalg.norm(v))
            labels.append(label)
    return np.array(vectors, dtype=np.float32), labels, centres


def unit(v):
    return v / np.linalg.norm(v)


def test_cards_are_ranked_by_the_group_a_question_falls_in():
    vectors, labels, centres = clusters()
    intent = Intent.fit(vectors, labels)
    assert intent.topics(unit(centres[1]))[0] == "buffer-donation"
    assert intent.topics(unit(centres[0]))[0] == "gpu-preallocation"
    assert "scope:jax-installation" not in intent.topics(unit(centres[2]))  # areas are never ranked as cards


def test_the_scope_margin_is_positive_only_where_an_area_leads():
    vectors, labels, centres = clusters()
    intent = Intent.fit(vectors, labels)
    margin, area = intent.scope_margin(unit(centres[2]))
    assert margin > 0.5 and area == "scope:jax-installation"
    assert intent.scope_margin(unit(centres[0]))[0] < -0.5


def test_without_areas_there_is_no_margin():
    vectors, labels, centres = clusters()
    keep = [i for i, label in enumerate(labels) if not label.startswith("scope:")]
    intent = Intent.fit(vectors[keep], [labels[i] for i in keep])
    assert intent.scope_margin(unit(centres[2])) == (float("-inf"), "")


def test_a_saved_classifier_loads_only_for_its_own_ingest(tmp_path):
    vectors, labels, centres = clusters()
    intent = Intent.fit(vectors, labels)
    path = tmp_path / "intent.npz"
    intent.save(path, "fingerprint-1")
    loaded = Intent.load(path, "fingerprint-1")
    assert loaded.classes == intent.classes
    np.testing.assert_array_equal(loaded.scores(unit(centres[1])), intent.scores(unit(centres[1])))
    assert Intent.load(path, "fingerprint-2") is None  # the store changed since: rebuilt, not reused
    path.write_bytes(b"not an npz")
    assert Intent.load(path, "fingerprint-1") is None


def with_words():
    """Two cards whose questions look alike to the dense model but use different words."""
    vectors, labels, centres = clusters()
    # the dense view merges the two cards: both sit at centre 0
    vectors = np.array([unit(centres[0] + 0.1 * v) if label != "scope:jax-installation" else v
                        for v, label in zip(vectors, labels)], dtype=np.float32)
    said = {"gpu-preallocation": "XLA_PYTHON_CLIENT_PREALLOCATE grabs the card at startup",
            "buffer-donation": "donate_argnums reuses the input buffer",
            "scope:jax-installation": "pip install jaxlib cuda wheel"}
    texts = [f"{said[c]} ({i})" for i, c in enumerate(labels)]
    return vectors, labels, centres, texts


def test_words_decide_the_ranking_where_the_dense_view_cannot_tell():
    """The combined classifier separates them; the out-of-scope margin still comes from the dense view."""
    vectors, labels, centres, texts = with_words()
    intent = Intent.fit(vectors, labels, texts=texts)
    assert intent.topics(unit(centres[0]), "why does donate_argnums fail?")[0] == "buffer-donation"
    # an identifier's pieces count in any language: a German question with the variable's name
    assert intent.topics(unit(centres[0]), "Wie setze ich XLA_PYTHON_CLIENT_PREALLOCATE?")[0] == "gpu-preallocation"
    # ... and so do the pieces of a longer word: "reused" is no stored word, but shares "reus" and
    # "euse" with "reuses"
    assert intent.topics(unit(centres[0]), "reused?")[0] == "buffer-donation"
    # words no stored question has are ignored, not an error
    assert intent.topics(unit(centres[0]), "quantenverschränkung 量子")
    # the out-of-scope margin reads the same scores: an installation question with its words leads
    # with the area, a donation question does not
    margin, area = intent.read(unit(centres[2]), "pip install the jaxlib cuda wheel").scope_margin()
    assert margin > 0 and area == "scope:jax-installation"
    assert intent.read(unit(centres[0]), "donate_argnums reuses the input buffer").scope_margin()[0] < 0
    # without the question's text the dense view ranks
    np.testing.assert_array_equal(intent.read(unit(centres[0])).scores, intent.scores(unit(centres[0])))


def test_a_saved_classifier_keeps_its_word_view(tmp_path):
    vectors, labels, _, texts = with_words()
    intent = Intent.fit(vectors, labels, texts=texts)
    path = tmp_path / "intent.npz"
    intent.save(path, "fingerprint-1")
    loaded = Intent.load(path, "fingerprint-1")
    q = unit(np.eye(3, 16)[0])
    np.testing.assert_array_equal(loaded.read(q, "donate_argnums").scores, intent.read(q, "donate_argnums").scores)
    assert loaded.topics(q, "donate_argnums")[0] == "buffer-donation"


def test_column_sums_match_a_sparse_product():
    from scipy.sparse import random as sparse_random

    from jaxmem.app.intent import column_sums

    m = sparse_random(50, 30, density=0.2, format="csc", random_state=1, dtype=np.float32)
    cols, w = np.array([3, 7, 7, 29, 0]), np.array([1.0, 2.0, 0.5, -1.0, 3.0], dtype=np.float32)
    expected = np.asarray(m[:, cols] @ w).ravel()
    got = column_sums(m.indptr.astype(np.int64), m.indices, m.data, cols, w, 50)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    assert not column_sums(m.indptr.astype(np.int64), m.indices, m.data, np.array([], dtype=np.int64),
                           np.array([], dtype=np.float32), 50).any()
