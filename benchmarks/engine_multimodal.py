"""Steps per second of ``lumos/Scenes-v0`` against its VQA backends called directly.

The multimodal envs have no engine besides the ``VQA`` backend, so the raw step is what one
visual question costs without the env, on the same pictures and questions: draw the task's
picture, read it (once per picture, as the tool does) and answer, for the ``scene`` backend;
the processor and ``generate`` call for the ``hf`` backend (a tiny random LLaVA built by
``tests/test_multimodal.py``'s ``build_tiny_vlm``, or ``--vqa-model``). Ours is ``env.step``
of the gold ``VQA`` actions, one episode after another (resets, which draw the picture and its
observation, included).

Run: .venv/bin/python benchmarks/engine_multimodal.py [--seconds S] [--vqa-model FOLDER]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

from lumos_gym.actions import parse_action
from lumos_gym.envs.multimodal.scenes import Scene, ScenesEnv, render_scene
from lumos_gym.tools.vqa import VQA_PROMPT, answer_scene_question, read_scene

HERE = Path(__file__).resolve().parent


def _questions(env: ScenesEnv) -> list[tuple[Any, list[tuple[str, str]]]]:
    """Each task with its gold VQA steps: (action text, question)."""
    plans = []
    for task in env.tasks:
        steps = []
        for text in task.gold_actions:
            action = parse_action(text)
            if action.name == "VQA":
                steps.append((text, ", ".join(action.arguments().positional[1:])))
        plans.append((task, steps))
    return plans


def _ours(env: ScenesEnv, plans: list, seconds: float) -> float:
    steps, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        for task, questions in plans:
            env.reset(options={"task_id": task.id})
            for text, _ in questions:
                env.step(text)
                steps += 1
    return steps / (time.perf_counter() - started)


def _raw_scene(plans: list, seconds: float) -> float:
    steps, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        for task, questions in plans:
            reading = read_scene(render_scene(Scene.from_dict(task.meta["scene"])))
            for _, question in questions:
                answer_scene_question(reading, question)
                steps += 1
    return steps / (time.perf_counter() - started)


def _load_hf(folder: str) -> tuple[Any, Any]:
    from transformers import AutoModelForImageTextToText, AutoProcessor

    return AutoProcessor.from_pretrained(folder), AutoModelForImageTextToText.from_pretrained(
        folder
    ).eval()


def _raw_hf(loaded: tuple[Any, Any], plans: list, seconds: float, max_new_tokens: int) -> float:
    import torch

    processor, model = loaded
    steps, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        for task, questions in plans:
            image = render_scene(Scene.from_dict(task.meta["scene"]))
            for _, question in questions:
                messages = [{"role": "user", "content": [
                    {"type": "image"},
                    {"type": "text", "text": VQA_PROMPT.format(question=question)},
                ]}]
                text = processor.apply_chat_template(messages, add_generation_prompt=True,
                                                     tokenize=False)
                with torch.inference_mode():
                    inputs = processor(images=[image], text=[text], return_tensors="pt")
                    out = model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False)
                processor.batch_decode(out[:, inputs["input_ids"].shape[1] :],
                                       skip_special_tokens=True)
                steps += 1
    return steps / (time.perf_counter() - started)


def _best_of(ours: Any, raw: Any, seconds: float, rounds: int = 5) -> tuple[float, float]:
    """Alternate the two measurements and keep each one's best rate (others share the CPU)."""
    best_ours = best_raw = 0.0
    for _ in range(rounds):
        best_ours = max(best_ours, ours(seconds / rounds))
        best_raw = max(best_raw, raw(seconds / rounds))
    return best_ours, best_raw


def _tiny_model(folder: Path) -> str:
    sys.path.insert(0, str(HERE.parent / "tests"))
    from test_multimodal import build_tiny_vlm

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return str(build_tiny_vlm(folder))


def measure(
    seconds: float = 5.0, *, vqa_model: str | None = None, max_new_tokens: int = 8
) -> list[dict]:
    """Return one row per VQA backend: our env's steps/s and the backend's own, same questions.

    Args:
        seconds: the time spent on each measurement.
        vqa_model: an image-text-to-text model folder for the ``hf`` row (default: a tiny
            random LLaVA built in a temporary folder).
        max_new_tokens: the ``hf`` answer budget.
    """
    rows = []
    env = ScenesEnv(num_tasks=1)
    plans = _questions(env)
    _ours(env, plans, 0.2), _raw_scene(plans, 0.2)  # warm up
    ours, raw = _best_of(lambda s: _ours(env, plans, s), lambda s: _raw_scene(plans, s), seconds)
    rows.append({"env": "lumos/Scenes-v0", "engine": "VQA scene backend (pixels)",
                 "ours_steps_per_s": ours, "raw_steps_per_s": raw})
    env.close()
    with tempfile.TemporaryDirectory() as tmp:
        folder = vqa_model or _tiny_model(Path(tmp) / "tiny-vlm")
        env = ScenesEnv(num_tasks=1, kinds=["count_colour", "colour_of", "read_card"],
                        vqa_backend="hf", vqa_model=folder,
                        vqa_options={"max_new_tokens": max_new_tokens})
        plans = _questions(env)
        loaded = _load_hf(folder)
        _ours(env, plans, 0.5), _raw_hf(loaded, plans, 0.5, max_new_tokens)  # warm up
        ours, raw = _best_of(lambda s: _ours(env, plans, s),
                             lambda s: _raw_hf(loaded, plans, s, max_new_tokens), seconds)
        rows.append({"env": "lumos/Scenes-v0 (hf VQA)",
                     "engine": "transformers generate" + ("" if vqa_model else " (tiny LLaVA)"),
                     "ours_steps_per_s": ours, "raw_steps_per_s": raw})
        env.close()
    return rows


def main() -> None:
    """Print the rows of :func:`measure`."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--vqa-model", default=None)
    args = parser.parse_args()
    for row in measure(args.seconds, vqa_model=args.vqa_model):
        ours, raw = row["ours_steps_per_s"], row["raw_steps_per_s"]
        print(f"{row['env']:<26} {row['engine']:<36} ours {ours:8.1f}/s  raw {raw:8.1f}/s  "
              f"overhead {(raw / ours - 1) * 100:5.1f}%")


if __name__ == "__main__":
    main()
