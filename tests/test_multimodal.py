"""The multimodal family: scenes, the VQA tool and its backends, A-OKVQA and ScienceQA, converters.

Pictures are real: the Scenes generator renders PNGs with Pillow, and the A-OKVQA and ScienceQA
samples are official-format files written here with JPEG and PNG images drawn here. The
``scene`` backend is checked against the generator's records, which it never reads: it must
give the gold answer for every question kind, and other answers for other pictures. The ``hf``
backend runs a tiny random LLaVA (CLIP vision tower, Llama text model) built in the test.
"""

from __future__ import annotations

import io
import json
import random
import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from PIL import Image, ImageDraw

import lumos_gym  # noqa: F401  (registers the envs)
from lumos_gym.actions import parse_action
from lumos_gym.conversion.exports import tool_specs_for
from lumos_gym.conversion.multimodal_rules import (
    aokvqa_annotation,
    scenes_annotation,
    scienceqa_annotation,
)
from lumos_gym.conversion.rules import CONVERTERS, ConversionError, convert_tasks
from lumos_gym.conversion.verify import verify_annotations
from lumos_gym.envs.base import observation_text
from lumos_gym.envs.checks import check_env_id, replay_gold
from lumos_gym.envs.multimodal.base import (
    VQA_TOOLS,
    TaskImage,
    VQADatasetEnv,
    aokvqa_scores,
    choice_index,
    letterbox,
    scienceqa_scores,
)
from lumos_gym.envs.multimodal.reader import (
    SCENE_READER,
    answer_scene_question,
    read_label,
    read_scene,
)
from lumos_gym.envs.multimodal.scenes import (
    CANVAS,
    CARD_WORDS,
    KINDS,
    LABEL_ALPHABET,
    Scene,
    ScenesEnv,
    generate_tasks,
    glyph_mask,
    label_mask,
    make_task,
    render_scene,
    scene_png,
)
from lumos_gym.envs.tasks import Task
from lumos_gym.errors import DataError, LumosGymError, ToolError
from lumos_gym.tools import ToolContext
from lumos_gym.tools.vqa import VQA


def _vqa_answers(task: Task) -> dict[str, str]:
    return dict(task.meta["vqa_answers"])


def _scene_image(task: Task) -> Image.Image:
    return render_scene(Scene.from_dict(task.meta["scene"]))


def _answer_or_error(image: Image.Image, question: str) -> str:
    try:
        return answer_scene_question(read_scene(image), question)
    except ToolError as e:
        return f"error: {e}"


# ---------------------------------------------------------------------------------------------
# The generator and its pictures


def test_generator_is_deterministic_and_ids_do_not_depend_on_other_kinds():
    first = generate_tasks(split="test", seed=3, num_tasks=2)
    again = generate_tasks(split="test", seed=3, num_tasks=2)
    assert [(t.id, t.question, t.answer, t.meta["scene"]) for t in first] == [
        (t.id, t.question, t.answer, t.meta["scene"]) for t in again
    ]
    assert len(first) == 2 * len(KINDS) and len({t.id for t in first}) == len(first)
    assert {t.meta["kind"] for t in first} == set(KINDS)
    only = generate_tasks(split="test", seed=3, num_tasks=2, kinds=["right_of"])
    by_id = {t.id: t for t in first}
    assert all(by_id[t.id].meta["scene"] == t.meta["scene"] for t in only)
    train = generate_tasks(split="train", seed=3, num_tasks=2)
    assert not {str(t.meta["scene"]) for t in train} & {str(t.meta["scene"]) for t in first}
    assert {t.meta["level"] for t in generate_tasks(num_tasks=1, levels=[2])} == {2}
    with pytest.raises(ValueError, match="unknown kinds"):
        generate_tasks(kinds=["colour_of", "juggling"])


def test_pictures_are_real_pngs_and_observations_show_them():
    task = make_task("count_all", split="test", seed=0, number=0)
    data = scene_png(Scene.from_dict(task.meta["scene"]))
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    with Image.open(io.BytesIO(data)) as png:
        assert png.format == "PNG" and png.size == (CANVAS, CANVAS)
        decoded = np.asarray(png.convert("RGB"))
    assert np.array_equal(decoded, np.asarray(_scene_image(task)))
    assert len(np.unique(decoded.reshape(-1, 3), axis=0)) > 2  # shapes on a background
    env = ScenesEnv(num_tasks=1, kinds=["count_all"])
    obs, _ = env.reset(options={"task_id": task.id})
    assert obs["image"].dtype == np.uint8 and np.array_equal(obs["image"], decoded)
    env.close()


