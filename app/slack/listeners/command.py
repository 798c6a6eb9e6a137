"""`/jaxmem ask QUESTION`, `/jaxmem review` + a ``` block, `/jaxmem verify TOPIC`, `/jaxmem help`."""
from __future__ import annotations

from app.slack import flows, render

COMMAND = "/jaxmem"  # as registered in slack-manifest.yaml
KINDS = ("ask", "review", "verify", "help")
USAGE = ("*/jaxmem* commands:\n"
         "• `/jaxmem ask QUESTION`: a grounded answer, in your language, with cited cards\n"
         "• `/jaxmem review` followed by code in a ``` block: findings with card links\n"
         "• `/jaxmem verify TOPIC`: run the topic's before/after snippets here and report\n"
         "Or mention @jaxmem in a channel, or send it a direct message.")


def parse(text: str, topics) -> tuple[str, str, str | None]:
    """(kind, argument, problem). `topics` is called only for `verify`: it reads the corpus."""
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
    if kind == "verify":
        valid = topics()
        if rest not in valid:
            what = f"`{rest}` is not a topic with snippets" if rest else "Name a topic"
            return kind, rest, f"{what}. Valid topics: {', '.join(valid) or '(none in this corpus)'}."
    return kind, rest, None


def register(app, bot) -> None:
    topics = bot.services.verify_topics

    def ack_command(ack, command):
        kind, arg, problem = parse(flows.clean(command.get("text", "")), topics)
        if problem:
            ack(text=problem)  # ephemeral: only the user sees usage mistakes
            return
        status = {"ask": render.t(flows.language(bot, arg), "thinking"), "review": render.t("en", "reviewing"),
                  "verify": render.t("en", "verifying", topic=arg)}[kind]
        ack(text=f":hourglass_flowing_sand: {status}")

    def run_command(command, client, respond):
        kind, arg, problem = parse(flows.clean(command.get("text", "")), topics)
        if problem:
            return
        flows.reply_to_command(bot, client, respond, channel=command["channel_id"], user=command["user_id"],
                               kind=kind, arg=arg)

    app.command(COMMAND)(ack=ack_command, lazy=[run_command])
