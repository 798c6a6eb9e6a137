"""Markdown -> mrkdwn (golden file) and splitting to Slack's limits."""
from __future__ import annotations

from pathlib import Path

import pytest

from jaxmem.app.slack.format import SECTION_LIMIT, pack, split_text, to_mrkdwn

GOLDEN = Path(__file__).parent / "golden"


def test_answer_markdown_converts_to_the_golden_mrkdwn():
    # The golden input holds every construct the composer writes (headings, bold, links, fenced
    # code with a language tag, bullets, quotes, rules) plus the characters mrkdwn must escape.
    got = to_mrkdwn((GOLDEN / "answer.md").read_text(encoding="utf-8"))
    assert got == (GOLDEN / "answer.mrkdwn").read_text(encoding="utf-8").rstrip("\n")


@pytest.mark.parametrize("md, expected", [
    ("**bold** and __bold__", "*bold* and *bold*"),
    ("*it* but 2 * 3 * 4", "_it_ but 2 * 3 * 4"),
    ("[a|b](https://x.org/p)", "<https://x.org/p|a¦b>"),
    ("`**not bold** <x>`", "`**not bold** &lt;x&gt;`"),
    ("# Title #", "*Title*"),
    ("```\nunclosed", "```\nunclosed\n```"),
])
def test_inline_conversions(md, expected):
    assert to_mrkdwn(md) == expected


def test_short_text_is_one_piece_and_empty_text_none():
    assert split_text("hello") == ["hello"]
    assert split_text("\n\n") == []


def test_long_text_splits_at_paragraphs_within_the_limit_and_loses_nothing():
    paragraphs = [f"Paragraph {i}: " + "word " * 120 for i in range(30)]
    text = "\n\n".join(p.strip() for p in paragraphs)
    pieces = split_text(text)
    assert len(pieces) > 1 and all(len(p) <= SECTION_LIMIT for p in pieces)
    assert all(p.startswith("Paragraph ") for p in pieces)  # cut between paragraphs, not inside
    assert " ".join(" ".join(pieces).split()) == " ".join(text.split())


def test_a_cut_inside_a_code_block_closes_and_reopens_the_fence():
    text = "Intro\n```\n" + "\n".join(f"x{i} = {i}" for i in range(1500)) + "\n```\nOutro"
    pieces = split_text(text, limit=1000)
    assert len(pieces) > 2 and all(len(p) <= 1000 for p in pieces)
    assert all(p.count("```") % 2 == 0 for p in pieces), "every piece renders its code on its own"
    assert pieces[-1].endswith("Outro")


def test_a_word_longer_than_the_limit_is_cut_hard():
    pieces = split_text("x" * 250, limit=100)
    assert [len(p) for p in pieces] == [96, 96, 58]


def test_split_limit_must_leave_room():
    with pytest.raises(ValueError, match="split limit 5 is too small"):
        split_text("abc", limit=5)


def test_pack_respects_blocks_and_characters_per_message():
    assert pack(["a"] * 120, per_message=50) == [["a"] * 50, ["a"] * 50, ["a"] * 20]
    assert [len(m) for m in pack(["x" * 3000] * 30, text_limit=40_000)] == [13, 13, 4]
    assert pack([]) == []