def test_card_glyphs_are_distinct_and_every_card_text_reads_back():
    masks = {glyph_mask(ch).tobytes() for ch in LABEL_ALPHABET}
    assert len(masks) == len(LABEL_ALPHABET) and glyph_mask("a").shape == (22, 12)
    rng = random.Random(5)
    texts = [*CARD_WORDS, *map(str, range(2, 10)), "".join(rng.choices(LABEL_ALPHABET, k=6))]
    for text in texts:
        ink = np.zeros((40, 100), bool)
        mask = label_mask(text)
        ink[9 : 9 + mask.shape[0], 7 : 7 + mask.shape[1]] = mask
        assert read_label(ink) == text
    assert read_label(np.zeros((40, 100), bool)) is None
    scribble = np.zeros((40, 100), bool)
    scribble[10:20, 10:60] = True  # a filled block is no glyph
    assert read_label(scribble) is None


# ---------------------------------------------------------------------------------------------
# The scene backend reads pixels


@pytest.mark.full
def test_scene_backend_answers_every_question_kind_from_the_pixels():
    tasks = generate_tasks(split="test", seed=11, num_tasks=6) + generate_tasks(
        split="train", seed=2, num_tasks=2
    )
    checked = {kind: 0 for kind in KINDS}
    for task in tasks:
        reading = read_scene(_scene_image(task))
        for question, gold in _vqa_answers(task).items():
            assert answer_scene_question(reading, question) == gold, (task.id, question)
        checked[task.meta["kind"]] += 1
    assert min(checked.values()) == 8


@pytest.mark.full
def test_scene_backend_answers_about_the_picture_it_is_given():
    tasks = generate_tasks(split="test", seed=4, num_tasks=3, levels=[1])
    pairs = differ = 0
    for task, other in zip(tasks, tasks[1:] + tasks[:1], strict=True):
        for question, gold in _vqa_answers(task).items():
            pairs += 1
            differ += _answer_or_error(_scene_image(other), question) != gold
    assert differ >= pairs // 2, f"only {differ} of {pairs} answers changed with the picture"
    # erase one object: the count drops by one
    task = make_task("count_all", split="test", seed=0, number=4)
    scene = Scene.from_dict(task.meta["scene"])
    image = render_scene(scene)
    cx, cy = scene.objects[0].centre
    ImageDraw.Draw(image).rectangle((cx - 40, cy - 40, cx + 40, cy + 40), fill=(255, 255, 255))
    assert _answer_or_error(image, "How many objects are there?") == str(len(scene.objects) - 1)


def test_scene_backend_refuses_what_it_cannot_answer():
    task = make_task("count_colour", split="test", seed=0, number=0)
    reading = read_scene(_scene_image(task))
    with pytest.raises(ToolError, match="cannot read"):
        answer_scene_question(reading, "Is this picture pretty?")
    blank = read_scene(Image.new("RGB", (CANVAS, CANVAS), "white"))
    assert blank.objects == () and blank.card_text is None
    assert answer_scene_question(blank, "How many stars are there?") == "0"
    with pytest.raises(ToolError, match="no star"):
        answer_scene_question(blank, "What colour is the star?")
    with pytest.raises(ToolError, match="no card"):
        answer_scene_question(blank, "What is written on the card?")


# ---------------------------------------------------------------------------------------------
# The Scenes env


def test_scenes_env_passes_the_checker_with_dict_observations():
    env = gym.make("lumos/Scenes-v0", num_tasks=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped, skip_render_check=True)
    assert [str(w.message) for w in caught] == []
    obs, info = env.reset(seed=0)
    assert set(obs) == {"text", "image"} and obs["image"].shape == (CANVAS, CANVAS, 3)
    assert info["task_type"] == "multimodal" and info["instruction_actions"] == list(VQA_TOOLS)
    assert env.observation_space.contains(obs)
    obs, reward, terminated, _, _ = env.step("R1 = VQA(<img>, How many objects are there?)")
    assert observation_text(obs).startswith("R1 = ") and not terminated and reward == 0.0
    env.close()


