"""Hostile data for the staging tests of issue 10, item 2 (test_reliability_hostile_data.py and
bench/reliability.py): S3 keys and local trees that try to write outside the destination or to confuse whoever
reads the report, and the means to check that nothing landed outside.
"""

from __future__ import annotations

import os
from pathlib import Path

#: Keys under `data/` that must be refused (or fail) and what each is once the prefix is off.
HOSTILE_KEYS = {
    "data/../escape-1": "../escape-1",
    "data//tmp/escape-2": "/tmp/escape-2",
    "data/x/../../../../tmp/trainops-escape-3": "x/../../../../tmp/trainops-escape-3",
    "data/./dot": "./dot",
    "data/new\nline": "new\nline",
    "data/tab\tname": "tab\tname",
    "data/nul\x00name": "nul\x00name",
    "data/escape\x1b[31mcolour": "escape\x1b[31mcolour",
    "data/marker-with-data/": "marker-with-data/",
    "data/.trainops-stage.json": ".trainops-stage.json",
    "data/" + "n" * 300: "n" * 300,  # longer than a file name may be (255 bytes)
    "data/both": "both",  # also a prefix (data/both/inner): one of the two cannot be written
}
GOOD_KEYS = {"data/ok.txt": b"ok", "data/both/inner": b"inner", "data/sub dir/with space.txt": b"space",
             "data/\u00fcnic\u00f8de.txt": b"unicode", "data/..\\..\\backslashes": b"a plain name on Linux"}
SENTINELS = [Path("/tmp/escape-2"), Path("/tmp/trainops-escape-3"), Path("/escape-1")]


def snapshot(root: Path, skip: Path) -> set[str]:
    """Every path under `root` except those under `skip` (links not followed)."""
    found = set()
    for directory, directories, files in os.walk(root):
        for entry in directories + files:
            path = Path(directory) / entry
            if path != skip and skip not in path.parents:
                found.add(str(path.relative_to(root)))
    return found


def reported(report) -> set[str]:
    return {item.name for item in report.refused} | {item.name for item in report.failed}


def put_hostile_objects(bucket: str) -> None:
    """Create the good and hostile keys in `bucket` of the in-process moto server (straight into its store: HTTP
    cannot carry some of these keys)."""
    from moto.s3.models import s3_backends
    from support.moto_server import ACCOUNT_ID

    backend = s3_backends[ACCOUNT_ID]["aws"]
    for key, data in {**GOOD_KEYS, **{key: b"hostile" for key in HOSTILE_KEYS}}.items():
        backend.put_object(bucket, key, data)


def make_hostile_tree(tmp_path: Path) -> Path:
    """A local tree with links out of it, control characters in names, a FIFO, and good files."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("outside the tree")
    source = tmp_path / "source"
    (source / "inner").mkdir(parents=True)
    (source / "ok.txt").write_text("ok")
    (source / "inner" / "real.txt").write_text("real")
    (source / "up").symlink_to("../outside/secret.txt")
    (source / "inner" / "deep-up").symlink_to("../../outside/secret.txt")
    (source / "absolute").symlink_to(outside / "secret.txt")
    (source / "dir-out").symlink_to(outside)
    (source / "etc").symlink_to("/etc")
    (source / "dangling").symlink_to(source / "nowhere")
    (source / "inner" / "loop").symlink_to(source)
    (source / "new\nline.txt").write_text("newline")
    (source / "esc\x1b[2Jape.txt").write_text("escape")
    (source / "inner-link").symlink_to("inner/real.txt")  # stays inside: fine
    os.mkfifo(source / "fifo")
    return source


LOCAL_HOSTILE = {"up", "inner/deep-up", "absolute", "dir-out", "etc", "dangling", "inner/loop", "new\nline.txt",
                 "esc\x1b[2Jape.txt", "fifo"}
