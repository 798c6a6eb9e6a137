"""The Slack front end: `jaxmem slack` (see the "Slack bot" section of README.md)."""
