# The two commands that matter on a fresh machine: `make demo` and `make test`.
# Each bootstraps .venv by itself (torch==2.13.0 first when torch is absent, then the project with its extras).
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=

.PHONY: demo test bootstrap system-packages clean

$(VENV)/.installed: pyproject.toml scripts/bootstrap.sh
	bash scripts/bootstrap.sh $(VENV)

bootstrap: $(VENV)/.installed

# The local SLURM test cluster and pdsh come from Debian's packages (installed only when missing; needs root).
system-packages:
	bash scripts/system-packages.sh

demo: $(VENV)/.installed
	$(PY) scripts/demo.py

test: $(VENV)/.installed system-packages
	$(PY) -m pytest $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) runs demo-out .pytest_cache
