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
        ("head", ("head", 6379)),  # Ray's GCS port
        ("ray://head", ("head", 10001)),  # the Ray Client server's
        ("ray://head:2000/", ("head", 2000)),
        ("[::1]:7000", ("::1", 7000)),
        ("[::1]", ("::1", 6379)),
        ("::1", ("::1", 6379)),  # a bare IPv6 host has no port
    ],
)
def test_an_address_names_a_host_and_a_port(address, expected):
    assert endpoint(address) == expected


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


def test_a_listening_port_answers_and_a_closed_one_is_refused():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        assert unreachable(f"127.0.0.1:{server.getsockname()[1]}") is None
    port = _free_port()
    assert unreachable(f"127.0.0.1:{port}") == f"nothing answers at 127.0.0.1:{port} (Connection refused)"
