"""Whether anything answers at a Ray address, asked in seconds before Ray is: `ray.init` retries an address where
nothing listens for minutes, printing its C++ warnings all the while."""

import socket

CONNECT_S = 5.0  # a head node on any network answers a TCP connect well within this
GCS_PORT, CLIENT_PORT = 6379, 10001  # Ray's defaults: the head's GCS, and the Ray Client server (ray://)


def endpoint(address: str) -> tuple[str, int]:
    """(host, port) of a Ray address: `host[:port]` or `ray://host[:port]`, an IPv6 host in brackets."""
    rest = address.removeprefix("ray://").rstrip("/")
    host, colon, port = rest.rpartition(":")
    if not colon or not port.isdigit() or (":" in host and not host.endswith("]")):  # no port, or a bare IPv6 host
        host, port = rest, ""
    default = CLIENT_PORT if address.startswith("ray://") else GCS_PORT
    return host.strip("[]"), int(port) if port else default


def unreachable(address: str, timeout_s: float = CONNECT_S) -> str | None:
    """Why nothing answers at `address` (refused, no answer in time, unknown host), or None when something does."""
    host, port = endpoint(address)
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return None
    except TimeoutError:
        return f"no answer at {host}:{port} within {timeout_s:g} s"
    except OSError as exc:
        return f"nothing answers at {host}:{port} ({exc.strerror or exc})"
