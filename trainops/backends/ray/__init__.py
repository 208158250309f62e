"""The ray engine: one Ray job (the Jobs API) per trainops job, its ``submission_id`` the job's name.

Ray's Jobs API takes a caller-chosen ``submission_id`` and refuses a second job of it, which is the idempotent name
trainops needs: a retried task finds its job instead of training twice. Ray itself is imported only when a job is
submitted or looked at (`trainops[ray]`); the settings and the rendered submission need none of it.
"""
