"""The one error type raised for bad datasets, manifests and data inputs."""


class DataError(ValueError):
    """A dataset, manifest or input file is missing, malformed or inconsistent; the message is one line."""
