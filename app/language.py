"""Question language detection (lingua: accurate on short text, maintained).

Code, API names and env vars say nothing about the user's language ("como usar donate_argnums"
reads as French to a detector), so they are removed before detection. A short follow-up whose
language is unclear ("and on TPU?") keeps the conversation's language.
"""
from __future__ import annotations

import re
from functools import lru_cache

# Card languages plus the languages users most often write in; a closed set keeps short-text
# accuracy high (lingua compares only these).
LANGS = ("en", "sv", "uk", "it", "de", "fr", "es", "pt", "ja", "zh",
         "pl", "nl", "ru", "ko", "tr", "da", "nb", "fi", "cs", "hu", "ro", "el", "vi", "id", "ar", "hi", "he")

LONG_TEXT = 40  # characters of prose from which the trigram detector is trusted
_CODE = re.compile(r"```.*?```|`[^`]*`", re.S)
_IDENT = re.compile(r"\S*[_.()\[\]=/\\<>{}]\S*|\b[A-Z0-9_]{2,}\b|\b\d+[%\w]*")


_preloaded = None


def preload() -> None:
    """Load every n-gram model now (long-running servers: the first user should not wait)."""
    global _preloaded
    if _preloaded is None:
        from lingua import IsoCode639_1, LanguageDetectorBuilder

        codes = [getattr(IsoCode639_1, c.upper()) for c in LANGS]
        _preloaded = LanguageDetectorBuilder.from_iso_codes_639_1(*codes).with_preloaded_language_models().build()


@lru_cache(maxsize=2)
def _lazy_detector(full: bool):
    """`full=False`: trigram models only (0.2 s to load, reliable on sentences); `full=True`: all
    n-gram models (about 3 s to load on 2 cores, needed for a few words). Built on first need."""
    from lingua import IsoCode639_1, LanguageDetectorBuilder

    codes = [getattr(IsoCode639_1, c.upper()) for c in LANGS]
    builder = LanguageDetectorBuilder.from_iso_codes_639_1(*codes)
    if not full:
        builder = builder.with_low_accuracy_mode()
    return builder.build()


def _detector(full: bool):
    return _preloaded if full and _preloaded is not None else _lazy_detector(full)


def prose(text: str) -> str:
    return re.sub(r"\s+", " ", _IDENT.sub(" ", _CODE.sub(" ", text))).strip()


def detect(text: str, previous: str | None = None) -> tuple[str, float]:
    """(ISO 639-1 code, confidence 0..1). Falls back to `previous`, else English, when unsure."""
    words = prose(text)
    fallback = previous or "en"
    if len(words) < 2 and not re.search(r"[\u0400-\u04ff\u3040-\u30ff\u4e00-\u9fff\uac00-\ud7af]", words):
        return fallback, 0.0
    # The fast detector settles clear cases; short or mixed text goes to the full models.
    values = _detector(False).compute_language_confidence_values(words)
    if len(words) < LONG_TEXT or not values or values[0].value < 0.95:
        values = _detector(True).compute_language_confidence_values(words)
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
