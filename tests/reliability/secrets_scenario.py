"""The leaky job of the secret tests (issue 10, item 3), shared by test_reliability_secrets.py and
bench/reliability.py: a script that prints its token on stdout and stderr, splits it across writes, and (with FAIL
set) raises with it in the exception message; `hunt` runs it and counts where the token shows up.
"""

from __future__ import annotations

import hashlib
import json
import textwrap
from pathlib import Path

SECRET = "hf_Reliability-Secret-7f3a9c"
SECRET_DIGEST = hashlib.sha256(SECRET.encode()).hexdigest()

LEAKY_SCRIPT = textwrap.dedent('''
    """Prints its token on stdout and stderr; with FAIL set, rank FAIL raises with the token in the message."""
    import hashlib, os, sys, time
    token = os.environ["HF_TOKEN"]
    rank = int(os.environ.get("RANK", "0"))
    print(f"digest {hashlib.sha256(token.encode()).hexdigest()}", flush=True)
    print(f"rank {rank} stdout token={token}", flush=True)
    sys.stderr.write(f"rank {rank} stderr token={token}\\n")
    sys.stderr.flush()
    sys.stderr.write("split write " + token[:5])
    sys.stderr.flush()
    sys.stderr.write(token[5:] + " done\\n")
    sys.stderr.flush()
    # Every rank says it has printed; the failing rank waits for the others first, or the launcher could stop them
    # before their lines are out (seen under load).
    marks = os.environ["SM_OUTPUT_DATA_DIR"]
    os.makedirs(marks, exist_ok=True)
    open(os.path.join(marks, f"printed-{rank}"), "w").close()
    if os.environ.get("FAIL") == str(rank):
        world = int(os.environ.get("WORLD_SIZE", "1"))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not all(
                os.path.exists(os.path.join(marks, f"printed-{other}")) for other in range(world)):
            time.sleep(0.05)
        raise RuntimeError(f"login refused for token {token}")
    open(os.path.join(os.environ["SM_MODEL_DIR"], "model.txt"), "w").write("a model")
''')


def leaky_spec(tmp_path: Path, **extra) -> dict:
    source = tmp_path / "src"
    source.mkdir(exist_ok=True)
    (source / "leak.py").write_text(LEAKY_SCRIPT)
    return {"name": "leaky", "entry_point": "leak.py", "source_dir": str(source), "instance_type": "local",
            "instance_count": 1, "distribution": {"type": "torch_distributed", "processes_per_host": 2},
            "output_path": str(tmp_path / "out"),
            "environment": {"HF_TOKEN": SECRET, "TOKENIZER_NAME": "gpt2", **extra}}


def files_holding(root: Path, text: str) -> list[str]:
    found = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink() and text.encode() in path.read_bytes():
            found.append(str(path.relative_to(root)))
    return found


def hunt(root: Path) -> dict:
    """Run the leaky job (rank 1 fails with the token), then look for the token everywhere a user could see it."""
    import contextlib
    import io

    from trainops.cli import main
    from trainops.errors import JobFailed
    from trainops.steps.train import train

    lines: list[str] = []
    result: dict = {}
    try:
        train(leaky_spec(root, FAIL="1"), job_name="leaky-hunt", workdir=str(root / "work"), log=lines.append)
    except JobFailed as error:
        result = getattr(error, "result", {}) or {}
    shown = io.StringIO()
    with contextlib.redirect_stdout(shown), contextlib.redirect_stderr(shown):
        for command in (["status", "leaky-hunt", "--json"], ["logs", "leaky-hunt"]):
            main([*command, "--workdir", str(root / "work")])
    console = "\n".join(lines)
    files = [path for path in (root / "work").rglob("*") if path.is_file() and not path.is_symlink()]
    return {"script_saw_value": console.count(f"digest {SECRET_DIGEST}"),
            "in_console": console.count(SECRET), "in_step_result": json.dumps(result).count(SECRET),
            "in_status_and_logs_commands": shown.getvalue().count(SECRET),
            "files_checked": len(files), "files_with_secret": files_holding(root / "work", SECRET),
            "masked_occurrences": console.count("****")}
