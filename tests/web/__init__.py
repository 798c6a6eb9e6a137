"""Web front end tests (AppTest and the browser end-to-end test)."""
