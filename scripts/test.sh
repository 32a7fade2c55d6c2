#!/usr/bin/env bash
# Run the whole test suite. First use creates .venv and installs everything the tests need.
set -euo pipefail

usage() {
  cat <<'USAGE'
Usage: ./scripts/test.sh [PYTEST-ARGS...]

Creates .venv on first use, installs the project with its train, torch, infer, sizing, dashboard and test extras,
installs Debian's chromium, chromium-driver, shellcheck, sysstat, prometheus, slurm-wlm and munge when run as root,
then runs pytest.
Examples:
  ./scripts/test.sh                 # everything, real TensorFlow training and browser tests included
  ./scripts/test.sh -m "not slow"   # the fast unit tests only
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
  exec "$PY" -m pytest "$@"
}

main "$@"