def test_oracle_replays_reach_full_reward():
    report = check_env_id("lumos/Scenes-v0", kwargs={"num_tasks": 1})
    assert report.ok, (report.api_error, report.warnings, [r for r in report.replays if not r.ok])
    assert len(report.replays) == len(KINDS)
    env = ScenesEnv(num_tasks=1, kinds=["count_sum"], **ScenesEnv.replay_options)
    task = env.tasks[0]
    env.reset(options={"task_id": task.id})
    *_, info = env.step("Answer(1000)")
    assert info["metrics"] == {"accuracy": 0.0}
    env.close()


def test_vqa_argument_and_image_errors_are_observations():
    env = ScenesEnv(num_tasks=1, kinds=["count_colour"])
    env.reset(options={"index": 0})
    for action, message in [
        ("R1 = VQA(photo, How many objects are there?)", "must name the task's image"),
        ("R1 = VQA(<img>)", "needs a question"),
        ("R1 = VQA()", "needs the image"),
        ("R1 = VQA(R7, How many objects are there?)", "undefined variable R7"),
    ]:
        obs, *_ = env.step(action)
        assert observation_text(obs).startswith("Error:") and message in observation_text(obs)
    obs, *_ = env.step("R1 = VQA(Image, Query: How many objects are there?)")
    assert observation_text(obs).startswith("R1 = ")
    env.close()
    tool = VQA(backend="scene")
    picture = _scene_image(env.tasks[0])
    session = TaskImage(picture, size=(8, 8), reader=SCENE_READER)
    ctx = ToolContext(variables={"R1": "<img>"}, session=session)
    assert tool.run(parse_action("R2 = VQA(R1, How many objects are there?)"), ctx).values
    with pytest.raises(ToolError, match="no image"):
        tool.run(parse_action("R2 = VQA(<img>, How many objects?)"), ToolContext())
    with pytest.raises(ToolError, match="has no image"):
        tool.run(parse_action("R2 = VQA(<img>, How many objects?)"),
                 ToolContext(session=TaskImage(None, size=(8, 8))))
    with pytest.raises(ToolError, match="needs a model"):
        VQA(backend="hf").run(parse_action("R2 = VQA(<img>, How many objects?)"), ctx)
    with pytest.raises(ToolError, match="backend must be one of"):
        VQA(backend="llava")


def test_letterbox_keeps_the_shape_on_black_bars():
    wide = Image.new("RGB", (100, 50), (200, 10, 10))
    array = letterbox(wide, (64, 64))
    assert array.shape == (64, 64, 3)
    assert (array[:15] == 0).all() and (array[-15:] == 0).all()
    assert (array[32, :, 0] > 150).all()


# ---------------------------------------------------------------------------------------------
# A-OKVQA and ScienceQA samples in the official formats


def _jpeg(path: Path, colour: tuple[int, int, int], shape: str) -> None:
    image = Image.new("RGB", (64, 48), (240, 240, 240))
    draw = ImageDraw.Draw(image)
    (draw.ellipse if shape == "circle" else draw.rectangle)((16, 8, 48, 40), fill=colour)
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path, format="JPEG" if path.suffix == ".jpg" else "PNG")


AOKVQA_RECORDS = [
    {
        "split": "val", "image_id": 299207, "question_id": "22MexNkBPpdZGX6sxbxVBH",
        "question": "What is the man by the bags awaiting?",
        "choices": ["skateboarder", "train", "delivery", "cab"], "correct_choice_idx": 3,
        "direct_answers": ["ride", "ride", "bus", "ride", "cab", "car", "taxi", "cab", "cab",
                           "taxi"],
        "difficult_direct_answer": False,
        "rationales": [
            "A train would not be on the street and he has luggage.",
            "He is waiting for a cab to take his bags.",
            "People with bags on the curb wait for taxis.",
        ],
    },
    {
        "split": "val", "image_id": 57, "question_id": "q57",
        "question": "Which fruit has this colour?",
        "choices": ["banana", "tomato", "lime", "plum"], "correct_choice_idx": 1,
        "direct_answers": ["tomato"] * 4 + ["apple"] * 6,
        "difficult_direct_answer": True,
        "rationales": ["The round shape is red.", "Red fruit.", "It looks red like a fruit."],
    },
]


