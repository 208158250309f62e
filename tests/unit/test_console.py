"""The console handler when standard output's reader leaves (``trainops run ... | head``): the command goes on and
says nothing more, instead of a logging traceback for every message after the reader left."""

from __future__ import annotations

import os
import subprocess
import sys

SCRIPT = """
import logging, os, sys
from trainops.console import attach_console
told, closed = int(sys.argv[1]), int(sys.argv[2])
attach_console()
log = logging.getLogger("trainops.test")
log.info("first")
os.write(told, b"x")               # the first line is out: the test closes the read end of standard output now
os.read(closed, 1)                 # ... and says when it has
for number in range(5):
    log.warning("after the reader left %d", number)
print("the command went on", file=sys.stderr)
"""


def test_a_reader_that_leaves_ends_the_output_quietly_and_the_command_goes_on():
    output_read, output_write = os.pipe()
    told_read, told_write = os.pipe()
    closed_read, closed_write = os.pipe()
    process = subprocess.Popen([sys.executable, "-c", SCRIPT, str(told_write), str(closed_read)],
                               stdout=output_write, stderr=subprocess.PIPE, pass_fds=(told_write, closed_read),
                               text=True)
    for descriptor in (output_write, told_write, closed_read):
        os.close(descriptor)
    try:
        assert os.read(told_read, 1) == b"x"
        assert os.read(output_read, 100).decode().startswith("first")
        os.close(output_read)  # the reader leaves
        os.write(closed_write, b"x")
        _, stderr = process.communicate(timeout=60)
    finally:
        os.close(told_read)
        os.close(closed_write)
    assert process.returncode == 0, stderr
    assert "the command went on" in stderr
    assert "Logging error" not in stderr and "BrokenPipeError" not in stderr, stderr
