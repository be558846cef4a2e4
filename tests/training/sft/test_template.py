import json
from pathlib import Path

import pytest
from transformers import PreTrainedTokenizerFast

from training.data.errors import DataError
from training.sft.template import PLAIN_TEMPLATE, ChatTemplate, load_chat_template

# A ChatML-style template written for this test (special tokens around each turn, a generation prompt).
CHATML = (
    "{{ bos_token }}{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}"
    "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
CONVERSATION = [
    {"role": "system", "content": "Answer briefly."},
    {"role": "user", "content": "What does abs do?"},
    {"role": "assistant", "content": "Return the absolute value."},
    {"role": "user", "content": "And json.dumps?"},
    {"role": "assistant", "content": "Serialize obj to a JSON string."},
]


def test_the_plain_template_trains_only_the_assistant_content_and_its_turn_end() -> None:
    pieces = ChatTemplate(PLAIN_TEMPLATE, {}, "plain").pieces(CONVERSATION[1:3])
    trained = [text for text, train in pieces if train]
    assert trained == ["Return the absolute value.\n\n"]
    prompt = "".join(text for text, train in pieces if not train)
    assert prompt.endswith("### Assistant:\n") and "What does abs do?" in prompt


def test_a_chat_template_renders_as_transformers_renders_it_and_masks_every_assistant_turn(tmp_path: Path) -> None:
    config = {"chat_template": CHATML, "bos_token": "<s>", "eos_token": {"content": "</s>", "special": True}}
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    template = load_chat_template(tmp_path)
    assert template.source.endswith("tokenizer_config.json")
    pieces = template.pieces(CONVERSATION)
    reference = PreTrainedTokenizerFast(
        tokenizer_object=__import__("tokenizers").Tokenizer(__import__("tokenizers").models.BPE()),
        chat_template=CHATML,
        bos_token="<s>",
        eos_token="</s>",
    )
    assert "".join(text for text, _ in pieces) == reference.apply_chat_template(CONVERSATION, tokenize=False)
    assert [text for text, train in pieces if train] == [
        "Return the absolute value.<|im_end|>\n",
        "Serialize obj to a JSON string.<|im_end|>\n",
    ]
    # Everything before each assistant content, the generation prompt included, is prompt.
    assert [text for text, train in pieces if not train][1].endswith("<|im_start|>assistant\n")


def test_without_a_chat_template_the_plain_one_is_used(tokenizer_dir: Path) -> None:
    assert load_chat_template(tokenizer_dir).source == "plain"


def test_a_template_that_does_not_parse_names_its_file(tmp_path: Path) -> None:
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{% for %}"}), encoding="utf-8")
    with pytest.raises(DataError, match=r"tokenizer_config.json: chat_template: .*"):
        load_chat_template(tmp_path)
