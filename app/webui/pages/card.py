"""One card, in any of its languages: where every card link of the app's answers leads
(`card?topic=buffer-donation&lang=sv`). Read from the corpus, so it works before the index is built."""
import streamlit as st

from jaxmem.app.webui import shared

topic = st.query_params.get("topic", "")
lang = st.query_params.get("lang", "en")
if not topic:
    st.title("Cards")
    st.info("Open a card from an answer, or pick one here.")
    try:
        topics = shared.services().card_topics()
    except Exception as exc:
        topics = {}
        shared.show_error(exc, "list the cards")
    for tid, scope in sorted(topics.items()):
        st.markdown(f"- [{tid}](card?topic={tid}&lang={lang}): {scope}")
    st.stop()
try:
    card = shared.services().card_page(topic, lang)
except Exception as exc:
    shared.show_error(exc, f"open the card {topic!r}")
    st.stop()

st.title(card["title"])
st.caption(f"`{card['topic']}` · applies to {', '.join(card['applies_to'])} · "
           + " · ".join(f"**{code}**" if code == card["lang"] else f"[{code}](card?topic={card['topic']}&lang={code})"
                        for code in card["languages"]))
if card["asked_lang"] != card["lang"]:
    st.info(f"This card has no {card['asked_lang']!r} version yet; shown in English.")
st.markdown(f"*{card['summary']}*")
st.markdown(card["body"])
st.markdown("**Sources**\n\n" + "\n".join(f"- {url}" for url in card["sources"]))