@pytest.fixture
def aokvqa(tmp_path: Path) -> tuple[Path, Path]:
    folder, coco = tmp_path / "aokvqa", tmp_path / "coco"
    folder.mkdir()
    (folder / "aokvqa_v1p0_val.json").write_text(json.dumps(AOKVQA_RECORDS))
    test = [{k: r[k] for k in ("split", "image_id", "question_id", "question", "choices")}
            for r in AOKVQA_RECORDS]
    for record in test:
        record["split"] = "test"
    (folder / "aokvqa_v1p0_test.json").write_text(json.dumps(test))
    _jpeg(coco / "val2017" / "000000299207.jpg", (30, 30, 200), "square")
    _jpeg(coco / "val2017" / "000000000057.jpg", (220, 30, 30), "circle")
    return folder, coco


SCIENCEQA_PROBLEMS = {
    "5": {
        "question": "Which of these states is farthest north?",
        "choices": ["West Virginia", "Louisiana", "Arizona", "Oklahoma"], "answer": 0,
        "hint": "", "image": "image.png", "task": "closed choice", "grade": "grade2",
        "subject": "social science", "topic": "geography", "category": "Geography",
        "skill": "Read a map: cardinal directions",
        "lecture": "Maps have four cardinal directions, or main directions. Those directions are "
                   "north, south, east, and west.\nA compass rose is a set of arrows.",
        "solution": "To find the answer, look at the compass rose.\nWest Virginia is farthest "
                    "north.",
        "split": "train",
    },
    "7": {
        "question": "Is a baseball bat a good or a service?",
        "choices": ["a good", "a service"], "answer": 0, "hint": "", "image": None,
        "task": "closed choice", "grade": "grade3", "subject": "social science",
        "topic": "economics", "category": "Basic economic principles",
        "skill": "Identify goods and services", "lecture": "Everything you can buy is a good "
        "or a service.", "solution": "You can hold a baseball bat, so it is a good.",
        "split": "train",
    },
    "9": {
        "question": "Which animal's feet are also adapted for swimming?",
        "choices": ["duck", "camel"], "answer": 0, "hint": "Ducks live near water.\nThey swim.",
        "image": "image.png", "task": "closed choice", "grade": "grade4",
        "subject": "natural science", "topic": "biology", "category": "Adaptations",
        "skill": "Animal adaptations: feet", "lecture": "", "solution": "",
        "split": "val",
    },
}


@pytest.fixture
def scienceqa(tmp_path: Path) -> Path:
    folder = tmp_path / "scienceqa"
    folder.mkdir()
    (folder / "problems.json").write_text(json.dumps(SCIENCEQA_PROBLEMS))
    (folder / "pid_splits.json").write_text(json.dumps({"train": ["5", "7"], "val": ["9"],
                                                        "minival": ["9"]}))
    _jpeg(folder / "images" / "train" / "5" / "image.png", (20, 160, 60), "square")
    _jpeg(folder / "images" / "val" / "9" / "image.png", (235, 195, 20), "circle")
    return folder


def test_aokvqa_loader_keeps_every_field_and_shows_the_options(aokvqa):
    folder, coco = aokvqa
    env = gym.make("lumos/AOKVQA-v0", split="val", path=folder, images=coco)
    base = env.unwrapped
    assert base.dataset == "aokvqa" and base.primary_metric == "mc_accuracy"
    task = base.tasks[0]
    assert task.id == "aokvqa/val/22MexNkBPpdZGX6sxbxVBH" and task.answer == "cab"
    assert task.question == ("What is the man by the bags awaiting? Options: (A) skateboarder "
                             "(B) train (C) delivery (D) cab")
    for key, value in AOKVQA_RECORDS[0].items():
        assert task.meta[key] == value
    assert task.meta["image_file"] == "val2017/000000299207.jpg"
    obs, _ = env.reset(options={"task_id": task.id})
    assert obs["image"].shape == (256, 256, 3) and obs["image"][128, 128, 2] > 150
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(base, skip_render_check=True)
    assert [str(w.message) for w in caught] == []
    env.close()
    test = VQADatasetEnv(dataset="aokvqa", split="test", source=str(folder), images=coco)
    assert [t.answer for t in test.tasks] == ["", ""] and not test.tasks[0].meta["labeled"]
    with pytest.raises(LumosGymError, match="give source= or path=, not both"):
        VQADatasetEnv(dataset="aokvqa", split="test", source="a", path="b", images=coco)
    assert test.tasks[0].gold_actions == ()
    test.close()


