"""The CreateTrainingJob request both executors share: rendered from a job spec (`render`, `render_options`) with
the code it carries (`code`: the source tree, the SDK's sourcedir.tar.gz, the trainops runtime's files).

Pure: no AWS call, no process. The SageMaker backend sends the request; the local backend executes the very same
request in emulated hosts; neither imports the other, both import this package.
"""
