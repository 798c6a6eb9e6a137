"""Question language detection (lingua: accurate on short text, maintained).

Code, API names and env vars say nothing about the user's language ("como usar donate_argnums"
reads as French to a detector), so they are removed before detection. A short follow-up whose
language is unclear ("and on TPU?") keeps the conversation's language.
"""
from __future__ import annotations

import re
from functools import lru_cache

from jaxmem.core.fences import strip_chat_code

# Card languages plus the languages users most often write in; a closed set keeps short-text
# accuracy high (lingua compares only these).
LANGS = ("en", "sv", "uk", "it", "de", "fr", "es", "pt", "ja", "zh",
         "pl", "nl", "ru", "ko", "tr", "da", "nb", "fi", "cs", "hu", "ro", "el", "vi", "id", "ar", "hi", "he")

LONG_TEXT = 40  # characters of prose from which the trigram detector is trusted
# ...and, on shorter text, the trigram confidence from which it is trusted all the same. Measured
# on the 763 questions of the four eval sets: with 0.99 the full models are needed for 16 of them
# instead of 67, and not one detection changes; a cold `jaxmem ask` of a few words saves the
# 0.3-0.4 s of loading the full models of two languages.
SHORT_TEXT_SURE = 0.99
_INLINE_CODE = re.compile(r"`[^`]*`")
_CODE_CHAR = re.compile(r"[_.()\[\]=/\\<>{}]")
_IDENT = re.compile(r"\b[A-Z0-9_]{2,}\b|\b\d+[%\w]*")


_preloaded = False
# For short text the trigram ranking is unreliable at the top but its top few hold the answer; the
# full n-gram models then decide among those few only. Loading the full models of all 27 languages
# took 4.5-5.7 s and 720 MB in a cold `jaxmem ask`; two to four of them take 0.3-0.6 s.
CANDIDATE_MASS, MIN_CANDIDATES, MAX_CANDIDATES = 0.9, 2, 4


def _codes():
    from lingua import IsoCode639_1

    return [getattr(IsoCode639_1, c.upper()) for c in LANGS]


def preload() -> None:
    """Load every n-gram model now (long-running servers: the first user should not wait).
    lingua keeps loaded models in one process-wide cache that every detector shares."""
    global _preloaded
    if not _preloaded:
        from lingua import LanguageDetectorBuilder

        LanguageDetectorBuilder.from_iso_codes_639_1(*_codes()).with_preloaded_language_models().build()
        _preloaded = True


@lru_cache(maxsize=1)
def _trigram_detector():
    """Trigram models only (0.1-0.2 s to load, reliable on sentences)."""
    from lingua import LanguageDetectorBuilder

    return LanguageDetectorBuilder.from_iso_codes_639_1(*_codes()).with_low_accuracy_mode().build()


@lru_cache(maxsize=256)
def _full_detector(languages: frozenset):
    """All n-gram models of a few candidate languages; each language's models load on first need."""
    from lingua import LanguageDetectorBuilder

    return LanguageDetectorBuilder.from_languages(*languages).build()


def _candidates(values, previous: str | None) -> frozenset:
    chosen, mass = [], 0.0
    for v in values:
        if len(chosen) >= MAX_CANDIDATES or (len(chosen) >= MIN_CANDIDATES and mass >= CANDIDATE_MASS):
            break
        chosen.append(v.language)
        mass += v.value
    if previous:
        from lingua import IsoCode639_1, Language

        try:
            chosen.append(Language.from_iso_code_639_1(getattr(IsoCode639_1, previous.upper())))
        except (AttributeError, ValueError):
            pass
    if len(chosen) < 2:  # lingua needs two languages to compare; English is the usual other one
        from lingua import Language

        chosen.append(Language.ENGLISH if chosen[0] != Language.ENGLISH else Language.SPANISH)
    return frozenset(chosen)


def prose(text: str) -> str:
    # Whole tokens holding code punctuation go first, token by token: the same as the regex
    # `\S*[_.()...]\S*`, without its quadratic backtracking on a long run of non-space characters.
    tokens = (t for t in _INLINE_CODE.sub(" ", strip_chat_code(text)).split() if not _CODE_CHAR.search(t))
    return re.sub(r"\s+", " ", _IDENT.sub(" ", " ".join(tokens))).strip()


def detect(text: str, previous: str | None = None) -> tuple[str, float]:
    """(ISO 639-1 code, confidence 0..1). Falls back to `previous`, else English, when unsure."""
    words = prose(text)
    fallback = previous or "en"
    if len(words) < 2 and not re.search(r"[\u0400-\u04ff\u3040-\u30ff\u4e00-\u9fff\uac00-\ud7af]", words):
        return fallback, 0.0
    # The fast detector settles clear cases; short or mixed text goes to the full models of its
    # likeliest languages.
    values = _trigram_detector().compute_language_confidence_values(words)
    if values and values[0].value < (SHORT_TEXT_SURE if len(words) < LONG_TEXT else 0.95):
        values = _full_detector(_candidates(values, previous)).compute_language_confidence_values(words)
    if not values:
        return fallback, 0.0
    best = values[0]
    code, conf = best.language.iso_code_639_1.name.lower(), float(best.value)
    # Short follow-ups in an ongoing conversation: only switch language on clear evidence.
    if previous and code != previous and (conf < 0.5 or len(words.split()) <= 3):
        return previous, conf
    if conf < 0.2:
        return fallback, conf
    return code, conf
