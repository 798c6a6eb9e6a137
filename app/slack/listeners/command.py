"""`/jaxmem ask QUESTION`, `/jaxmem review` + a ``` block, `/jaxmem verify TOPIC`, `/jaxmem help`."""
from __future__ import annotations

from jaxmem.app.slack import flows, render

COMMAND = "/jaxmem"  # as registered in slack-manifest.yaml
KINDS = ("ask", "review", "verify", "help")
USAGE = ("*/jaxmem* commands:\n"
         "• `/jaxmem ask QUESTION`: a grounded answer, in your language, with cited cards\n"
         "• `/jaxmem review` followed by code in a ``` block: findings with card links\n"
         "• `/jaxmem verify TOPIC`: run the topic's before/after snippets here and report\n"
         "• `/jaxmem verify` followed by code in a ``` block: run your script in the sandbox and report its "
         "transfers and host syncs (where the server allows user code)\n"
         "Or mention @jaxmem in a channel, or send it a direct message.")


def parse(text: str) -> tuple[str, str, str | None]:
    """(kind, argument, problem), from the text alone: the 3-second acknowledgement does no I/O.
    Whether a topic exists is checked after the ack (`flows.verify_in_channel`)."""
    text = (text or "").strip()
    head, _, rest = text.partition(" ")
    if "\n" in head:  # "/jaxmem review\n```..." : the kind ends at the newline
        head, _, more = head.partition("\n")
        rest = more + (" " + rest if rest else "")
    kind = head.lower()
    if kind not in KINDS:
        kind, rest = ("ask", text) if text else ("help", "")
    rest = rest.strip()
    if kind == "help":
        return kind, "", USAGE
    if kind == "ask" and not rest:
        return kind, rest, "Ask something: `/jaxmem ask Why does JAX take 75% of my GPU memory?`"
    if kind == "review" and "```" not in rest:
        return kind, rest, "Paste the code in a ``` block after `/jaxmem review`."
    if kind == "verify" and not rest:
        return kind, rest, "Name a topic (`/jaxmem verify buffer-donation`) or paste code in a ``` block."
    return kind, rest, None


def register(app, bot) -> None:
    def ack_command(ack, command):
        # Only parsing here: no language detection, no corpus read, no model (Slack's 3 s).
        kind, arg, problem = parse(flows.clean(command.get("text", "")))
        if problem:
            ack(text=problem)  # ephemeral: only the user sees usage mistakes
            return
        status = {"ask": render.t("en", "thinking"), "review": render.t("en", "reviewing"),
                  "verify": render.t("en", "verifying_any")}[kind]
        ack(text=f":hourglass_flowing_sand: {status}")

    def run_command(command, client, respond):
        kind, arg, problem = parse(flows.clean(command.get("text", "")))
        if problem:
            return
        flows.reply_to_command(bot, client, respond, channel=command["channel_id"], user=command["user_id"],
                               kind=kind, arg=arg)

    app.command(COMMAND)(ack=ack_command, lazy=[run_command])
