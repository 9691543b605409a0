"""The trainer handoff: HF labels, packed torch rows, Megatron's view, and a tiny real training run."""

from __future__ import annotations

import math

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
import transformers
from worldtrace.pipelines.export import ExportConfig, export
from worldtrace.pipelines.tokens import default_tokenizer, load_tokenizer
from worldtrace.pipelines.trainer import (
    IGNORE_INDEX,
    PackedShards,
    collate_packed,
    hf_dataset,
    megatron_sample,
)

SEQ = 512
"""Longest sample."""
ROW = 1024
"""Packed row length."""


HALF = "domain IN ('terminal', 'swe')"
"""Half of the shared corpus: every format of it is exported (the whole: ~2 s each)."""


@pytest.fixture(scope="module")
def exports(processed, tmp_path_factory):
    out = tmp_path_factory.mktemp("handoff")
    base = {
        "input": str(processed.table("trajectories")),
        "tokenizer": str(default_tokenizer()),
        "where": HALF,
    }
    export(ExportConfig(output=str(out / "flat"), max_len=SEQ, **base))
    export(ExportConfig(output=str(out / "packed"), max_len=SEQ, seq_len=ROW, **base))
    export(ExportConfig(output=str(out / "mg"), max_len=SEQ, format="megatron", **base))
    return out


def parquet_rows(d):
    return [r for f in sorted(d.glob("*.parquet")) for r in pq.read_table(f).to_pylist()]


def test_hf_labels_are_the_unshifted_mask(exports, tmp_path):
    ds = hf_dataset(exports / "flat", cache_dir=str(tmp_path / "cache"))
    raw = parquet_rows(exports / "flat")
    assert ds.num_rows == len(raw)
    for got, r in zip(ds.select(range(50)), raw[:50], strict=True):
        want = [
            t if m else IGNORE_INDEX for t, m in zip(r["input_ids"], r["loss_mask"], strict=True)
        ]
        assert got["labels"] == want and got["completion_mask"] == r["loss_mask"]
    packed = hf_dataset(exports / "packed", cache_dir=str(tmp_path / "cache"))
    row = next(r for r in packed if len(r["doc_boundaries"]) > 1)
    for b in row["doc_boundaries"]:
        assert row["position_ids"][b] == 0 and row["labels"][b] == IGNORE_INDEX
        if b:
            assert row["position_ids"][b - 1] > 0


def test_megatron_sidecar_enters_the_loss_shifted(exports):
    """The Megatron sequence is the Parquet row and then the end-of-document token, which
    is the last label and never scored."""
    flat = parquet_rows(exports / "flat")
    eod = load_tokenizer(str(default_tokenizer())).token_to_id("<|endoftext|>")
    for i in (0, 7, len(flat) - 1):
        s = megatron_sample(exports / "mg", i)
        ids = np.append(flat[i]["input_ids"], eod)
        mask = np.append(flat[i]["loss_mask"], 0)
        assert (
            s["labels"].tolist() == ids[1:].tolist() and s["tokens"].tolist() == ids[:-1].tolist()
        )
        assert s["loss_mask"].tolist() == mask[1:].astype(float).tolist()  # target i+1 is label i
        assert s["labels"][-1] == eod and s["loss_mask"][-1] == 0


class Vocab:
    """The token ids an export uses, renumbered 0..n-1 so the tiny model's vocabulary is small."""

    def __init__(self, rows):
        self.ids = np.unique(np.concatenate([np.asarray(r["input_ids"]) for r in rows]))

    def __len__(self):
        return len(self.ids)

    def __call__(self, t: torch.Tensor) -> torch.Tensor:
        out = torch.from_numpy(np.searchsorted(self.ids, t.clamp(min=0).numpy()))
        return torch.where(t == IGNORE_INDEX, t, out)


def tiny_qwen2(vocab_size: int):
    torch.manual_seed(0)
    cfg = transformers.Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=ROW,
        tie_word_embeddings=True,
    )
    return transformers.Qwen2ForCausalLM(cfg).eval()


def test_packed_documents_do_not_attend_across(exports):
    rows = [e for e in PackedShards(exports / "packed") if len(e["cu_seqlens"]) > 3][:4]
    vocab = Vocab([{"input_ids": e["input_ids"].numpy()} for e in rows])
    model = tiny_qwen2(len(vocab))
    row = rows[0]
    ids = vocab(row["input_ids"])[None]
    cu = row["cu_seqlens"].tolist()
    with torch.no_grad():
        packed = model(
            input_ids=ids, position_ids=row["position_ids"][None], use_cache=False
        ).logits
        a, b = cu[1], cu[2]  # the second document, alone
        alone = model(input_ids=ids[:, a:b], use_cache=False).logits
        leaky = model(input_ids=ids, use_cache=False).logits  # one causal sequence
    assert torch.allclose(packed[0, a:b], alone[0], atol=1e-4)
    assert not torch.allclose(leaky[0, a:b], alone[0], atol=1e-4)


def test_tiny_qwen2_learns_from_packed_shards(exports):
    loader = torch.utils.data.DataLoader(
        PackedShards(exports / "packed"), batch_size=2, collate_fn=collate_packed
    )
    batches = [b for b, _ in zip(loader, range(2), strict=False)]
    vocab = Vocab([{"input_ids": b["input_ids"].flatten().numpy()} for b in batches])
    assert batches[0]["cu_seqlens"][-1] == 2 * ROW and batches[0]["max_seqlen"] <= ROW
    model = tiny_qwen2(len(vocab)).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for step in range(10):
        b = batches[step % 2]
        out = model(input_ids=vocab(b["input_ids"]), position_ids=b["position_ids"],
                    labels=vocab(b["labels"]), use_cache=False)  # fmt: skip
        out.loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(out.loss.item())
    assert all(math.isfinite(x) for x in losses)
    assert np.mean(losses[-3:]) < 0.75 * np.mean(losses[:3]), losses


def test_trl_sft_trainer_runs_two_steps(exports, tmp_path):
    import trl
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel

    ds = hf_dataset(exports / "flat", cache_dir=str(tmp_path / "cache")).select(range(8))
    vocab = Vocab(ds)
    ds = ds.map(
        lambda r: {
            "input_ids": vocab(torch.tensor(r["input_ids"])).tolist(),
            "labels": vocab(torch.tensor(r["labels"])).tolist(),
        }
    ).select_columns(["input_ids", "labels", "completion_mask"])
    words = Tokenizer(WordLevel({f"t{i}": i for i in range(len(vocab))}, unk_token="t0"))
    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_object=words, pad_token="t0")
    args = trl.SFTConfig(
        output_dir=str(tmp_path / "sft"), max_steps=2, per_device_train_batch_size=2,
        learning_rate=1e-3, logging_steps=1, save_strategy="no", report_to="none",
        use_cpu=True, dataloader_num_workers=0, max_length=SEQ,
        activation_checkpointing=True,  # trl's default, by the name transformers 5 keeps
    )  # fmt: skip
    trainer = trl.SFTTrainer(model=tiny_qwen2(len(vocab)).train(), args=args, train_dataset=ds,
                             processing_class=tokenizer)  # fmt: skip
    result = trainer.train()
    assert result.global_step == 2
    logged = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert len(logged) == 2 and all(math.isfinite(x) and x > 0 for x in logged)