def test_aokvqa_errors_name_the_expected_files(aokvqa, tmp_path):
    folder, coco = aokvqa
    with pytest.raises(DataError, match=r"aokvqa_v1p0_train\.json.*aokvqa_v1p0\.tar\.gz"):
        VQADatasetEnv(dataset="aokvqa", split="train", path=folder, images=coco)
    broken = [dict(AOKVQA_RECORDS[0])]
    del broken[0]["choices"]
    (tmp_path / "broken.json").write_text(json.dumps(broken))
    with pytest.raises(DataError, match=r"22MexNkBPpdZGX6sxbxVBH.*'choices'"):
        VQADatasetEnv(dataset="aokvqa", split="val", path=tmp_path / "broken.json")


def test_aokvqa_scores_multiple_choice_and_direct_answers(aokvqa):
    folder, coco = aokvqa
    env = VQADatasetEnv(dataset="aokvqa", split="val", path=folder, images=coco)
    cab, fruit = env.tasks
    assert aokvqa_scores("cab", cab) == {"mc_accuracy": 1.0, "da_accuracy": 1.0, "accuracy": 1.0}
    assert aokvqa_scores("(D)", cab)["mc_accuracy"] == 1.0
    assert aokvqa_scores("The answer is D.", cab)["mc_accuracy"] == 1.0
    assert aokvqa_scores("train", cab) == {"mc_accuracy": 0.0, "da_accuracy": 0.0, "accuracy": 0.0}
    assert aokvqa_scores("taxi", cab) == {"mc_accuracy": 0.0, "da_accuracy": 2 / 3,
                                          "accuracy": 0.0}
    assert aokvqa_scores("Tomato.", fruit)["da_accuracy"] == 1.0
    env.reset(options={"task_id": cab.id})
    *_, reward, terminated, _, info = env.step("Answer(cab)")
    assert terminated and reward == 1.0 and info["metrics"]["da_accuracy"] == 1.0
    env.close()


def test_choice_index_reads_text_letters_and_indices():
    choices = ["a good", "a service"]
    assert choice_index("A service", choices) == 1  # the text, articles ignored
    assert choice_index("(B)", choices) == 1 and choice_index("b) a service", choices) == 1
    assert choice_index("0", choices) == 0 and choice_index("7", choices) is None
    assert choice_index("2", ["1", "2", "3"]) == 1  # a numeric option is read as text
    assert choice_index("Z", choices) is None and choice_index("", choices) is None


def test_scienceqa_loader_images_and_scores(scienceqa):
    env = gym.make("lumos/ScienceQA-v0", split="train", path=scienceqa)
    base = env.unwrapped
    north, bat = base.tasks
    assert north.id == "scienceqa/train/5" and north.answer == "West Virginia"
    assert north.question.startswith("Question: Which of these states is farthest north? "
                                     "Options: (A) West Virginia (B) Louisiana")
    assert north.meta["image_file"] == "train/5/image.png" and bat.meta["image_file"] is None
    assert {k: north.meta[k] for k in SCIENCEQA_PROBLEMS["5"]} == SCIENCEQA_PROBLEMS["5"]
    assert scienceqa_scores("West Virginia", north) == {"accuracy": 1.0}
    assert scienceqa_scores("(A)", north) == {"accuracy": 1.0}
    assert scienceqa_scores("Louisiana", north) == {"accuracy": 0.0}
    obs, _ = env.reset(options={"task_id": bat.id})
    assert not obs["image"].any()  # no image: a black observation
    obs, *_ = env.step("R1 = VQA(<img>, What is shown?)")
    assert "this task has no image" in observation_text(obs)
    env.close()
    val = VQADatasetEnv(dataset="scienceqa", split="minival", path=scienceqa / "problems.json")
    assert val.tasks[0].id == "scienceqa/minival/9"
    assert "Context: Ducks live near water. They swim." in val.tasks[0].question
    obs, _ = val.reset(options={"index": 0})
    assert obs["image"].any()  # read from images/val/9: the problem's own split
    val.close()
    with pytest.raises(DataError, match="no split 'dev'"):
        VQADatasetEnv(dataset="scienceqa", split="dev", path=scienceqa)
    (scienceqa / "pid_splits.json").unlink()
    with pytest.raises(DataError, match=r"pid_splits\.json.*problems\.json"):
        VQADatasetEnv(dataset="scienceqa", split="train", path=scienceqa)


