"""The data tests' dataset fixture (real writer, synthetic documents), shared with the bench tests."""

from tests.training.data.conftest import make_dataset

__all__ = ["make_dataset"]
