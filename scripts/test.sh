#!/usr/bin/env bash
# The whole test suite, set-up included: creates .venv with the official Python xDS classes
# and jsonschema, for the cross-language wire check and the record-format checks (skipped
# loudly if python3 is missing), then runs every test of the workspace (the core and the
# adapter, xds-sansio-tonic) with every feature; installs etcd (scripts/etcd.sh) for the
# replica tests.
set -euo pipefail
cd "$(dirname "$0")/.."
if command -v python3 >/dev/null; then
  if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
  fi
  .venv/bin/pip install --quiet --disable-pip-version-check -r tests/python/requirements.txt
else
  echo "!!! python3 not found: the Python wire check and the record schema checks will be SKIPPED !!!" >&2
fi
# etcd for the replica tests (feature `etcd`): installed here, loudly, before any test runs.
bash scripts/etcd.sh >/dev/null
# quickcheck: at least 10k cases per property.
export QUICKCHECK_TESTS="${QUICKCHECK_TESTS:-10000}"
cargo test --workspace --all-features "$@"
