# The commands of the README. Each sets up .venv when it is missing or stale, then does its job.
# `make run` installs only what the example needs (torch, scikit-learn, matplotlib); `make setup` (and `make test`)
# adds the rest (Airflow, KFP, boto3, moto, the test tools, ruff and mypy). constraints.txt pins every package, so
# installs are reproducible.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
RUN_STAMP := $(VENV)/.trainops-run
TEST_STAMP := $(VENV)/.trainops-test
export AIRFLOW__CORE__LOAD_EXAMPLES ?= False

.PHONY: run test setup mpi slurm slurm-cluster lint clean

run: $(RUN_STAMP)
	$(VENV)/bin/trainops run examples/digits/pipeline.yaml

# Two test processes by default (pytest-xdist): on 2 cores the suite takes about half the time of one process
# (closing note of issue 24). `--dist loadfile`: a module goes whole to one worker, so its module fixtures (a Slurm
# cluster, an Airflow home) are set up once, and the modules of tests/system/ray/ go together
# (tests/support/work_units.py: their session's Ray cluster starts once); tests/conftest.py hands the modules out
# longest first (the real Airflow components, then system, then reliability, then unit modules), so both workers end
# on short ones. Each module keeps
# its own Airflow home (a copy of one migrated database) and moto server; the cached venvs are built under a lock.
# `--durations`: the slowest tests are printed, and a test past its bound fails (tests/support/duration_bound.py).
# `--module-times`: the modules of the largest total time, wall and CPU (tests/support/module_times.py), so each CI log
# says where the suite's time goes. TEST_WORKERS=0 runs it in one process.
TEST_WORKERS ?= 2
# trainops' byte code is compiled first: shells that export PYTHONDONTWRITEBYTECODE=1 (this project's machines do)
# keep every Python the tests start from writing it, so each would compile trainops from source again (about 0.3 CPU
# s per `trainops` command). Only the package: the tests' directories are copied file by file as jobs' code and
# listed as corpora, where a __pycache__ is a file too many.
test: $(TEST_STAMP) mpi slurm lint
	$(PY) -m compileall -q trainops >/dev/null
	$(PY) -m pytest -q -p no:cacheprovider --durations=25 --module-times=25 $(if $(filter-out 0,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder)

# Lint and types are checked, not hoped for: ruff (the rule set in pyproject.toml) over the tree, mypy over the
# package (strict on the backend seam and the steps). A finding fails `make test`, so CI fails on it.
lint: $(TEST_STAMP)
	$(PY) -m ruff check .
	$(PY) -m mypy

setup: $(TEST_STAMP)

# pip -q prints nothing while it works, so each install first says what it installs and why it takes minutes.
# pip byte-compiles what it installs in one process: of the test install's 143 CPU s, 91 are that (53 with
# --no-compile, on a busy 2-core machine). So it installs with --no-compile and compileall writes the same .pyc on
# every core (`workers=0`): 85 CPU s in one process, about half the wall time on two idle cores. No later process then
# compiles a module from source. A file that does not compile (torch ships one in Python 3.12 syntax) is passed over,
# as pip passes it over.
COMPILE_VENV = $(PY) -c 'import compileall, sysconfig; compileall.compile_dir(sysconfig.get_paths()["purelib"], quiet=2, workers=0)'

$(VENV)/.created:
	@echo "creating $(VENV) (Python virtual environment) and upgrading pip in it"
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade "pip>=24"
	@touch $@

$(RUN_STAMP): pyproject.toml constraints.txt $(VENV)/.created
	@echo "installing trainops with torch (CPU), scikit-learn and matplotlib into $(VENV), the versions pinned in"
	@echo "constraints.txt: about 2 minutes on a first run (torch is the large download), quiet until done"
	$(PY) -m pip install -q --no-compile -c constraints.txt -e ".[torch,examples]"
	$(COMPILE_VENV)
	@touch $@

$(TEST_STAMP): pyproject.toml constraints.txt $(VENV)/.created
	@echo "installing trainops with every extra (torch, boto3, moto, Airflow, KFP, kubernetes) and the test tools (pytest,"
	@echo "ruff, mypy) into $(VENV), pinned by constraints.txt: several minutes on a first run (Airflow and torch are large),"
	@echo "quiet until done"
	$(PY) -m pip install -q --no-compile -c constraints.txt -e ".[all,dev]"
	$(COMPILE_VENV)
	@touch $@ $(RUN_STAMP)

# Open MPI is a system package: the MPI tests need mpirun. Installed only when missing, as root.
mpi:
	@command -v mpirun >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing Open MPI (openmpi-bin) for the MPI tests"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openmpi-bin libopenmpi-dev >/dev/null; \
	  else echo "mpirun not found: install openmpi-bin to run the MPI tests" >&2; exit 1; fi; }

# Slurm is a system package too: the slurm backend's system tests start a real two-node cluster on this machine
# (tests/support/slurm_cluster.py: munged, slurmctld, two slurmd, slurmrestd with JWT). Installed only when missing,
# as root.
SLURM_PACKAGES := munge slurm-wlm slurmrestd slurm-wlm-jwt-plugin
slurm:
	@{ command -v slurmctld && command -v slurmrestd && command -v munged && \
	   ls /usr/lib/*/slurm-wlm/auth_jwt.so; } >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing Slurm ($(SLURM_PACKAGES)) for the slurm backend's tests"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(SLURM_PACKAGES) >/dev/null; \
	  else echo "Slurm not found: install $(SLURM_PACKAGES) to run the slurm backend's tests" >&2; exit 1; fi; }

# A two-node Slurm cluster on this machine to try the slurm backend on (docs/slurm.md): the test suite's cluster, in
# the foreground until Ctrl-C; it prints the SLURM_CONF and shared directory another shell uses, and writes them to
# runs/slurm-cluster.env for `source`. Needs root.
slurm-cluster: $(RUN_STAMP) slurm
	$(PY) tests/support/slurm_try.py --env-file runs/slurm-cluster.env

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache runs
