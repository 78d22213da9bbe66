"""Whether anything answers at a Ray address: parsed as Ray reads it, asked over a real socket."""

import socket

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trinity.launch.reach import endpoint, unreachable


@pytest.mark.parametrize(
    "address, expected",
    [
        ("10.0.0.1:6380", ("10.0.0.1", 6380)),
        ("ray://head", ("head", 10001)),  # the Ray Client server's port
        ("ray://head:2000/", ("head", 2000)),
        ("ray://head:2000/namespace", ("head", 2000)),
        ("[::1]:7000", ("::1", 7000)),
        ("anyscale://cluster", None),  # another scheme: Ray hands it to that scheme's client, nothing to ask here
    ],
)
def test_an_address_names_a_host_and_a_port(address, expected):
    assert endpoint(address) == expected


@pytest.mark.parametrize("address", ["head", "[::1]", "::1", "head:http"])
def test_an_address_without_a_port_is_refused_before_ray_raises(address):
    assert unreachable(address) == (
        f"{address!r} has no port: a Ray address is host:port (the head's GCS port, 6379 by default)"
    )


hosts = st.one_of(
    st.from_regex(r"[a-z][a-z0-9-]{0,20}(\.[a-z][a-z0-9-]{0,10}){0,2}", fullmatch=True),
    st.ip_addresses(v=4).map(str),
)


@given(host=hosts, port=st.integers(1, 65535), client=st.booleans())
def test_a_written_port_is_the_one_asked(host, port, client):
    assert endpoint(f"{'ray://' if client else ''}{host}:{port}") == (host, port)


@given(host=st.ip_addresses(v=6).map(str), port=st.integers(1, 65535))
def test_an_ipv6_host_in_brackets_keeps_its_colons(host, port):
    assert endpoint(f"[{host}]:{port}") == (host, port)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_no_answer_in_time_and_an_unknown_host_say_so(monkeypatch):
    def silent(address, timeout):
        raise TimeoutError

    monkeypatch.setattr(socket, "create_connection", silent)
    assert unreachable("10.1.2.3:6379", timeout_s=0.5) == "no answer at 10.1.2.3:6379 within 0.5 s"
    monkeypatch.undo()
    assert unreachable("no-such-host.invalid:6379").startswith("nothing answers at no-such-host.invalid:6379 (")


def test_a_loopback_address_is_asked_where_ray_joins_it():
    """Ray joins 127.0.0.1 at this node's address: a listener on loopback alone never answers Ray, one on the node's
    address does; a ray:// address is asked as written (Ray Client does not rewrite it)."""
    from ray._private.services import get_node_ip_address

    node = get_node_ip_address()
    if node.startswith("127."):
        pytest.skip("this machine's node address is a loopback address")
    with socket.socket() as server:
        server.bind((node, 0))
        server.listen()
        port = server.getsockname()[1]
        assert unreachable(f"127.0.0.1:{port}") is None and unreachable(f"localhost:{port}") is None
    with socket.socket() as tunnel:
        tunnel.bind(("127.0.0.1", 0))
        tunnel.listen()
        port = tunnel.getsockname()[1]
        assert unreachable(f"127.0.0.1:{port}") == (
            f"nothing answers at 127.0.0.1:{port} (which Ray joins at {node}:{port}) (Connection refused)"
        )
        assert unreachable(f"ray://127.0.0.1:{port}") is None


def test_a_listening_port_answers_and_a_closed_one_is_refused():
    with socket.socket() as server:
        server.bind(("", 0))  # every address: Ray joins a loopback host at the node's
        server.listen()
        assert unreachable(f"127.0.0.1:{server.getsockname()[1]}") is None
    port = _free_port()
    assert unreachable(f"ray://127.0.0.1:{port}") == f"nothing answers at 127.0.0.1:{port} (Connection refused)"
