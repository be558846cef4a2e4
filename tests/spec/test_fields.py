"""spec.fields: every section of the spec is strict about numbers. A YAML boolean is never an integer or a
float (pydantic's lax mode reads `true` as 1), and no float is NaN or infinite (a NaN price compares false with
every bound). Walked over every model the spec reaches, so a field added later is covered too."""

from __future__ import annotations

import ipaddress
import math
import types
import typing
from collections.abc import Iterator

import pytest
from pydantic import BaseModel, ValidationError

from spec.fields import StrictModel
from spec.model import DeploymentSpec


def models(root: type[BaseModel] = DeploymentSpec) -> Iterator[type[BaseModel]]:
    seen: set[type[BaseModel]] = set()
    todo = [root]
    while todo:
        model = todo.pop()
        if model in seen:
            continue
        seen.add(model)
        yield model
        for field in model.model_fields.values():
            todo += [t for t in leaf_types(field.annotation) if isinstance(t, type) and issubclass(t, BaseModel)]


def leaf_types(annotation: object) -> Iterator[object]:
    args = typing.get_args(annotation)
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return
    if not args:
        yield annotation
        return
    if origin not in (typing.Union, types.UnionType, typing.Annotated, list, dict, tuple):
        yield annotation
    for arg in args[1:] if origin is typing.Annotated else args:
        yield from leaf_types(arg)


def number_fields(kind: type) -> list[tuple[str, str]]:
    return sorted(
        (model.__name__, name)
        for model in models()
        for name, field in model.model_fields.items()
        if kind in set(leaf_types(field.annotation))
    )


def errors_at(model: type[BaseModel], name: str, value: object) -> list[str]:
    """The error types pydantic gives at field `name` (or inside it) for `value`; the other fields' errors,
    missing ones included, are none of this test's business."""
    try:
        model.model_validate({name: value})
    except ValidationError as error:
        return [item["type"] for item in error.errors() if item["loc"][:1] == (name,)]
    return []


def model_named(name: str) -> type[BaseModel]:
    return next(model for model in models() if model.__name__ == name)


def sample(model: type[BaseModel], name: str, value: object) -> object:
    """`value` where field `name` holds it: inside a mapping for a dict field (cluster.prices)."""
    origin = typing.get_origin(model.model_fields[name].annotation)
    return {"p5.48xlarge": value} if origin is dict else value


def test_every_section_is_a_strict_model() -> None:
    assert all(issubclass(model, StrictModel) for model in models())
    assert len(number_fields(int)) > 30  # the walk reaches every section


@pytest.mark.parametrize(("model", "name"), number_fields(int))
def test_an_integer_field_refuses_a_boolean_and_a_float(model: str, name: str) -> None:
    cls = model_named(model)
    assert errors_at(cls, name, sample(cls, name, True)), f"{model}.{name} took true"
    assert errors_at(cls, name, sample(cls, name, 2.0)), f"{model}.{name} took 2.0"


@pytest.mark.parametrize(("model", "name"), number_fields(float))
def test_a_float_field_refuses_a_boolean_nan_and_infinity(model: str, name: str) -> None:
    cls = model_named(model)
    for value in (True, math.nan, math.inf, -math.inf):
        assert errors_at(cls, name, sample(cls, name, value)), f"{model}.{name} took {value}"


@pytest.mark.parametrize(("model", "name"), number_fields(bool))
def test_a_boolean_field_refuses_a_number(model: str, name: str) -> None:
    assert errors_at(model_named(model), name, 1), f"{model}.{name} took 1"


def test_cidrs_still_read_from_yaml_strings() -> None:
    from spec.model import NetworkSpec

    network = NetworkSpec.model_validate({"availability_zone": "us-east-1a", "cidr": "10.1.0.0/16"})
    assert network.cidr == ipaddress.IPv4Network("10.1.0.0/16")
