"""Streamlit pages of the web chat and the helpers they share (see app/web.py)."""
