"""The gateway tree's pure parts: slices of the host list and who a dataset path is about."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trainctl.errors import InputError
from trainctl.ops.collect.gateways import assign_subtrees, owner_of


@given(n=st.integers(0, 300), k=st.integers(1, 12))
def test_slices_are_contiguous_near_equal_and_cover_every_host_once(n: int, k: int) -> None:
    hosts = [f"node{i:03d}" for i in range(n)]
    plan = assign_subtrees(hosts, [f"gw{j}" for j in range(k)])
    assert [h for part in plan.values() for h in part] == hosts
    sizes = [len(p) for p in plan.values()]
    assert not sizes or max(sizes) - min(sizes) <= 1


def test_bad_gateway_lists_are_one_line_errors() -> None:
    with pytest.raises(InputError, match="empty"):
        assign_subtrees(["a"], [])
    with pytest.raises(InputError, match="twice"):
        assign_subtrees(["a", "b"], ["gw", "gw"])


def test_owner_of_dataset_paths() -> None:
    assert owner_of("timeline/host=node07/part-0.parquet") == "node07"
    assert owner_of("logs/node07/rank-3.log") == "node07"
    assert owner_of("kernel/node07/dmesg.txt") == "node07"
    assert owner_of("collection_status/host=node07/part-collect.parquet") == "node07"
    assert owner_of("run.json") is None and owner_of("ranks/rank-3.json") is None


def test_two_senders_writing_one_host_less_file_at_once_both_succeed(tmp_path) -> None:
    """Two gateways bring run.json at the same moment: each writes its own temp file and renames it
    (a shared temp name let one rename the other's away: a gateway failed with ENOENT under load)."""
    import io
    import tarfile
    import threading

    from trainctl.ops.collect.collection import write_tar_member

    body = b'{"run_id": "r"}' * 2000
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        info = tarfile.TarInfo("run.json")
        info.size = len(body)
        tf.addfile(info, io.BytesIO(body))
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def send() -> None:
        try:
            with tarfile.open(fileobj=io.BytesIO(buf.getvalue()), mode="r|") as tf:
                for m in tf:
                    start.wait()
                    write_tar_member(tf, m, tmp_path / "run.json", 0)
        except BaseException as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=send) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and (tmp_path / "run.json").read_bytes() == body
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]  # no temp file left behind
