"""`trainops completion bash|zsh` (issue 47, item 6): the script completes commands, sub-commands and flags in a real
bash, as a user's Tab would (COMP_WORDS set, the completion function called), and zsh loads it through
bashcompinit."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest


def script(shell: str) -> str:
    done = subprocess.run([sys.executable, "-m", "trainops.cli", "completion", shell], capture_output=True,
                          text=True, check=True)
    return done.stdout


def complete(*words: str) -> list[str]:
    """What bash offers after ``trainops WORDS`` (the last word is the one being completed)."""
    words_text = " ".join(f"'{word}'" for word in ("trainops", *words))
    program = (f"{script('bash')}\nCOMP_WORDS=({words_text}); COMP_CWORD={len(words)}; _trainops; "
               'printf "%s\\n" "${COMPREPLY[@]}"')
    done = subprocess.run(["bash", "-c", program], capture_output=True, text=True, check=True)
    return done.stdout.split()


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_bash_completes_commands_sub_commands_and_flags():
    assert {"run", "status", "backends", "kfp", "completion"} <= set(complete(""))
    assert complete("ru") == ["run"]
    assert complete("kfp", "") == ["build", "compile", "run-local"]
    assert "--backend" in complete("run", "spec.yaml", "--back")
    assert complete("kfp", "run-local", "--wor") == ["--workdir"]
    assert "--json" in complete("backends", "--")


def test_the_zsh_script_loads_bash_completion_first():
    text = script("zsh")
    assert text.startswith("autoload -U +X bashcompinit && bashcompinit\n")
    assert "complete -o filenames -F _trainops trainops" in text
