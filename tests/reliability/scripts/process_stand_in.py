"""A training stand-in for the process and log scenarios (tests/reliability/process_scenarios.py), driven by MODE:

- helper: start a helper that sheds the job's marker (minimal environment, new session, double fork) and carries
  TOKEN in its command line, then train for STEPS steps of 0.2 s;
- flood: print LINES lines of 100 bytes as fast as possible;
- no_newline: write MEGABYTES MiB to stdout without a newline, then a last line;
- progress: a progress bar drawn with \\r, twelve states 0.25 s apart, then a last line;
- fill: write to the model directory until the disk is full, and fail with that error;
- stdout_error: print the cause of its failure on stdout only (nothing on stderr, so no stderr tail), exit 3.
"""

import os
import subprocess
import sys
import time

mode = os.environ.get("MODE", "helper")
if mode == "helper":
    code = "import os, sys, time\nif os.fork():\n    os._exit(0)\nos.setsid()\ntime.sleep(300)\n"
    subprocess.Popen([sys.executable, "-c", code, os.environ["TOKEN"]], env={"PATH": os.environ.get("PATH", "")},
                     start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL)
    print("helper started", flush=True)
    for step in range(int(os.environ.get("STEPS", "10"))):
        print(f"step {step}", flush=True)
        time.sleep(0.2)
    print("finished", flush=True)
elif mode == "flood":
    line = "x" * 99 + "\n"
    for _ in range(int(os.environ.get("LINES", "50000"))):
        sys.stdout.write(line)
    sys.stdout.flush()
    print("finished", flush=True)
elif mode == "no_newline":
    chunk = b"y" * (1 << 20)
    for _ in range(int(os.environ.get("MEGABYTES", "300"))):
        sys.stdout.buffer.write(chunk)
    sys.stdout.buffer.write(b"\nfinished\n")
    sys.stdout.flush()
elif mode == "progress":
    for state in range(12):
        sys.stdout.write(f"\rprogress {state * 10}%")
        sys.stdout.flush()
        time.sleep(0.25)
    sys.stdout.write("\nfinished\n")
    sys.stdout.flush()
elif mode == "fill":
    chunk = b"z" * (1 << 20)
    with open(os.path.join(os.environ.get("SM_MODEL_DIR", "."), "fill.bin"), "wb") as handle:
        while True:
            handle.write(chunk)
            handle.flush()
elif mode == "stdout_error":
    print("loading shard 7", flush=True)
    print("shard 7 could not be read: the evidence only stdout holds", flush=True)
    sys.exit(3)
