"""trainops' Airflow plugin (entry point ``airflow.plugins``): what Airflow's components must find by name to read a
trainops DAG, i.e. the timetable `trainops.operators.timetables.TickOnlyCronTimetable` (Airflow deserializes a
timetable only when a plugin registers it). Loading it imports Airflow's core timetables, nothing else."""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from trainops.operators.timetables import TickOnlyCronTimetable


class TrainopsPlugin(AirflowPlugin):
    name = "trainops"
    timetables = [TickOnlyCronTimetable]
