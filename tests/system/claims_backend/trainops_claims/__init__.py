"""A test engine whose channels are persistent volume claims (see ``backend``)."""
