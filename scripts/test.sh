#!/usr/bin/env bash
# Run the whole test suite. First use creates .venv and installs everything the tests need.
set -euo pipefail

usage() {
  cat <<'USAGE'
Usage: ./scripts/test.sh [PYTEST-ARGS...]

Creates .venv on first use, installs the project with its train, torch, infer, sizing, dashboard, test and
jobs-test (Lightning, Transformers: real libraries for the own-job tests) extras,
installs Debian's chromium, chromium-driver, shellcheck, sysstat, prometheus, slurm-wlm and munge when run as root,
then runs pytest in three worker processes on a 2-core machine (pytest-xdist; part of the tests' time is
spent waiting on real processes, signals and servers, which a third worker fills). The tests that share a
costly fixture (the session's real TensorFlow and torch trainings, the browser, a module's server) run on
one worker, so each is made once; pass -n to choose otherwise.
Examples:
  ./scripts/test.sh                 # everything, real TensorFlow training and browser tests included
  ./scripts/test.sh -m "not slow"   # the fast tests only
  ./scripts/test.sh tests/collect   # one part
USAGE
}

main() {
  if [[ "${1:-}" == "-h" || "${1:-}" == "--help" ]]; then
    usage
    return 0
  fi
  # shellcheck source=scripts/lib.sh
  source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
  ensure_debian_packages chromium chromium-driver shellcheck sysstat prometheus slurm-wlm munge
  ensure_venv "train,torch,infer,sizing,dashboard,test,jobs-test"
  cd "$REPO_ROOT"
  # The suite starts hundreds of Python processes: they share the project's compiled bytecode (kept in
  # .venv, out of the checkout) even where PYTHONDONTWRITEBYTECODE is set, instead of each compiling it.
  unset PYTHONDONTWRITEBYTECODE
  export PYTHONPYCACHEPREFIX="${PYTHONPYCACHEPREFIX:-$VENV/pycache}"
  local workers=(-n 3 --dist loadgroup --no-loadscope-reorder)  # the order: tests/conftest.py's start_rank
  if chooses_workers "$@"; then workers=(); fi
  exec "$PY" -m pytest "${workers[@]}" "$@"
}

# chooses_workers ARGS...: true when ARGS set the workers themselves (-n/--numprocesses/--dist).
chooses_workers() {
  local arg
  for arg in "$@"; do
    case "$arg" in
      -n | -n* | --numprocesses* | --dist*) return 0 ;;
    esac
  done
  return 1
}

main "$@"
