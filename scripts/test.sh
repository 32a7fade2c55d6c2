#!/usr/bin/env bash
# Run the whole test suite. First use creates .venv and installs everything the tests need.
set -euo pipefail

usage() {
  cat <<'USAGE'
Usage: ./scripts/test.sh [PYTEST-ARGS...]

Creates .venv on first use, installs the project with its train, torch, infer, sizing, dashboard and test extras,
installs Debian's chromium, chromium-driver, shellcheck, sysstat, prometheus, slurm-wlm and munge when run as root,
then runs pytest. The fast tests (-m "not slow") run in two worker processes (pytest-xdist), since most
of their time is spent waiting on short real runs; pass -n to choose.
Examples:
  ./scripts/test.sh                 # everything, real TensorFlow training and browser tests included
  ./scripts/test.sh -m "not slow"   # the fast unit tests only, in two workers
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
  ensure_venv "train,torch,infer,sizing,dashboard,test"
  cd "$REPO_ROOT"
  local workers=()
  if fast_tests_only "$@"; then workers=(-n 2); fi
  exec "$PY" -m pytest "${workers[@]}" "$@"
}

# fast_tests_only ARGS...: true for -m "not slow" when ARGS do not choose workers (-n/--numprocesses); the
# full suite stays in one process, so that each real training fixture is made once.
fast_tests_only() {
  local arg fast=1
  for arg in "$@"; do
    case "$arg" in
      -n | -n* | --numprocesses*) return 1 ;;
      "not slow" | "-mnot slow") fast=0 ;;
    esac
  done
  return "$fast"
}

main "$@"
