# The two commands of the README:
#   make demo   a local federation (tracker, repository, sites on 127.0.0.x) and a real bt-get of a sample dataset
#   make test   the whole test suite (what .ci/run calls)
# and `make check`, the fast loop: the pure cores and unit tests in under a minute, no root, no system package.
# Both create .venv themselves; `make deps` installs the system packages the tests and benchmarks use.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: demo test check deps bench bench-quick clean

$(STAMP): setup.cfg pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "btswarm needs Python 3.11 or newer (set PYTHON=...)")'
	$(PYTHON) -m venv $(VENV)
	@echo "installing btswarm and its dependencies into $(VENV) (log: $(VENV)/pip.log)"
	@$(BIN)/pip install --upgrade pip > $(VENV)/pip.log 2>&1 && \
	  $(BIN)/pip install -e '.[test,bench,rucio]' >> $(VENV)/pip.log 2>&1 || { tail -30 $(VENV)/pip.log; exit 1; }
	@touch $@

demo: $(STAMP)
	$(BIN)/btswarm demo $(if $(KEEP),--keep)

deps:
	bash scripts/install-system-deps.sh

# Two test processes (pytest-xdist), whole files to each so a module's federation is started once:
# the suite mostly waits on transfers and processes, so two halve it on 2 cores. TEST_JOBS=0: one process.
TEST_JOBS ?= 2

test: $(STAMP) deps
	@$(BIN)/pytest -q $(if $(filter 0,$(TEST_JOBS)),,-n $(TEST_JOBS) --dist loadfile) $(PYTEST_ARGS); code=$$?; \
	if [ $$code -eq 5 ]; then echo "make test: pytest collected no tests" >&2; exit 1; fi; exit $$code

# The fast loop: the pure cores and the unit tests, no root, no system package, no network namespace
# (under a minute). `make test` runs these too, with everything else.
CHECK_TESTS := tests/unit tests/test_layering.py tests/test_sizes.py \
  $(addprefix tests/btget/test_,bearer.py plan.py ratecap.py reach.py readout.py reannounce.py result.py \
    runstate.py siteshare.py sitechoice.py sources.py stall.py steering.py streaming.py target.py targets.py \
    webseeds.py workerspecs.py) \
  $(addprefix tests/btserver/test_,layout.py policy.py uploadslots.py rucio_map.py) \
  $(addprefix tests/btswarm/test_,bench.py delayline.py hosts_plan.py idealflows.py topology.py ready.py) \
  $(addprefix tests/repo/test_,identity.py rights.py) \
  $(addprefix tests/tracker/test_,handout.py protocol.py siteseeds.py)

# ... but for the checks against third-party programs (transmission-show, mktorrent: `make deps`).
CHECK_SKIP := $(addprefix --deselect tests/unit/test_build.py::,test_written_torrent_loads_in_transmission_show \
  test_mktorrent_agrees test_benchmark_script_runs_and_agrees)

check: $(STAMP)
	$(BIN)/pytest -q -p no:xdist -m "not slow and not browser" $(CHECK_SKIP) $(CHECK_TESTS) $(PYTEST_ARGS)

bench: $(STAMP) deps
	$(BIN)/btswarm bench

bench-quick: $(STAMP) deps
	$(BIN)/btswarm bench --quick

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache .hypothesis
