# One entry point. See README.md.
.PHONY: run test lint bench stop bootstrap schema
SHELL := /bin/bash

run:        ## start the portal with the demo study (installs what is missing)
	scripts/run

test:       ## the whole test suite on real PostgreSQL, Redis, Celery and OpenFOAM
	scripts/test

lint:       ## ruff, Django checks, migrations up to date, web UI (generated client fresh, tsc, eslint)
	scripts/bootstrap
	.venv/bin/ruff check .
	.venv/bin/ruff format --check backend orchestration bench
	set -a; . .data/env; set +a; .venv/bin/python manage.py check
	set -a; . .data/env; set +a; .venv/bin/python manage.py makemigrations --check --dry-run
	scripts/check-generated && scripts/lint-frontend

bench:      ## benchmarks (make bench NAME=overhead for one)
	scripts/bench $(NAME)

stop:       ## stop the private PostgreSQL and Redis
	scripts/stop

bootstrap:
	scripts/bootstrap
