"""The local backend: runs jobs and stages data on this machine, with the same specs the SageMaker backend takes."""
