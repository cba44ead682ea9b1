"""``lumos-gym leaderboard``: rank results folders, render them, and validate submissions.

A *results folder* is what ``lumos-gym evaluate`` writes (``episodes.jsonl``, ``summary.json``,
``run.json``). The command takes results folders, or folders of them (``reproduce`` writes one
folder per env under each agent: ``results/<agent>/<Env>/``), and groups them into *runs*: the
folders whose ``run.json`` holds the same configuration fingerprint (agent and models) and the
same adapter weights are one run, named after the folder they share. Each run is a row; each env
a column holding the env's primary metric, ``mean [low, high]`` with the 95% bootstrap interval
of ``summary.json`` (recomputed from ``episodes.jsonl`` with
:func:`lumos_gym.evaluation.summary.summarize` when the summary lacks it: older summaries,
several folders of one run, a corrupt summary). Runs are ranked by their suite score
(:mod:`lumos_gym.evaluation.summary`); a run that covers fewer of the table's envs ranks after
the runs that cover more, as its score is a mean over other envs.

The Lumos paper's reported numbers (``leaderboard/reported.json``, transcribed from the paper's
tables) come in a block of their own, marked reported and never ranked: they were measured on
the full official sets with the paper's models, and have no suite score.

Formats: a GitHub-flavoured Markdown table, a tidy CSV (one row per run and env), a static HTML
page (sortable, filterable, self-contained, with a trajectory viewer page per run and env beside
it) and a PNG bar chart with the intervals as error bars (the ``leaderboard`` extra:
matplotlib). :func:`validate` checks a submission folder.

Training seeds: the rows of one agent trained with several seeds on the same data and budget
(:func:`~lumos_gym.leaderboard.cards.seed_groups`) are shown as one row, a :class:`SeedRow`
(``lumos-i (3 seeds)``): each cell the mean over the seeds of each seed's env mean, with a
two-level bootstrap interval that resamples the seeds as well as the tasks
(:func:`~lumos_gym.leaderboard.stats.two_level_bootstrap`); each seed's own scores go to the
"Training seeds" section, and a row trained with one seed is labelled ``(1 seed)``.
``load_board(..., group_seeds=False)`` (``--no-seed-groups``) shows every seed's row instead.

Paired differences: :func:`attach_reference` compares every row with a reference row episode by
episode (:mod:`lumos_gym.leaderboard.stats`), and the md, csv and html outputs then add each
row's difference per env and for the suite score, with its paired interval and test; without a
reference they are as before. A seed group, as the reference or as a row, is compared over its
seeds and tasks (:func:`~lumos_gym.leaderboard.stats.compare_groups`); a reference that names
one seed's run stands for its group. :func:`render_comparison` writes the full paired table of
two rows (``--compare A B``).

Failures of the machinery: a row with episodes that ended in ``infra-error`` (a backend or env
server failed, not the agent; :func:`~lumos_gym.evaluation.results.is_infra_error`) has them
left out of its means and paired differences, carries :data:`INFRA_MARK` after its name, and a
note under the table names their count per env; :func:`validate` refuses its folder unless
``allow_infra_errors``. A board without such a row renders as it always did.

The package, one part per module: :mod:`~.rows` (the board and its rows), :mod:`~.load`
(reading results folders into a ranked board), :mod:`~.compare` (paired differences to a
reference row, ``--compare``), :mod:`~.sections` (the sections under the ranked table),
:mod:`~.markdown`, :mod:`~.csv`, :mod:`~.png` and :mod:`~.html` (one per format, with
:mod:`~.trajectories` for the trajectory pages and :mod:`~.page` for what every page shares),
:mod:`~.write` (:func:`write_board`) and :mod:`~.validation` (``--validate``). Every name is
importable from here, as it was from the single module this package replaces.
"""

from lumos_gym.leaderboard.render.compare import (
    COMPARE_COLUMNS,
    GROUP_PAIRED_NOTE,
    PAIRED_CSV_COLUMNS,
    PAIRED_NOTE,
    TOP,
    attach_reference,
    compare_entries,
    compare_rows,
    diff_text,
    find_entry,
    find_row,
    paired_csv_rows,
    paired_markdown,
    render_comparison,
)
from lumos_gym.leaderboard.render.csv import render_csv
from lumos_gym.leaderboard.render.html import paired_html, render_html
from lumos_gym.leaderboard.render.load import (
    find_results_dirs,
    group_seed_rows,
    load_board,
    load_results_dir,
    task_sets_problem,
)
from lumos_gym.leaderboard.render.markdown import render_markdown
from lumos_gym.leaderboard.render.page import (
    _BOARD_JS,
    _PAGE_JS,
    _e,
    _page,
    _short,
    _slug,
    markdown_section_html,
)
from lumos_gym.leaderboard.render.png import render_png
from lumos_gym.leaderboard.render.rows import (
    CEILING_NOTE,
    GROUP_SCORE_RULE,
    INFRA_MARK,
    INFRA_NOTE,
    Board,
    Cell,
    Entry,
    LeaderboardError,
    Paired,
    Reported,
    ResultsDir,
    SeedRow,
    Shown,
    build_entry,
    cell_text,
    entry_records,
    reported_numbers,
    seed_row,
    short_env,
)
from lumos_gym.leaderboard.render.sections import (
    SEED_ROWS_NOTE,
    env_task_types,
    infra_markdown,
    seed_rows_markdown,
)
from lumos_gym.leaderboard.render.trajectories import (
    MAX_TEXT_CHARS,
    PREVIEW_CHARS,
    _episode_info,
    _long_text,
    _turn_html,
    render_viewer,
)
from lumos_gym.leaderboard.render.validation import (
    ENV_PROVENANCE_KEYS,
    PROVENANCE_KEYS,
    scoring_passes,
    validate,
    validate_dir,
)
from lumos_gym.leaderboard.render.write import FORMATS, write_board

__all__ = [
    "CEILING_NOTE",
    "COMPARE_COLUMNS",
    "ENV_PROVENANCE_KEYS",
    "FORMATS",
    "GROUP_PAIRED_NOTE",
    "GROUP_SCORE_RULE",
    "INFRA_MARK",
    "INFRA_NOTE",
    "MAX_TEXT_CHARS",
    "PAIRED_CSV_COLUMNS",
    "PAIRED_NOTE",
    "PREVIEW_CHARS",
    "PROVENANCE_KEYS",
    "SEED_ROWS_NOTE",
    "TOP",
    "Board",
    "Cell",
    "Entry",
    "LeaderboardError",
    "Paired",
    "Reported",
    "ResultsDir",
    "SeedRow",
    "Shown",
    "attach_reference",
    "build_entry",
    "cell_text",
    "compare_entries",
    "compare_rows",
    "diff_text",
    "entry_records",
    "env_task_types",
    "find_entry",
    "find_results_dirs",
    "find_row",
    "group_seed_rows",
    "infra_markdown",
    "load_board",
    "load_results_dir",
    "markdown_section_html",
    "paired_csv_rows",
    "paired_html",
    "paired_markdown",
    "render_comparison",
    "render_csv",
    "render_html",
    "render_markdown",
    "render_png",
    "render_viewer",
    "reported_numbers",
    "scoring_passes",
    "seed_row",
    "seed_rows_markdown",
    "short_env",
    "task_sets_problem",
    "validate",
    "validate_dir",
    "write_board",
    # the page pieces that lumos_gym.leaderboard.viewer (lumos-gym view) builds its pages with
    "_BOARD_JS",
    "_PAGE_JS",
    "_e",
    "_episode_info",
    "_long_text",
    "_page",
    "_short",
    "_slug",
    "_turn_html",
]
