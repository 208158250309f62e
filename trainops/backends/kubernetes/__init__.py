"""The ``kubernetes`` backend: training jobs as Kubeflow Trainer ``TrainJob`` objects on a Kubernetes cluster.

- `settings`: where the cluster is (kubeconfig, context, namespace) and the shared volume every pod mounts;
- `options`: a job's options (flavour, runtime, image, Kueue queue, scheduling);
- `names`: the job's name as Kubernetes accepts it, checked before anything is made;
- `render`: the ``trainer.kubeflow.org/v1alpha1`` TrainJob a job becomes;
- `node`: what each pod works out from the ``PET_*`` variables Trainer gives it (its host ``algo-<rank+1>``);
- `backend`: `KubernetesBackend`, the seam.

The official ``kubernetes`` client (the ``trainops[kubernetes]`` extra) is imported only where the cluster is
reached, never by rendering: ``trainops render --backend kubernetes`` works without it.
"""
