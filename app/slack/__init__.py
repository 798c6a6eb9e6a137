"""The Slack front end: `jaxmem slack` (see app/slack/README-section.md)."""
