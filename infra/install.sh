#!/usr/bin/env bash
# The one way ragpulse gets installed: `make setup` (dev venv and CI, with the test extras) and
# infra/Dockerfile (the flow image, no extras) both run this script, so the two can never drift.
#
# Usage: infra/install.sh --python PATH [--extras LIST] [--editable] [--stage all|deps|package]
#   --python PATH   interpreter of the target environment (a venv's bin/python); it must already exist
#   --extras LIST   optional-dependency groups of pyproject.toml, comma-separated (e.g. test)
#   --editable      install the package in development mode (make setup)
#   --stage deps    CPU torch, then every dependency listed in pyproject.toml; needs only pyproject.toml,
#                   so an image caches this slow layer until the dependencies change
#   --stage package the package itself, once the source is there (its dependencies are already in)
#   --stage all     both (default)
# Environment:
#   TORCH_SPEC       what pip installs first (default torch==2.13.0): the CPU build, before anything that
#                    depends on torch, so no later step ever pulls a multi-GB CUDA build
#   TORCH_INDEX_URL  index for that one step only, e.g. https://download.pytorch.org/whl/cpu (the image)
#   PIP_ARGS         extra pip arguments for every step (e.g. --quiet, --no-cache-dir)
set -euo pipefail

python=""
extras=""
editable=0
stage="all"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --python) python="$2"; shift 2 ;;
    --extras) extras="$2"; shift 2 ;;
    --editable) editable=1; shift ;;
    --stage) stage="$2"; shift 2 ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "install.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
if [[ -z "$python" ]]; then
  echo "install.sh: --python is required" >&2
  exit 2
fi
case "$stage" in all|deps|package) ;; *) echo "install.sh: --stage must be all, deps or package" >&2; exit 2 ;; esac

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
torch_spec="${TORCH_SPEC:-torch==2.13.0}"
read -r -a pip_args <<< "${PIP_ARGS:-}"
pip() { "$python" -m pip "$@" "${pip_args[@]}"; }

# Pin whatever torch is installed for every later step: a dependency asking for a newer torch then fails
# loudly instead of silently swapping the CPU build for a CUDA one.
constraints="$(mktemp)"
trap 'rm -f "$constraints"' EXIT
pin_torch() {
  "$python" -c 'import importlib.metadata as m; print("torch==" + m.version("torch"))' > "$constraints"
}

if [[ "$stage" == all || "$stage" == deps ]]; then
  pip install --upgrade pip
  # TORCH_SPEC is split on purpose: "torch --index-url URL" (the Makefile's old override) keeps working.
  # shellcheck disable=SC2086
  if [[ -n "${TORCH_INDEX_URL:-}" ]]; then
    pip install --index-url "$TORCH_INDEX_URL" $torch_spec
  else
    pip install $torch_spec
  fi
  pin_torch
  requirements="$(mktemp)"
  "$python" - "$root/pyproject.toml" "$extras" > "$requirements" <<'PY'
import sys, tomllib

project = tomllib.load(open(sys.argv[1], "rb"))["project"]
wanted = [group for group in sys.argv[2].split(",") if group]
unknown = sorted(set(wanted) - set(project.get("optional-dependencies", {})))
if unknown:
    sys.exit(f"install.sh: no such extras in pyproject.toml: {', '.join(unknown)}")
for requirement in project["dependencies"] + [r for group in wanted for r in project["optional-dependencies"][group]]:
    print(requirement)
PY
  pip install -c "$constraints" -r "$requirements"
  rm -f "$requirements"
fi

if [[ "$stage" == all || "$stage" == package ]]; then
  pin_torch
  target="$root"
  if [[ -n "$extras" ]]; then
    target="$root[$extras]"
  fi
  if [[ "$editable" == 1 ]]; then
    pip install -c "$constraints" -e "$target"
  else
    pip install -c "$constraints" "$target"
  fi
fi
