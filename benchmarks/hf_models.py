"""Hugging Face model definitions through ``tileopt.compile(model, inputs)``, against eager.

Each model is built from the ``transformers`` library's own code with a tiny configuration
(one layer, width 64, 4 heads; random weights), compiled for sm_90, run once in the PTX
emulator, and compared with eager PyTorch. One line per model: distinct kernels, launches
per call, max |tileopt - eager|, seconds; or the error tileopt raised. Exit status 1 when a
model gives a wrong answer or fails with anything but tileopt's UnsupportedOperatorError or
ExportError (torch.export refused the model: a data-dependent branch, say).

``--dtype bfloat16`` or ``float16`` runs the model and its inputs in that type and compares
both tileopt and eager with the model in float64 (the same weights): tileopt's error may be
at most 4 times eager's (or 1e-3).

``transformers`` is not a dependency of tileopt: install it in a separate venv whose ``.pth``
adds tileopt's (``import site; site.addsitedir(".venv/lib/python3.11/site-packages")``) and
run this script from there. Without it the script says so and exits 0.

    python benchmarks/hf_models.py [--models gpt2,llama] [--dtype bfloat16]
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from collections.abc import Callable
from typing import Any

import tileopt
import torch

TOLERANCE = 1e-4
HALF_FLOOR = 1e-3  # half types: tileopt's error from float64 may be 4x eager's, or this

SMALL = dict(num_hidden_layers=1, hidden_size=64, num_attention_heads=4, intermediate_size=128,
             vocab_size=100, max_position_embeddings=32)


def models(tf: Any) -> dict[str, tuple[Callable[[], torch.nn.Module], str]]:
    """Model factories and their input kind ("ids", "ids+mask" or "pixels")."""
    gqa = dict(SMALL, num_key_value_heads=2)
    return {
        "gpt2": (lambda: tf.GPT2Model(tf.GPT2Config(
            n_layer=1, n_embd=64, n_head=4, vocab_size=100, n_positions=32,
            attn_implementation="eager")), "ids"),
        "gpt2_sdpa": (lambda: tf.GPT2Model(tf.GPT2Config(
            n_layer=1, n_embd=64, n_head=4, vocab_size=100, n_positions=32,
            attn_implementation="sdpa")), "ids"),
        "bert": (lambda: tf.BertModel(tf.BertConfig(**SMALL)), "ids+mask"),
        "roberta": (lambda: tf.RobertaModel(tf.RobertaConfig(**SMALL)), "ids"),
        "distilbert": (lambda: tf.DistilBertModel(tf.DistilBertConfig(
            n_layers=1, dim=64, n_heads=4, hidden_dim=128, vocab_size=100,
            max_position_embeddings=32)), "ids"),
        "albert": (lambda: tf.AlbertModel(tf.AlbertConfig(**SMALL, embedding_size=32)), "ids"),
        "electra": (lambda: tf.ElectraModel(tf.ElectraConfig(**SMALL, embedding_size=32)), "ids"),
        "deberta_v2": (lambda: tf.DebertaV2Model(tf.DebertaV2Config(**SMALL)), "ids"),
        "t5_encoder": (lambda: tf.T5EncoderModel(tf.T5Config(
            num_layers=1, d_model=64, d_kv=16, num_heads=4, d_ff=128, vocab_size=100)), "ids"),
        "bart_encoder": (lambda: tf.BartModel(tf.BartConfig(
            encoder_layers=1, decoder_layers=1, d_model=64, encoder_attention_heads=4,
            decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128, vocab_size=100,
            max_position_embeddings=32)).encoder, "ids"),
        "llama": (lambda: tf.LlamaModel(tf.LlamaConfig(**gqa)), "ids"),
        "mistral": (lambda: tf.MistralModel(tf.MistralConfig(**gqa)), "ids"),
        "qwen2": (lambda: tf.Qwen2Model(tf.Qwen2Config(**gqa)), "ids"),
        "gemma": (lambda: tf.GemmaModel(tf.GemmaConfig(**gqa, head_dim=16)), "ids"),
        # Gemma 7B's head dimension: attention of d = 256 is one kernel.
        "gemma_d256": (lambda: tf.GemmaModel(tf.GemmaConfig(**gqa, head_dim=256)), "ids"),
        "stablelm": (lambda: tf.StableLmModel(tf.StableLmConfig(**gqa)), "ids"),
        "phi": (lambda: tf.PhiModel(tf.PhiConfig(**SMALL)), "ids"),
        "gpt_neox": (lambda: tf.GPTNeoXModel(tf.GPTNeoXConfig(**SMALL)), "ids"),
        "gptj": (lambda: tf.GPTJModel(tf.GPTJConfig(
            n_layer=1, n_embd=64, n_head=4, vocab_size=100, n_positions=32, rotary_dim=8)),
            "ids"),
        "falcon": (lambda: tf.FalconModel(tf.FalconConfig(
            num_hidden_layers=1, hidden_size=64, num_attention_heads=4, vocab_size=100)), "ids"),
        "bloom": (lambda: tf.BloomModel(tf.BloomConfig(
            n_layer=1, hidden_size=64, n_head=4, vocab_size=100)), "ids"),
        "opt": (lambda: tf.OPTModel(tf.OPTConfig(
            num_hidden_layers=1, hidden_size=64, num_attention_heads=4, ffn_dim=128,
            vocab_size=100, max_position_embeddings=32, word_embed_proj_dim=64)), "ids"),
        # transformers 5's default experts ("grouped_mm": sort, histc, grouped matmuls of
        # data-dependent sizes) are refused at aten.histc; "batched_mm" gathers each token's
        # experts' weights and runs batched matmuls of static shapes.
        "mixtral": (lambda: tf.MixtralModel(tf.MixtralConfig(
            **gqa, num_local_experts=4, num_experts_per_tok=2,
            experts_implementation="batched_mm")), "ids"),
        # Rotary embeddings in complex numbers (torch.polar, view_as_complex), and MoE.
        "llama4_text": (lambda: tf.Llama4TextModel(tf.Llama4TextConfig(
            **gqa, head_dim=16, num_local_experts=4, num_experts_per_tok=1,
            intermediate_size_mlp=128, experts_implementation="batched_mm")), "ids"),
        "deepseek_v2": (lambda: tf.DeepseekV2Model(tf.DeepseekV2Config(
            **SMALL, n_routed_experts=4, num_experts_per_tok=2, n_shared_experts=1,
            moe_intermediate_size=32, first_k_dense_replace=0, kv_lora_rank=16,
            q_lora_rank=None, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=16,
            experts_implementation="batched_mm")), "ids"),
        "vit": (lambda: tf.ViTModel(tf.ViTConfig(
            num_hidden_layers=1, hidden_size=64, num_attention_heads=4, intermediate_size=128,
            image_size=32, patch_size=8)), "pixels"),
        "clip_text": (lambda: tf.CLIPTextModel(tf.CLIPTextConfig(**SMALL)), "ids"),
        "clip_vision": (lambda: tf.CLIPVisionModel(tf.CLIPVisionConfig(
            num_hidden_layers=1, hidden_size=64, num_attention_heads=4, intermediate_size=128,
            image_size=32, patch_size=8)), "pixels"),
    }


class FirstOutput(torch.nn.Module):
    """The model's first output (its last hidden state) as one tensor."""

    def __init__(self, model: torch.nn.Module, kind: str) -> None:
        super().__init__()
        self.model = model
        self.kind = kind

    def forward(self, *args: torch.Tensor) -> torch.Tensor:
        if self.kind == "pixels":
            return self.model(pixel_values=args[0], return_dict=False)[0]
        if self.kind == "ids+mask":
            return self.model(args[0], attention_mask=args[1], return_dict=False)[0]
        return self.model(args[0], return_dict=False)[0]


