"""The question classifier: fitted from labelled vectors, it ranks cards, measures how far an
out-of-scope area leads, and survives a round trip through its stamped file."""
from __future__ import annotations

import numpy as np

from app.intent import Intent


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