def test_missing_and_unreadable_images_are_error_observations(scienceqa):
    (scienceqa / "images" / "train" / "5" / "image.png").write_text("not a picture")
    # a model that does not exist: the image is checked before any model would load
    env = VQADatasetEnv(dataset="scienceqa", split="train", path=scienceqa, vqa_model="./none")
    obs, _ = env.reset(options={"task_id": "scienceqa/train/5"})
    assert not obs["image"].any()
    obs, _, terminated, _, info = env.step("R1 = VQA(<img>, What is shown?)")
    assert "is not an image file that Pillow can read" in observation_text(obs)
    assert not terminated and info["tool_errors"] == 1
    (scienceqa / "images" / "train" / "5" / "image.png").unlink()
    env.reset(options={"task_id": "scienceqa/train/5"})
    obs, *_ = env.step("R1 = VQA(<img>, What is shown?)")
    assert "does not exist" in observation_text(obs)
    data = (scienceqa / "images" / "val" / "9" / "image.png").read_bytes()
    (scienceqa / "images" / "val" / "9" / "image.png").write_bytes(data[: len(data) // 2])
    truncated = VQADatasetEnv(dataset="scienceqa", split="val", path=scienceqa,
                              vqa_backend="scene")
    obs, _ = truncated.reset(options={"index": 0})
    assert not obs["image"].any()
    obs, *_ = truncated.step("R1 = VQA(<img>, How many objects are there?)")
    assert "Error: VQA: the task's image cannot be used: cannot read the image" in obs["text"]
    env.close()
    truncated.close()


def test_dataset_gold_replays_and_converted_annotations_verify(aokvqa, scienceqa):
    folder, coco = aokvqa
    for kwargs in ({"dataset": "aokvqa", "split": "val", "path": folder, "images": coco},
                   {"dataset": "scienceqa", "split": "train", "path": scienceqa},
                   {"dataset": "scienceqa", "split": "val", "path": scienceqa}):
        env = VQADatasetEnv(**kwargs, **VQADatasetEnv.replay_options)
        for task in env.tasks:
            assert replay_gold(env, task).ok, task.id
        items = list(convert_tasks(env.tasks, kwargs["dataset"]))

        def replay_env(tasks, dataset, kw=kwargs):
            return VQADatasetEnv(**kw, **VQADatasetEnv.replay_options)

        report = verify_annotations(items, env_factory=replay_env)
        assert len(report.kept) == len(env.tasks), report.format_report()
        env.close()
    plan = aokvqa_annotation(VQADatasetEnv(dataset="aokvqa", path=folder).tasks[0])
    text = plan.subgoals[0].actions[0].text
    assert text.startswith("R1 = VQA(<img>, What in the image helps to answer: What is the man")
    assert text.endswith("= He is waiting for a cab to take his bags.")  # names the answer
    assert plan.subgoals[1].actions[0].text.endswith("= cab")
    north = scienceqa_annotation(VQADatasetEnv(dataset="scienceqa", split="train",
                                               path=scienceqa).tasks[0])
    assert [s.actions[0].action.name for s in north.subgoals] == ["QA", "VQA", "QA"]
    assert "Maps have four cardinal directions" in north.subgoals[0].actions[0].text


def test_scenes_converter_and_verification():
    env = ScenesEnv(num_tasks=1, **ScenesEnv.replay_options)
    items = list(convert_tasks(env.tasks, "scenes"))
    report = verify_annotations(items, env_factory=lambda tasks, dataset: ScenesEnv(
        num_tasks=1, **ScenesEnv.replay_options))
    assert len(report.kept) == len(KINDS), report.format_report()
    env.close()
    card = scenes_annotation(make_task("count_times_card", split="test", seed=0, number=0))
    assert [s.actions[0].action.name for s in card.subgoals] == ["VQA", "VQA", "Calculator"]
    assert card.meta["converter"] == "rules/scenes"
    team = scenes_annotation(make_task("team_of", split="test", seed=0, number=0))
    assert team.subgoals[1].actions[0].text.startswith("R2 = QA([R1, ")
    assert CONVERTERS.get("scenes") is scenes_annotation


def test_converters_reject_tasks_without_a_decomposition(aokvqa):
    folder, coco = aokvqa
    test = VQADatasetEnv(dataset="aokvqa", split="test", path=folder, images=coco)
    with pytest.raises(ConversionError, match="no rationales"):
        aokvqa_annotation(test.tasks[0])
    task = make_task("colour_of", split="test", seed=0, number=0)
    broken = Task(task.id, task.question, "purple-ish", "multimodal",
                  gold_actions=task.gold_actions, meta=task.meta)
    with pytest.raises(ConversionError, match="is not the answer"):
        scenes_annotation(broken)
    with pytest.raises(ConversionError, match="no gold steps"):
        scenes_annotation(Task("x", "q?", "a", "multimodal"))


def test_grounding_tools_of_the_family():
    specs = tool_specs_for("multimodal")
    assert [s.name for s in specs] == list(VQA_TOOLS)
    assert specs[0].describe().startswith("VQA(<img>, query): ")


# ---------------------------------------------------------------------------------------------
# The hf backend on a tiny random vision-language model


def build_tiny_vlm(folder: Path) -> Path:
    """Save a tiny random LLaVA (CLIP vision tower, Llama text model) and its processor."""
    import torch
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    raw = Tokenizer(models.BPE())
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    raw.decoder = decoders.ByteLevel()
    alphabet = [chr(b) for b in range(33, 127)] + ["\u0120", "\u010a"]
    trainer = trainers.BpeTrainer(vocab_size=220, special_tokens=["<pad>", "<eos>", "<image>"],
                                  initial_alphabet=alphabet, show_progress=False)
    raw.train_from_iterator(["how many red objects are there? answer the question"] * 3, trainer)
    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_object=raw, pad_token="<pad>", eos_token="<eos>",
        extra_special_tokens={"image_token": "<image>"},
    )
    template = ("{% for m in messages %}{{ m['role'] }}: {% for c in m['content'] %}"
                "{% if c['type'] == 'image' %}<image>{% else %}{{ c['text'] }}{% endif %}"
                "{% endfor %}\n{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}")
    image_processor = transformers.CLIPImageProcessor(
        size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}
    )
    processor = transformers.LlavaProcessor(
        image_processor=image_processor, tokenizer=tokenizer, patch_size=8,
        vision_feature_select_strategy="default", chat_template=template,
        num_additional_image_tokens=1,
    )
    torch.manual_seed(0)
    vision = transformers.CLIPVisionConfig(hidden_size=16, intermediate_size=32,
                                           num_hidden_layers=1, num_attention_heads=2,
                                           image_size=32, patch_size=8)
    text = transformers.LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None, initializer_range=1.0,
    )
    config = transformers.LlavaConfig(vision_config=vision, text_config=text,
                                      image_token_id=tokenizer.convert_tokens_to_ids("<image>"),
                                      vision_feature_layer=-1)
    transformers.LlavaForConditionalGeneration(config).save_pretrained(folder)
    processor.save_pretrained(folder)
    return folder


