"""The command of every containerized trainops component: ``python3 -m trainops.components.executor``.

KFP starts it with ``--executor_input <JSON> --function_to_execute <name>`` (the arguments of its own
``kfp.dsl.executor_main``). It runs the component function of that name from the installed
`trainops.components.functions` through KFP's own ``Executor``, which reads the inputs, calls the function and writes
the outputs and the executor output file the launcher collects. Unlike ``kfp.dsl.executor_main``, it needs no
``kfp_config.ini`` and no function source in the YAML: the image's trainops is the code that runs.

It is the container's first process (PID 1 in a pod), so SIGTERM from a pod deletion reaches the component's own
handler (the train component stops its job). Exit codes: 0 done; 1 the function raised (traceback on stderr);
2 bad arguments.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m trainops.components.executor",
                                     description="Run one trainops KFP component function (the KFP launcher calls "
                                                 "this; see docs/kubeflow.md).")
    parser.add_argument("--executor_input", required=True, help="KFP's ExecutorInput as JSON")
    parser.add_argument("--function_to_execute", required=True, help="the component function's name")
    args, _unknown = parser.parse_known_args(argv)  # like KFP's executor: the launcher may add arguments

    # KFP's runtime mode: importing kfp skips its compiler and client (what a component never needs).
    os.environ.setdefault("_KFP_RUNTIME", "true")
    from trainops.components.functions import FUNCTIONS  # function-local (heavy): kfp, once the mode above is set

    by_name = {function.__name__: function for function in FUNCTIONS.values()}
    function = by_name.get(args.function_to_execute)
    if function is None:
        parser.error(f"--function_to_execute: {args.function_to_execute!r} is not a trainops component function; "
                     f"known: {', '.join(sorted(by_name))}")
    try:
        executor_input = json.loads(args.executor_input)
    except ValueError as error:
        parser.error(f"--executor_input: not valid JSON ({error})")

    from kfp.dsl.executor import Executor

    logging.basicConfig(stream=sys.stdout, level=logging.INFO,
                        format="[trainops component %(asctime)s %(levelname)s]: %(message)s")
    output_file = Executor(executor_input=executor_input, function_to_execute=function).execute()
    logging.info("wrote the executor output to %s", output_file)
    return 0


if __name__ == "__main__":
    sys.exit(main())
