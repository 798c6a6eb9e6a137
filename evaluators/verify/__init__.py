"""The verifier: run before/after snippet pairs in isolated child processes and measure them.

`sandbox` starts a child (scrubbed environment, temp cwd, timeout, memory ceiling), `probe` is
what runs inside it, `runner` turns one child run into measurements, `verdicts` compares a pair,
`store` keeps results, and `api` is the small surface the advisor, web and Slack front ends call.
"""