def test_hf_backend_answers_from_the_image_with_a_tiny_model(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        folder = build_tiny_vlm(tmp_path / "tiny-vlm")
    env = ScenesEnv(num_tasks=1, kinds=["count_colour", "shape_of"], vqa_backend="hf",
                    vqa_model=str(folder), vqa_options={"max_new_tokens": 6})
    answers = []
    for index in (0, 0, 1):
        env.reset(options={"index": index})
        obs, *_ = env.step("R1 = VQA(<img>, How many red objects are there?)")
        assert observation_text(obs).startswith("R1 = "), observation_text(obs)
        answers.append(env._episode.context.variables["R1"])
    assert answers[0] == answers[1]  # greedy: the same picture gives the same answer
    assert answers[0] != answers[2]  # another picture, another answer from this random model
    vqa = env.toolset.get("VQA")
    assert vqa._vision is not None
    env.close()
    assert vqa._vision is None
    bad = ScenesEnv(num_tasks=1, kinds=["count_all"], vqa_backend="hf",
                    vqa_model=str(tmp_path / "no-such-model"))
    bad.reset(options={"index": 0})
    obs, *_ = bad.step("R1 = VQA(<img>, How many objects are there?)")
    assert observation_text(obs).startswith("Error: VQA: cannot load the VQA model")
    bad.close()
