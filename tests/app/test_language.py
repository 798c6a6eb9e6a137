"""Language detection on the short, code-laden text users actually type."""
from __future__ import annotations

import pytest

from jaxmem.app.language import detect, prose

CASES = [
    ("Varför tar JAX 75 % av GPU-minnet när jag startar träningen?", "sv"),
    ("Чому JAX одразу займає майже всю пам'ять відеокарти?", "uk"),
    ("Perché il mio ciclo di addestramento rallenta quando stampo la loss?", "it"),
    ("Warum wird meine jit-Funktion bei jeder Iteration neu kompiliert?", "de"),
    ("Pourquoi ma boucle est-elle lente quand j'affiche la perte à chaque pas ?", "fr"),
    ("¿Por qué mi bucle es lento cuando imprimo la pérdida?", "es"),
    ("Por que meu loop fica lento quando imprimo a perda a cada passo?", "pt"),
    ("jax.device_put で転送を減らすにはどうすればいいですか", "ja"),
    ("为什么 JAX 一启动就占用了 75% 的显存？", "zh"),
    ("Dlaczego JAX zajmuje prawie całą pamięć karty graficznej?", "pl"),
    ("Почему JAX сразу занимает почти всю память видеокарты?", "ru"),
    ("왜 JAX가 시작하자마자 GPU 메모리를 75% 차지하나요?", "ko"),
]


@pytest.mark.parametrize("text,lang", CASES, ids=[c[1] for c in CASES])
def test_detects_the_question_language(text, lang):
    assert detect(text)[0] == lang


def test_identifiers_and_code_do_not_decide_the_language():
    assert "donate_argnums" not in prose("Hur använder jag `donate_argnums` med jax.jit?")
    assert detect("Hur använder jag donate_argnums med jax.jit i min träningsloop?")[0] == "sv"


def test_short_follow_up_keeps_the_conversation_language():
    assert detect("and on TPU?", previous="sv")[0] == "sv"
    assert detect("and on TPU?")[0] == "en"


def test_clear_switch_of_language_is_followed():
    assert detect("Könntest du das bitte auf Deutsch genauer erklären, mit einem Beispiel?", previous="sv")[0] == "de"
