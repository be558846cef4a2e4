"""The one error type raised for bad datasets, manifests and data inputs."""

from spec.errors import UserError


class DataError(UserError):
    """A dataset, manifest or input file is missing, malformed or inconsistent; the message is one line."""
