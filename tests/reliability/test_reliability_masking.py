"""Masking in the runtime (issue 10, item 3): the output relay of each rank and the failure file replace the values of
the variables named in TRAINOPS_MASK_VARIABLES by ****, also when a secret arrives split across writes or inside a
line longer than the relay holds back.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

SECRET = "hf_Reliability-Secret-7f3a9c"


def test_the_failure_file_masks_secrets_of_the_launcher_environment(tmp_path, monkeypatch):
    from trainops.runtime.failure import Failure, render_failure, write_once

    monkeypatch.setenv("HF_TOKEN", SECRET)
    monkeypatch.setenv("SHORT", "abc")
    monkeypatch.setenv("TRAINOPS_MASK_VARIABLES", "HF_TOKEN,SHORT,NOT_SET")
    text = render_failure(Failure(reason="error", host="algo-1", rank=0, exit_code=1,
                                  exception=f"ValueError: {SECRET}", stderr_tail=[f"token {SECRET} abc"]))
    assert SECRET not in text and "ValueError: ****" in text and "token **** abc" in text  # 3 characters: kept
    path = tmp_path / "failure"
    assert write_once(str(path), f"relayed from another host: {SECRET}")
    assert path.read_text() == "relayed from another host: ****"


RELAY_CHILD = textwrap.dedent('''
    import os, sys, time
    from trainops.runtime.output_relay import OutputRelay
    relay = OutputRelay(b"", sys.argv[1])
    relay.start()
    secret = os.environ["API_KEY"]
    os.write(2, b"start " + secret[:3].encode())
    time.sleep(0.05)
    os.write(2, secret[3:].encode() + b" end\\n")
    os.write(1, b"out " + secret.encode() + b"\\n")
    os.write(2, b"x" * 70000 + secret.encode() + b"y" * 10 + b"\\n")
    relay.stop()
''')


def test_the_relay_masks_secrets_split_across_writes_and_in_long_lines(tmp_path):
    tail = tmp_path / "rank-0.stderr"
    environment = {**os.environ, "API_KEY": SECRET, "TRAINOPS_MASK_VARIABLES": "API_KEY"}
    completed = subprocess.run([sys.executable, "-c", RELAY_CHILD, str(tail)], capture_output=True, timeout=60,
                               env=environment)
    assert completed.returncode == 0, completed.stderr[-2000:]
    output = completed.stdout + completed.stderr + tail.read_bytes()
    assert SECRET.encode() not in output
    assert b"start **** end\n" in completed.stderr and completed.stdout == b"out ****\n"
    assert completed.stderr.endswith(b"x" * 10 + b"****" + b"y" * 10 + b"\n")
    assert tail.read_bytes() == completed.stderr  # the tail holds what was shown, masked the same way