def inputs(kind: str) -> tuple[torch.Tensor, ...]:
    if kind == "pixels":
        return (torch.randn(2, 3, 32, 32),)
    ids = torch.randint(0, 100, (2, 16))
    if kind == "ids+mask":
        mask = torch.ones(2, 16, dtype=torch.long)
        mask[1, 10:] = 0
        return ids, mask
    return (ids,)


def _error(got: torch.Tensor, want: torch.Tensor) -> float:
    """max |got - want|, relative to want's largest magnitude where that is over 1."""
    return float((got.double() - want.double()).abs().max()) / max(1.0, float(want.abs().max()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", help="comma-separated names (default: all)")
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16", "float16"),
                        help="the model's and its inputs' type (default float32)")
    args = parser.parse_args(argv)
    dtype = getattr(torch, args.dtype)
    try:
        import transformers as tf
    except ImportError:
        print("skipped: transformers is not installed (see this script's docstring)")
        return 0
    table = models(tf)
    names = args.models.split(",") if args.models else list(table)
    print(f"transformers {tf.__version__}, torch {torch.__version__}, {args.dtype}, sm_90 in "
          "the emulator")
    failed = 0
    for name in names:
        make, kind = table[name]
        torch.manual_seed(0)
        start = time.perf_counter()
        try:
            model = FirstOutput(make().eval(), kind).eval().to(dtype)
            x = tuple(a.to(dtype) if a.is_floating_point() else a for a in inputs(kind))
            with torch.no_grad():
                graph = tileopt.compile(model, x)
                got, want = graph(*x), model(*x)
                if dtype == torch.float32:
                    error, bound, what = _error(got, want), TOLERANCE, "max err"
                else:
                    exact = copy.deepcopy(model).double()(
                        *(a.double() if a.is_floating_point() else a for a in x))
                    error, eager = _error(got, exact), _error(want, exact)
                    bound, what = max(4 * eager, HALF_FLOOR), f"eager {eager:.1e}, ours"
            status = "ok" if error <= bound else "WRONG"
            failed += status != "ok"
            print(f"{name:13} {len(graph.kernels):3} kernels {len(graph.last_stats):3} launches"
                  f"  {what} {error:.1e}  {time.perf_counter() - start:5.1f} s  {status}",
                  flush=True)
        except (tileopt.UnsupportedOperatorError, tileopt.errors.ExportError) as e:
            print(f"{name:13} unsupported: {str(e).splitlines()[0][:160]}", flush=True)
        except Exception as e:  # a bug: report it, go on, fail at the end
            failed += 1
            print(f"{name:13} FAILED: {type(e).__name__}: {str(e).splitlines()[0][:160]}",
                  flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
