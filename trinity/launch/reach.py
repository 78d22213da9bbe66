"""Whether a Ray address can be joined, asked in seconds before Ray is: `ray.init` retries an address where nothing
listens for minutes, printing its C++ warnings all the while, and refuses one without a port with a traceback."""

import ipaddress
import socket

CONNECT_S = 5.0  # a head node on any network answers a TCP connect well within this
CLIENT_PORT = 10001  # the Ray Client server's default (ray://host)
LOOPBACK_NAMES = ("localhost",)


def endpoint(address: str) -> tuple[str, int] | None:
    """(host, port) that `address` reaches: `host:port`, or `ray://host[:port][/...]` (an IPv6 host in brackets).
    None for another scheme (Ray hands it to a client of that scheme's own). ValueError: no port where Ray needs one."""
    scheme, sep, rest = address.partition("://")
    if sep and scheme != "ray":
        return None
    rest = (rest if sep else address).split("/", 1)[0]
    host, colon, port = rest.rpartition(":")
    if not colon or not port.isdigit() or (":" in host and not host.endswith("]")):  # no port, or a bare IPv6 host
        if not sep:
            raise ValueError(
                f"{address!r} has no port: a Ray address is host:port (the head's GCS port, 6379 by default)"
            )
        host, port = rest, str(CLIENT_PORT)
    return host.strip("[]"), int(port)


def unreachable(address: str, timeout_s: float = CONNECT_S) -> str | None:
    """Why `address` cannot be joined (no port; refused, no answer in time, unknown host), or None."""
    try:
        target = endpoint(address)
    except ValueError as exc:
        return str(exc)
    if target is None:
        return None
    host, port = target
    asked = host if address.startswith("ray://") else _joined_at(host)  # Ray Client connects as written
    where = f"{host}:{port}" + (f" (which Ray joins at {asked}:{port})" if asked != host else "")
    try:
        with socket.create_connection((asked, port), timeout=timeout_s):
            return None
    except TimeoutError:
        return f"no answer at {where} within {timeout_s:g} s"
    except OSError as exc:
        return f"nothing answers at {where} ({exc.strerror or exc})"


def _joined_at(host: str) -> str:
    """Where `ray.init` connects for `host`: a loopback host is replaced by the address Ray gives this node, so a
    listener on loopback alone (an ssh tunnel) would pass a probe of the host as written and still never answer Ray."""
    if host not in LOOPBACK_NAMES and not _is_loopback(host):
        return host
    from ray._private.services import get_node_ip_address

    return get_node_ip_address()


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
