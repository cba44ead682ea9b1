"""Complex-QA task sources: official-format loaders, gold plans and bundled samples.

Each loader reads one official file and returns :class:`~lumos_gym.envs.tasks.Task` records with
``task_type="qa"`` and ids ``"<dataset>/<split>/<official id or position>"``. A file that is
missing, empty or not in the expected format raises :class:`~lumos_gym.errors.DataError` with a
one-line message naming the file, the record and what was expected.

Formats handled (every field of a record is kept verbatim in ``Task.meta``, next to the QA
conventions ``documents``, ``aliases``, ``sub_answers``, ``answer_type`` and, for tasks with a
gold decomposition, ``subgoals``):

* **HotpotQA** (``hotpotqa/hotpot``): a JSON list of ``{"_id", "question", "answer", "type",
  "level", "supporting_facts": [[title, sent_id]], "context": [[title, [sentences]]]}``, the
  train and dev distractor files and the dev fullwiki file alike; the test fullwiki file (only
  ``_id``, ``question`` and ``context``: loaded only with ``unlabeled=True``); and the
  question-only file of the Lumos evaluation (``question``, ``answer``, ``type``; ids are
  positions). A document is a context paragraph, its sentences concatenated as written
  (HotpotQA sentences carry their own leading spaces).
* **StrategyQA** (``allenai.org/data/strategyqa``): ``strategyqa_train.json`` (``qid``,
  ``term``, ``description``, ``question``, ``answer`` (a bool), ``facts``, ``decomposition``,
  ``evidence``: per annotator, per decomposition step, a list of paragraph-id lists,
  ``"operation"`` or ``"no_evidence"``), ``strategyqa_train_filtered.json``,
  ``strategyqa_test.json`` (``qid`` and ``question`` only), the Lumos evaluation file
  (``question`` and a bool ``answer``) and BIG-bench's ``task.json`` (``examples`` with
  ``input``, ``target`` and ``target_scores``). The official zip archive is read directly.
  Documents are the evidence paragraphs when a paragraphs file is given (or the archive holds
  one), else one document per fact, titled with the term.
* **MuSiQue** (``StonyBrookNLP/musique``): JSON lines ``musique_{ans,full}_v1.0_{train,dev,test}
  .jsonl`` with ``id``, ``paragraphs`` (``idx``, ``title``, ``paragraph_text``,
  ``is_supporting``), ``question``, ``question_decomposition`` (``id``, ``question`` with
  ``#k`` references, ``answer``, ``paragraph_support_idx``), ``answer``, ``answer_aliases`` and,
  in the full files, ``answerable``. An unanswerable record keeps ``answerable: false`` in its
  meta and gets the id suffix ``:unanswerable`` (the full files hold each question twice under
  one id). The release zip is read directly (split names ``ans_dev``, ``full_train``...).
* **2WikiMultihopQA** (``Alab-NII/2wikimultihop``): JSON lists of ``{"_id", "type",
  "question", "context", "supporting_facts", "evidences": [[subject, relation, object]],
  "answer"}``, with ``entity_ids`` and, in the December 2020 release, ``evidences_id`` and
  ``answer_id``; ``train.json``, ``dev.json``, ``test.json`` (no answer, supporting facts or
  evidences), or the release zip.
* **Bamboogle** (Press et al., 2022): the Google Sheets CSV export (``Question``, ``Answer``
  columns), the hub's rows as JSON lines, or JSON records with ``question`` and ``answer`` (or
  ``golden_answers``); ids are positions; no documents.

Gold plans (:data:`GOLD_PLANS`) turn a dataset's decomposition or supporting facts into Lumos
subgoals and grounded actions (``KnowledgeQuery`` / ``ParagraphRetrieve`` / ``QA``). Loaders
use them for ``Task.gold_actions`` (one ``; ``-joined step per subgoal, then ``Answer(R<n>)``)
and ``meta["subgoals"]``, and add the question of every ``QA`` action whose answer is known to
``meta["sub_answers"]`` (:func:`plan_sub_answers`), so that a privileged env with the reference
``QA`` backend can replay the gold actions; :mod:`lumos_gym.conversion.qa_rules` uses the same
plans for annotations.

The modules: :mod:`~lumos_gym.envs.qa.data.common` (reading files and records, shared by the
loaders), :mod:`~lumos_gym.envs.qa.data.plans` (the gold plan machinery and task records), one
module per dataset with its loader and gold plan (:mod:`~lumos_gym.envs.qa.data.hotpotqa`,
:mod:`~lumos_gym.envs.qa.data.strategyqa`, :mod:`~lumos_gym.envs.qa.data.musique`,
:mod:`~lumos_gym.envs.qa.data.twowiki`, :mod:`~lumos_gym.envs.qa.data.bamboogle`) and
:mod:`~lumos_gym.envs.qa.data.sources` (the dataset tables and :func:`qa_source`). Every public
name is importable from this package.
"""

from __future__ import annotations

from lumos_gym.envs.qa.data.bamboogle import load_bamboogle, write_bamboogle_hub_rows
from lumos_gym.envs.qa.data.common import answer_type
from lumos_gym.envs.qa.data.hotpotqa import hotpotqa_plan, load_hotpotqa, write_hotpotqa_hub_rows
from lumos_gym.envs.qa.data.musique import load_musique, musique_plan, musique_sub_answers
from lumos_gym.envs.qa.data.plans import (
    GoldPlanError,
    PlanAction,
    PlanStep,
    gold_actions,
    plan_sub_answers,
    qa_subgoal,
    relation_question,
)
from lumos_gym.envs.qa.data.sources import (
    DATA_DIR,
    GOLD_PLANS,
    QA_DATASETS,
    QA_LOADERS,
    SAMPLE_FILES,
    qa_source,
    sample_path,
)
from lumos_gym.envs.qa.data.sources import (
    STRATEGYQA_SAMPLE_PARAGRAPHS as STRATEGYQA_SAMPLE_PARAGRAPHS,
)
from lumos_gym.envs.qa.data.strategyqa import load_strategyqa, strategyqa_plan
from lumos_gym.envs.qa.data.twowiki import load_twowiki, twowiki_plan

__all__ = [
    "DATA_DIR",
    "GOLD_PLANS",
    "QA_DATASETS",
    "QA_LOADERS",
    "SAMPLE_FILES",
    "GoldPlanError",
    "PlanAction",
    "PlanStep",
    "answer_type",
    "gold_actions",
    "hotpotqa_plan",
    "load_bamboogle",
    "load_hotpotqa",
    "load_musique",
    "load_strategyqa",
    "load_twowiki",
    "musique_plan",
    "musique_sub_answers",
    "plan_sub_answers",
    "qa_source",
    "qa_subgoal",
    "relation_question",
    "sample_path",
    "strategyqa_plan",
    "twowiki_plan",
    "write_bamboogle_hub_rows",
    "write_hotpotqa_hub_rows",
]
