"""Counts the Airflow connections a task reads: a connection may come from a secrets backend (a network call), so an
operator reads its ``backend_conn_id`` once per try. Import after `isolate_airflow_home` (it imports Airflow)."""

from __future__ import annotations

from typing import Any


def connection_reads(monkeypatch: Any, conn_id: str, extra: dict[str, Any]) -> list[str]:
    """Define connection ``conn_id`` with ``extra`` through Airflow's environment variable (as a secrets backend would
    hand it) and return the list every `BaseHook.get_connection` call appends its connection id to."""
    import json

    from airflow.sdk import BaseHook

    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": "generic", "extra": extra}))
    lookup = BaseHook.get_connection
    reads: list[str] = []

    def counted(read: str) -> Any:
        reads.append(read)
        return lookup(read)

    monkeypatch.setattr(BaseHook, "get_connection", counted)
    return reads
