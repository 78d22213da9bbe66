"""Rules for serve mode's proxy (explorer.listen_address, proxy_port, min_running_model_num,
service_status_check_interval, db_url): one endpoint in front of the engines (trinity/runtime/rollout/proxy.py)."""

import ipaddress
import re

from .. import modes
from ._context import Context
from ._rule import rule
from .rollout import ROLLOUT

PROXY_KEYS = (
    "explorer.listen_address",
    "explorer.proxy_port",
    "explorer.service_status_check_interval",
    "explorer.min_running_model_num",
    "explorer.db_url",
)
SQLITE_URL = "sqlite:///"
# a host name as RFC 1123 has it: dot-separated labels of letters, digits and inner hyphens
_HOST_NAME = re.compile(
    r"^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$"
)


@rule(reads=(*PROXY_KEYS, "mode", f"{ROLLOUT}.engine_num", f"{ROLLOUT}.base_port"))
def serve_proxy(ctx: Context) -> None:
    """Serve mode's proxy (Trinity-RFT's explorer/proxy/) listens on listen_address:proxy_port, keeps
    min_running_model_num of the engines serving and records its calls in the SQLite database db_url; outside serve
    mode nothing reads these keys (as upstream)."""
    if not modes.mode(ctx.get("mode")).serves:
        for key in PROXY_KEYS:
            if ctx.user_set(key):
                ctx.report(
                    "note",
                    key,
                    "changes nothing: only serve mode runs the proxy in front of the engines",
                    hint=f"remove {key}, or set mode: serve",
                )
    _listen_address(ctx)
    port, base, engines = (
        ctx.get("explorer.proxy_port"),
        ctx.get(f"{ROLLOUT}.base_port"),
        ctx.get(f"{ROLLOUT}.engine_num"),
    )
    if port and base is not None and base <= port < base + engines:
        ctx.report(
            "error",
            "explorer.proxy_port",
            f"engine {port - base}'s OpenAI endpoint listens on {port} ({ROLLOUT}.base_port={base} + its number), "
            "where the proxy would listen",
            allowed=f"a port outside {base}..{base + engines - 1}",
            hint=f"change explorer.proxy_port or {ROLLOUT}.base_port",
        )
    least = ctx.get("explorer.min_running_model_num")
    if least > engines:
        ctx.report(
            "error",
            "explorer.min_running_model_num",
            f"the proxy keeps {least} engines serving while the others take new weights, and the run has "
            f"{engines} ({ROLLOUT}.engine_num)",
            allowed=f"1..{engines}",
            hint=f"lower explorer.min_running_model_num, or raise {ROLLOUT}.engine_num",
        )
    _db_url(ctx)


def _listen_address(ctx: Context) -> None:
    key = "explorer.listen_address"
    value = ctx.get(key)
    try:
        ipaddress.ip_address(value)
        return
    except ValueError:
        if _HOST_NAME.match(value):
            return
    if "://" in value:
        hint = "write the address alone (0.0.0.0, 127.0.0.1, a host name), not a URL"
    elif value.count(":") == 1:
        hint = "write the port in explorer.proxy_port, the address alone here"
    else:
        hint = "write an IP address (0.0.0.0 for every interface, 127.0.0.1 for this host only) or a host name"
    ctx.report("error", key, f"{value!r} is neither an IP address nor a host name", allowed="an address", hint=hint)


def _db_url(ctx: Context) -> None:
    key = "explorer.db_url"
    value = ctx.get(key)
    if value is None:
        return
    scheme = value.split("://", 1)[0] if "://" in value else ""
    if not value.startswith(SQLITE_URL) or len(value) == len(SQLITE_URL):
        message = (
            f"the proxy records its calls in SQLite; {scheme!r} is another database (Trinity-RFT's recorder takes any "
            "SQLAlchemy URL, trinity writes SQLite only)"
            if scheme and scheme != "sqlite"
            else f"{value!r} is not a SQLite URL with a path"
        )
        ctx.report(
            "error",
            key,
            message,
            allowed="sqlite:///<path>",
            hint="write sqlite:///proxy_history.db (in the run directory), sqlite:////abs/path.db, or remove it for "
            "<run dir>/proxy_history.db",
        )
