"""Host lists as collect receives them (long comma lists used to hit ENAMETOOLONG in a file check)."""

from __future__ import annotations

from trainctl.inventory import parse_hosts


def test_a_64_host_comma_list_is_a_list_not_a_file_name() -> None:
    names = [f"node{i:02d}" for i in range(1, 65)]
    assert [h.name for h in parse_hosts(",".join(names))] == names
