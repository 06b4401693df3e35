# One entry point. See README.md.
.PHONY: run test lint bench stop bootstrap schema backup restore
SHELL := /bin/bash

run:        ## start the portal with the demo study (installs what is missing)
	scripts/run

test:       ## the whole test suite on real PostgreSQL, Redis, Celery and OpenFOAM
	scripts/test

lint:       ## ruff, formatting, Django checks, migrations, import contracts, mypy, docs tables, generated client, web UI
	scripts/lint

bench:      ## benchmarks (make bench NAME=overhead for one; SMOKE=1: each once, small, as CI does)
	WT_BENCH_SMOKE=$(SMOKE) scripts/bench $(NAME)

backup:     ## database and data directory in one archive (make backup DEST=file.tar; docs/backups.md)
	scripts/backup $(DEST)

restore:    ## put a backup back (make restore ARCHIVE=file.tar [FORCE=1]; stop the portal first)
	scripts/restore $(ARCHIVE) $(if $(FORCE),--force)

stop:       ## stop the private PostgreSQL and Redis
	scripts/stop

bootstrap:
	scripts/bootstrap
