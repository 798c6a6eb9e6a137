"""Parts of the web pages: the services handle, answer and evidence views, review views.

Kept out of app/pages/, where Streamlit looks for pages: a module there is served as a page of
its own at its own URL, outside the app's navigation.
"""
