"""What serve mode's proxy (proxy.py) sends an engine and hands back: the request's own headers but those of one
connection, a body that asks for the token ids and log-probs an experience needs, the answer without those the client
did not ask for, and the calls it makes to record."""

import json

from .history import RecordedCall
from .proxy_engines import EngineState

# headers that belong to one connection, not to the request (RFC 9110 7.6.1), and those httpx sets itself
HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "trailers",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
    "accept-encoding",
}


def asking_ids(path: str, body: dict) -> dict:
    """The request as sent to the engine: asking for the token ids and log-probs an experience needs."""
    sent = dict(body)
    sent["return_token_ids"] = True
    if path.endswith("/chat/completions"):
        sent["logprobs"] = True
    elif body.get("logprobs") is None:
        sent["logprobs"] = 0
    return sent


def as_asked(path: str, body: dict, reply: dict) -> dict:
    """The engine's answer without the ids and log-probs the client did not ask for."""
    shown = json.loads(json.dumps(reply))
    if not body.get("return_token_ids"):
        shown.pop("prompt_token_ids", None)
        for choice in shown.get("choices", []):
            choice.pop("token_ids", None)
    chat = path.endswith("/chat/completions")
    if (chat and not body.get("logprobs")) or (not chat and body.get("logprobs") is None):
        for choice in shown.get("choices", []):
            if chat:
                choice.pop("logprobs", None)
            else:
                choice["logprobs"] = None
    return shown


def recorded_calls(reply: dict, engine: EngineState) -> list[RecordedCall] | None:
    """The answer's choices as `engine` generated them (None: it did not give the ids, not trinity's engine)."""
    prompt = reply.get("prompt_token_ids")
    if not isinstance(prompt, list):
        return None
    version = reply.get("weight_version", engine.weight_version or 0)
    calls = []
    for choice in reply.get("choices", []):
        ids, logprobs = choice.get("token_ids"), choice.get("logprobs") or {}
        if not isinstance(ids, list):
            return None
        if "content" in logprobs:  # chat
            values = [t["logprob"] for t in logprobs["content"] or []]
            text = (choice.get("message") or {}).get("content") or ""
        else:
            values, text = list(logprobs.get("token_logprobs") or []), choice.get("text", "")
        if len(values) != len(ids):  # not what trinity's engine answers: kept, not rewardable
            return None
        calls.append(RecordedCall(reply["id"], prompt, ids, values, text, version, choice.get("finish_reason", "")))
    return calls
