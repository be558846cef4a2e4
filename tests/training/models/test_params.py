import pytest
import torch

from training.models import MODEL_CONFIGS, ModelArgs, ModelArgsError, count_parameters, get_model_args
from training.models.registry import PUBLISHED_TOTAL_PARAMS
from training.models.transformer import build_model


@pytest.mark.parametrize("name", sorted(PUBLISHED_TOTAL_PARAMS))
def test_named_configs_match_published_sizes_within_two_percent(name: str) -> None:
    counted = count_parameters(get_model_args(name)).total
    published = PUBLISHED_TOTAL_PARAMS[name]
    assert abs(counted - published) / published < 0.02, (name, counted, published)


@pytest.mark.parametrize("name", sorted(MODEL_CONFIGS))
def test_analytic_count_equals_the_built_module(name: str) -> None:
    args = MODEL_CONFIGS[name]
    model = build_model(args, device="meta")  # meta: 70B costs no memory
    built = sum(p.numel() for p in model.parameters())
    assert count_parameters(args).total == built


def test_pythia_non_embedding_count_is_the_published_one() -> None:
    # Pythia's table lists 6,444,163,072 non-embedding parameters for the 6.9B model.
    assert count_parameters(get_model_args("pythia-6.9b")).non_embedding == 6_444_163_072


def test_tied_embeddings_count_once_but_the_head_still_costs_flops() -> None:
    untied = ModelArgs(flavor="llama", dim=64, n_layers=2, n_heads=4, ffn_dim=128, vocab_size=1000)
    tied = untied.replace(tie_embeddings=True)
    assert count_parameters(untied).total - count_parameters(tied).total == 64 * 1000
    assert count_parameters(untied).flop_params == count_parameters(tied).flop_params


def test_gqa_shrinks_key_value_projections() -> None:
    args = get_model_args("llama3-8b")
    assert args.kv_heads == 8
    model = build_model(args, device="meta")
    assert model.layers[0].attention.wk.weight.shape == torch.Size([1024, 4096])


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"dim": 100, "n_heads": 3}, "model.dim"),
        ({"n_kv_heads": 3}, "model.n_kv_heads"),
        ({"rotary_pct": 0.5}, "model.rotary_pct"),
        ({"n_layers": 0}, "model.n_layers"),
        ({"flavor": "gpt2"}, "model.flavor"),
    ],
)
def test_bad_shapes_name_the_field_and_value(changes: dict, field: str) -> None:
    with pytest.raises(ModelArgsError) as error:
        get_model_args("llama2-7b").replace(**changes)
    message = str(error.value)
    assert message.startswith(field + ":")
    assert "\n" not in message


def test_unknown_model_name_lists_the_known_ones() -> None:
    with pytest.raises(
        ModelArgsError, match=r"model.name: 'gpt5' is not a known model \(known: qwen3-tiny, .*, tiny, 125m"
    ):
        get_model_args("gpt5")


def test_decoupled_head_size_and_qk_norms_are_built_as_counted() -> None:
    """Qwen3's shape (heads of 16 over a 48-wide model, not 48 / 4 = 12; an RMSNorm over each head's q and k) with
    Qwen2's q/k/v biases, which start at zero."""
    args = ModelArgs(
        flavor="llama", dim=48, n_layers=2, n_heads=4, n_kv_heads=2, ffn_dim=96, vocab_size=100,
        attention_head_dim=16, qk_norm=True, qkv_bias=True,
    )  # fmt: skip
    model = build_model(args, device="cpu")
    assert count_parameters(args).total == sum(p.numel() for p in model.parameters())
    assert model.layers[0].attention.wq.weight.shape == torch.Size([64, 48])
    assert model.layers[0].attention.wk.bias is not None and model.layers[0].attention.wo.bias is None
    out = model(torch.randint(0, 100, (1, 8)))
    assert out.shape[:2] == (1, 8) and torch.isfinite(out).all()


def test_head_size_is_checked() -> None:
    with pytest.raises(ModelArgsError, match=r"model\.attention_head_dim: 0 must be a positive integer"):
        ModelArgs(flavor="llama", dim=48, n_layers=1, n_heads=4, ffn_dim=96, vocab_size=10, attention_head_dim=0)
