"""AWS plumbing both backends share: boto3 client factories with trainops' retry settings and error translation
(`trainops.aws.clients`), and small S3 helpers (`trainops.aws.s3`). The SageMaker backend calls SageMaker, FSx, S3 and
CloudWatch Logs through them; the local backend reads ``s3://`` staging sources and writes to S3 through them.

boto3 is imported inside functions only, so DAG files may import these modules.
"""
