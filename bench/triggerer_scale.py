"""One triggerer holding many deferred `train` tasks (issue 26 item 7): its CPU and memory, and SageMaker API calls per
job-minute, against a moto server on 127.0.0.1.

The triggerer is what Airflow's is for these tasks: one process, one asyncio loop running a `JobTrigger` per task
(each rebuilt from its serialized form, as a triggerer rebuilds them), every AWS client from an Airflow connection
(``AwsBaseHook``, the connection's ``endpoint_url`` pointing at moto), the blocking calls in asyncio's thread pool.
The parent process runs the moto server (so its CPU is not the triggerer's), creates the jobs InProgress, waits
``--hold`` seconds, then completes them all; the triggerer ends when every trigger has yielded its event. API calls
are counted in the triggerer by operation name.

    .venv/bin/python bench/triggerer_scale.py --jobs 30 300 --hold 60 --poll 10

Prints one row per size: jobs, job-minutes held, calls per job-minute by operation (DescribeTrainingJob,
DescribeLogStreams, GetLogEvents), CPU of the triggerer (% of one core over the hold), its peak RSS, and the ratio of
calls per job-minute to the smallest size's (flat: calls grow with the jobs, not faster).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))


def triggerer(arguments: argparse.Namespace) -> None:
    """The child: run one JobTrigger per job in one loop; write the measurements as JSON to ``arguments.out``."""
    import asyncio
    import resource
    import threading
    from collections import Counter

    import botocore.client

    calls: Counter[str] = Counter()
    lock = threading.Lock()
    original = botocore.client.BaseClient._make_api_call

    def counted(self, operation_name, api_params):  # noqa: ANN001 - botocore's signature
        with lock:
            calls[operation_name] += 1
        return original(self, operation_name, api_params)

    botocore.client.BaseClient._make_api_call = counted  # type: ignore[method-assign]
    if arguments.throttle_every:
        throttle_http(arguments.throttle_every, calls, lock)

    from trainops.operators.triggers import JobTrigger

    names = json.loads(Path(arguments.names).read_text())
    triggers = []
    for name in names:
        handle = {"backend": "sagemaker", "job_name": name, "region": "us-east-1", "created": True}
        classpath, kwargs = JobTrigger(handle, aws_conn_id="aws_bench", poll_seconds=arguments.poll,
                                       max_run=86400).serialize()
        triggers.append(JobTrigger(**kwargs))

    async def first(trigger: JobTrigger) -> dict:
        async for event in trigger.run():
            return event.payload
        return {}

    async def main() -> list[dict]:
        return await asyncio.gather(*(first(trigger) for trigger in triggers))

    started_cpu = resource.getrusage(resource.RUSAGE_SELF)
    started = time.monotonic()
    events = asyncio.run(main())
    elapsed = time.monotonic() - started
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (usage.ru_utime - started_cpu.ru_utime) + (usage.ru_stime - started_cpu.ru_stime)
    Path(arguments.out).write_text(json.dumps({
        "elapsed": elapsed, "cpu_seconds": cpu, "max_rss_mb": usage.ru_maxrss / 1024, "calls": dict(calls),
        "statuses": dict(Counter(event.get("status") for event in events)),
    }))


def throttle_http(every: int, calls: Any, lock: Any) -> None:
    """Answer every ``every``-th DescribeTrainingJob HTTP attempt with SageMaker's ThrottlingException (moto never
    throttles), below botocore's retries: what the clients' adaptive retries absorb never reaches a trigger."""
    import botocore.endpoint
    from botocore.awsrequest import AWSResponse

    send = botocore.endpoint.Endpoint._send
    body = json.dumps({"__type": "ThrottlingException", "message": "Rate exceeded"}).encode()

    class Raw:
        def stream(self, **kwargs: Any) -> Any:
            yield body

    def maybe_throttled(self: Any, request: Any) -> Any:
        target = request.headers.get("X-Amz-Target") or b""
        if b"DescribeTrainingJob" in (target if isinstance(target, bytes) else target.encode()):
            with lock:
                calls["http DescribeTrainingJob"] += 1
                throttled = calls["http DescribeTrainingJob"] % every == 0
                calls["throttled"] += throttled
            if throttled:
                return AWSResponse(request.url, 400, {"Content-Type": "application/x-amz-json-1.1"}, Raw())
        return send(self, request)

    botocore.endpoint.Endpoint._send = maybe_throttled  # type: ignore[method-assign]


def measure(jobs: int, hold: float, poll: float, throttle_every: int = 0) -> dict:
    import boto3
    from support.moto_quotas import set_training_job_status
    from support.moto_server import MotoServer

    server = MotoServer().start()
    try:
        client = boto3.client("sagemaker", region_name="us-east-1", endpoint_url=server.endpoint,
                              aws_access_key_id="testing", aws_secret_access_key="testing")
        stamp = int(time.time())
        names = [f"scale-{stamp}-{index}" for index in range(jobs)]
        for name in names:
            client.create_training_job(
                TrainingJobName=name, RoleArn="arn:aws:iam::123456789012:role/bench",
                AlgorithmSpecification={"TrainingImage": "image:1", "TrainingInputMode": "File"},
                OutputDataConfig={"S3OutputPath": "s3://bench/out"},
                ResourceConfig={"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 10},
                StoppingCondition={"MaxRuntimeInSeconds": 86400})
            set_training_job_status(name, "InProgress")
        with tempfile.TemporaryDirectory(prefix="triggerer-scale-") as scratch:
            names_file, out = Path(scratch) / "names.json", Path(scratch) / "out.json"
            names_file.write_text(json.dumps(names))
            connection = {"conn_type": "aws", "login": "testing", "password": "testing",
                          "extra": {"region_name": "us-east-1", "endpoint_url": server.endpoint}}
            env = {**os.environ, "AIRFLOW_HOME": scratch, "AIRFLOW_CONN_AWS_BENCH": json.dumps(connection),
                   "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "AWS_ACCESS_KEY_ID": "testing",
                   "AWS_SECRET_ACCESS_KEY": "testing"}
            log = open(Path(scratch) / "triggerer.log", "wb")  # noqa: SIM115 - closed after the child ends
            child = subprocess.Popen([sys.executable, __file__, "--child", "--names", str(names_file), "--out",
                                      str(out), "--poll", str(poll), "--throttle-every", str(throttle_every)],
                                     env=env, cwd=str(ROOT), stdout=log,
                                     stderr=subprocess.STDOUT)
            time.sleep(hold)
            for name in names:
                set_training_job_status(name, "Completed")
            code = child.wait(timeout=600)
            log.close()
            if code != 0:
                raise SystemExit(f"the triggerer failed (exit {code}):\n"
                                 + (Path(scratch) / "triggerer.log").read_text(errors="replace")[-3000:])
            result = json.loads(out.read_text())
    finally:
        server.stop()
    result["jobs"] = jobs
    result["job_minutes"] = jobs * result["elapsed"] / 60
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, nargs="+", default=[30, 300])
    parser.add_argument("--hold", type=float, default=60.0, help="seconds the jobs stay InProgress")
    parser.add_argument("--poll", type=float, default=10.0, help="the triggers' poll_seconds")
    parser.add_argument("--throttle-every", type=int, default=0,
                        help="answer every N-th DescribeTrainingJob HTTP attempt with ThrottlingException (0: none)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--names", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.child:
        triggerer(arguments)
        return
    rows = [measure(jobs, arguments.hold, arguments.poll, arguments.throttle_every) for jobs in arguments.jobs]
    operations = ("DescribeTrainingJob", "DescribeLogStreams", "GetLogEvents")
    print(f"poll {arguments.poll:.0f} s, jobs held InProgress {arguments.hold:.0f} s, then completed"
          + (f"; every {arguments.throttle_every}th DescribeTrainingJob attempt throttled" if arguments.throttle_every
             else "") + "\n")
    print("| jobs | job-minutes | " + " | ".join(f"{op} / job-min" for op in operations)
          + " | all calls / job-min (ratio) | triggerer CPU % of a core | peak RSS MB | events |")
    print("| --- " * (len(operations) + 6) + "|")
    base = None
    for row in rows:
        per = {op: row["calls"].get(op, 0) / row["job_minutes"] for op in operations}
        total = sum(count for op, count in row["calls"].items()  # API calls, not the throttled HTTP attempts
                    if op not in ("http DescribeTrainingJob", "throttled")) / row["job_minutes"]
        base = base or total
        print(f"| {row['jobs']} | {row['job_minutes']:.0f} | " + " | ".join(f"{per[op]:.2f}" for op in operations)
              + f" | {total:.2f} ({total / base:.2f}) | {100 * row['cpu_seconds'] / row['elapsed']:.1f} | "
              f"{row['max_rss_mb']:.0f} | {row['statuses']} |")
    for row in rows:
        if row["calls"].get("throttled"):
            print(f"\n{row['jobs']} jobs: {row['calls']['throttled']} of {row['calls']['http DescribeTrainingJob']} "
                  f"DescribeTrainingJob attempts throttled, {row['calls']['DescribeTrainingJob']} calls made, events "
                  f"{row['statuses']}")


if __name__ == "__main__":
    main()
