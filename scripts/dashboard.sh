#!/usr/bin/env bash
# The Dash app comparing runs, on http://127.0.0.1:8050 by default.
set -euo pipefail

usage() {
  cat <<'USAGE'
Usage: ./scripts/dashboard.sh [--data-dir data] [--host 127.0.0.1] [--port 8050]

Serves the dashboard over every run under DATA_DIR/runs and DATA_DIR/examples.
New runs appear without a restart. Stop it with Ctrl-C.
USAGE
}

main() {
  if [[ "${1:-}" == "-h" || "${1:-}" == "--help" ]]; then
    usage
    return 0
  fi
  # shellcheck source=scripts/lib.sh
  source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
  ensure_venv "train,dashboard"
  cd "$REPO_ROOT"
  exec "$PY" -m dashboard "$@"
}

main "$@"
