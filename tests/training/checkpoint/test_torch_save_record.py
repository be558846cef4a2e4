import io

import pytest
import torch

from training.checkpoint.torch_save_record import HEAD_BYTES, tensor_data_span


def _record(tensor: torch.Tensor) -> bytes:
    buffer = io.BytesIO()
    torch.save(tensor, buffer)
    return buffer.getvalue()


def _span(record: bytes):  # type: ignore[no-untyped-def]
    return tensor_data_span(record[:HEAD_BYTES], len(record))


@pytest.mark.parametrize(
    "tensor",
    [
        torch.randn(300, 70),
        torch.randn(5).to(torch.bfloat16),
        torch.arange(7, dtype=torch.int64),
        torch.tensor(2.5),
        torch.zeros(0, 3),
    ],
    ids=["matrix", "bf16", "int64", "scalar", "empty"],
)
def test_the_span_holds_exactly_the_tensors_bytes(tensor: torch.Tensor) -> None:
    record = _record(tensor)
    span = _span(record)
    assert span is not None
    assert (span.layout.dtype, span.layout.size) == (tensor.dtype, tuple(tensor.shape))
    assert record[span.offset : span.offset + span.nbytes] == tensor.view(-1).view(torch.uint8).numpy().tobytes()
    assert span.offset % 64 == 0  # torch aligns storages in the archive


@pytest.mark.parametrize(
    "tensor",
    [torch.arange(12.0).reshape(3, 4).t(), torch.arange(10.0)[2:5], torch.arange(10.0)[::2]],
    ids=["transposed", "offset-view", "strided-view"],
)
def test_tensors_whose_bytes_are_not_plain_row_major_get_no_span(tensor: torch.Tensor) -> None:
    assert _span(_record(tensor)) is None


def test_a_record_that_is_not_a_plain_tensor_gets_no_span() -> None:
    assert _span(_record({"a": torch.zeros(2)})) is None  # a dict: the stock path's torch.load decides
    record = _record(torch.zeros(4))
    assert tensor_data_span(record[:40], len(record)) is None  # too little of it was read
    assert tensor_data_span(b"not a zip" * 10, 90) is None
    corrupt = bytearray(record)
    corrupt[100] ^= 0xFF  # inside data.pkl: its CRC no longer matches
    assert tensor_data_span(bytes(corrupt[:HEAD_BYTES]), len(record)) is None
