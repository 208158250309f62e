"""Exports a tiny data set: one file per split."""

import argparse
import os

parser = argparse.ArgumentParser()
parser.add_argument("--out")
arguments = parser.parse_args()
for split in ("train", "test"):
    os.makedirs(os.path.join(arguments.out, split), exist_ok=True)
    with open(os.path.join(arguments.out, split, "data.txt"), "w") as handle:
        handle.write("1 2 3\n")
