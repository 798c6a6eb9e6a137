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


def with_terms():
    """Two cards whose questions look alike to the dense model but use different latent terms."""
    from scipy.sparse import csr_matrix

    vectors, labels, centres = clusters()
    # the dense view merges the two cards: both sit at centre 0
    vectors = np.array([unit(centres[0] + 0.1 * v) if label != "scope:jax-installation" else v
                        for v, label in zip(vectors, labels)], dtype=np.float32)
    feature = {"gpu-preallocation": 3, "buffer-donation": 7, "scope:jax-installation": 11}
    terms = csr_matrix(([8.0] * len(labels), ([*range(len(labels))], [feature[c] for c in labels])),
                       shape=(len(labels), 16))
    return vectors, labels, centres, terms


def test_latent_terms_decide_the_ranking_where_the_dense_view_cannot_tell():
    """The combined classifier separates them; the out-of-scope margin still comes from the dense view."""
    vectors, labels, centres, terms = with_terms()
    intent = Intent.fit(vectors, labels, terms=terms)
    assert intent.topics(unit(centres[0]), (np.array([7]), np.array([8.0])))[0] == "buffer-donation"
    assert intent.topics(unit(centres[0]), (np.array([3]), np.array([8.0])))[0] == "gpu-preallocation"
    # a feature beyond any stored question's is ignored, not an error
    assert intent.topics(unit(centres[0]), (np.array([99]), np.array([1.0])))
    reading = intent.read(unit(centres[2]), (np.array([7]), np.array([8.0])))
    assert reading.scope_margin() == Intent.fit(vectors, labels).scope_margin(unit(centres[2]))
    # without the question's terms (a backend without them) the dense view ranks
    np.testing.assert_array_equal(intent.read(unit(centres[0])).scores, intent.scores(unit(centres[0])))


def test_a_saved_classifier_keeps_its_latent_terms(tmp_path):
    vectors, labels, _, rows = with_terms()
    intent = Intent.fit(vectors, labels, terms=rows)
    terms = (np.array([7]), np.array([8.0]))
    path = tmp_path / "intent.npz"
    intent.save(path, "fingerprint-1")
    loaded = Intent.load(path, "fingerprint-1")
    q = unit(np.eye(3, 16)[0])
    np.testing.assert_array_equal(loaded.read(q, terms).scores, intent.read(q, terms).scores)
    assert loaded.topics(q, terms)[0] == "buffer-donation"
