"""botocore ``Stubber``-backed clients behind trainops' `ClientFactory` interface, for what moto cannot do.

Each service gets a real boto3 client (dummy credentials, us-east-1) wrapped in a ``Stubber``: the test queues the
responses (and the exact request parameters it expects) and the Stubber checks both against the real AWS API model,
so a wrong parameter name fails the test. Nothing goes to the network.
"""

from __future__ import annotations

from typing import Any

import boto3
from botocore.stub import Stubber

from trainops.aws.clients import client_config

#: Answers given unless a test stubs the service itself: the capacity preflight asks Service Quotas for the instance
#: type's quota on every submission, and a test about something else gets "no quota listed" (so none is checked).
DEFAULT_ANSWERS: dict[str, tuple[str, dict[str, Any]]] = {"service-quotas": ("list_service_quotas", {"Quotas": []})}


class StubbedAWS:
    """A client factory whose clients are stubbed. ``stub(service)`` to queue answers; call the instance as a
    factory; ``verify()`` at the end asserts every queued answer was used."""

    def __init__(self, region: str = "us-east-1"):
        self._session = boto3.session.Session(
            aws_access_key_id="testing", aws_secret_access_key="testing", region_name=region
        )
        self.clients: dict[str, Any] = {}
        self.stubbers: dict[str, Stubber] = {}
        self.requested: list[str] = []
        self.stubbed: set[str] = set()

    def _ensure(self, service: str) -> None:
        if service not in self.clients:
            client = self._session.client(service, config=client_config(), endpoint_url="https://stubbed.invalid")
            stubber = Stubber(client)
            stubber.activate()
            self.clients[service] = client
            self.stubbers[service] = stubber

    def stub(self, service: str) -> Stubber:
        """The Stubber of a service's client (created on first use)."""
        self._ensure(service)
        self.stubbed.add(service)
        return self.stubbers[service]

    def __call__(self, service: str) -> Any:
        self.requested.append(service)
        self._ensure(service)
        if service in DEFAULT_ANSWERS and service not in self.stubbed:
            operation, response = DEFAULT_ANSWERS[service]
            self.stubbers[service].add_response(operation, response)
        return self.clients[service]

    def verify(self) -> None:
        """Assert that every queued response was consumed."""
        for stubber in self.stubbers.values():
            stubber.assert_no_pending_responses()


class FakeClock:
    """A clock and a sleep for wait loops: sleeping advances the clock, instantly. Records every sleep."""

    def __init__(self, start: float = 1000.0):
        self.now = start
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
