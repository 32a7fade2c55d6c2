# shellcheck shell=bash
# Shared helpers for the entry-point scripts: find the repo, make the virtualenv, install on first use.
# Sourced, never run. Everything beyond bootstrapping lives in Python.

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${WORKBENCH_VENV:-$REPO_ROOT/.venv}"
PY="$VENV/bin/python"

die() {
  printf '%s: error: %s\n' "$(basename "$0")" "$*" >&2
  exit "${EXIT_CODE:-1}"
}

log() {
  printf '%s: %s\n' "$(basename "$0")" "$*" >&2
}

# check_duration TEXT: exit 2 with one line unless TEXT is a duration; needs nothing installed yet.
check_duration() {
  local problem
  problem=$(PYTHONPATH="$REPO_ROOT" python3 -m runformat duration "$1" 2>&1 >/dev/null) \
    || EXIT_CODE=2 die "${problem#error: } (see --help)"
}

# check_options [OPTIONS...]: exit 2 with one line unless --data-dir, --dataset and --preset are usable;
# needs nothing installed yet (standard library only).
check_options() {
  local problem
  problem=$(PYTHONPATH="$REPO_ROOT" python3 -m collect.usage "$@" 2>&1 >/dev/null) \
    || EXIT_CODE=2 die "${problem#error: } (see --help)"
}

# ensure_venv EXTRAS: create $VENV and `pip install -e .[EXTRAS]` unless each extra is stamped as installed
# from the current pyproject.toml.
ensure_venv() {
  local extras="$1" stamp digest extra missing=()
  stamp="$VENV/.workbench-installed"
  digest="$(cksum <"$REPO_ROOT/pyproject.toml" | cut -d' ' -f1)"
  IFS=',' read -r -a wanted <<<"$extras"
  for extra in "${wanted[@]}"; do
    [[ -x "$PY" && -f "$stamp" ]] && grep -qxF -- "$digest $extra" "$stamp" || missing+=("$extra")
  done
  [[ ${#missing[@]} -eq 0 ]] && return 0
  local base_python="${WORKBENCH_PYTHON:-python3}"
  command -v "$base_python" >/dev/null || die "python3 not found: install Python 3.10-3.12"
  "$base_python" -c 'import sys; sys.exit(not ((3, 10) <= sys.version_info[:2] <= (3, 12)))' \
    || die "Python 3.10-3.12 is required (TensorFlow 2.20), found $("$base_python" --version 2>&1)"
  if [[ ! -x "$PY" ]]; then
    log "first use: creating $VENV"
    "$base_python" -m venv "$VENV" || die "could not create a virtualenv (on Debian: apt-get install python3-venv)"
  fi
  log "installing the workbench with [$extras] into $VENV (a few minutes the first time)"
  local pip_log="$VENV/pip-install.log"
  if ! { "$PY" -m pip install --upgrade pip && "$PY" -m pip install -e "${REPO_ROOT}[${extras}]"; } >"$pip_log" 2>&1; then
    tail -n 20 "$pip_log" >&2
    die "pip install -e .[$extras] failed (whole log: $pip_log)"
  fi
  { grep -s "^$digest " "$stamp" || true; for extra in "${wanted[@]}"; do echo "$digest $extra"; done; } \
    | sort -u >"$stamp.new"
  mv "$stamp.new" "$stamp"
}

# ensure_debian_packages PKG...: install missing Debian packages when we are root with apt-get; else say what is missing.
ensure_debian_packages() {
  local missing=() pkg
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  [[ ${#missing[@]} -eq 0 ]] && return 0
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
    log "installing Debian packages: ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get update -q >&2 || die "apt-get update failed"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >&2 \
      || die "apt-get install ${missing[*]} failed"
  else
    log "missing Debian packages (tests that need them are skipped): ${missing[*]}"
  fi
}

# check_prometheus ARGS...: exit 2 with one line if a --prometheus value is not [HOST:]PORT with a port
# from 1 to 65535; needs nothing installed yet (the collector itself refuses a port in use, also with 2).
check_prometheus() {
  local expect_value=0 arg value port
  for arg in "$@"; do
    [[ "$arg" == "--" && $expect_value -eq 0 ]] && break  # the job's own arguments follow
    if ((expect_value)); then
      value="$arg"
      expect_value=0
    elif [[ "$arg" == "--prometheus" ]]; then
      expect_value=1
      continue
    elif [[ "$arg" == --prometheus=* ]]; then
      value="${arg#--prometheus=}"
    else
      continue
    fi
    port="${value##*:}"
    if [[ ! "$port" =~ ^[0-9]{1,5}$ ]] || ((10#$port < 1 || 10#$port > 65535)); then
      EXIT_CODE=2 die "--prometheus '$value': expected HOST:PORT or PORT, with a port from 1 to 65535 (see --help)"
    fi
  done
  if ((expect_value)); then
    EXIT_CODE=2 die "--prometheus needs HOST:PORT (see --help)"
  fi
}

# framework_extras TF_EXTRAS ARGS...: the extras to install for a training run: TF_EXTRAS, or with
# `--framework torch` among ARGS the same with `train` and `gpu` (TensorFlow) replaced by `torch`; for the
# user's own job (`-- COMMAND` among ARGS) only what records and sizes it: its libraries are its own.
framework_extras() {
  local tf_extras="$1" framework=tf previous="" arg
  shift
  for arg in "$@"; do
    if [[ "$arg" == "--" ]]; then
      printf 'sizing,dashboard\n'
      return 0
    fi
    [[ "$previous" == "--framework" ]] && framework="$arg"
    [[ "$arg" == --framework=* ]] && framework="${arg#--framework=}"
    previous="$arg"
  done
  if [[ "$framework" == "torch" ]]; then
    printf 'torch,%s\n' "$(tr ',' '\n' <<<"$tf_extras" | grep -vxE 'train|gpu' | paste -sd, -)"
  else
    printf '%s\n' "$tf_extras"
  fi
}
