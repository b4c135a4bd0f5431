#!/usr/bin/env bash
# Register ragpulse with a Prefect server: the work pool, the judge's global rate limits and every deployment in
# deployments/prefect.yaml. Idempotent, so the compose stack and the Kubernetes bootstrap Job run it on every start
# and after every upgrade. Runs from the repository root (/opt/ragpulse in the image).
#
# Environment:
#   PREFECT_API_URL                        the server, e.g. http://prefect-server:4200/api (required)
#   RAGPULSE_SOURCE, RAGPULSE_WAREHOUSE,   what the deployments read and write (required; see deployments/prefect.yaml)
#   RAGPULSE_WORK_DIR
#   RAGPULSE_WORK_POOL                     work pool name (default ragpulse, as in deployments/prefect.yaml)
#   RAGPULSE_WORK_POOL_TYPE                process (compose) or kubernetes (cluster); default process
#   RAGPULSE_BASE_JOB_TEMPLATE             optional JSON file: the pool's base job template, applied on every run
#   RAGPULSE_JUDGE_RATE_LIMIT_NAME         global limit the judge takes one slot from per HTTP call (optional)
#   RAGPULSE_GLOBAL_JUDGE_RPM              provider quota in requests/min for that limit (required with the name)
#   RAGPULSE_JUDGE_TOKEN_RATE_LIMIT_NAME   global limit taken per started 1,000 prompt+completion tokens (optional)
#   RAGPULSE_GLOBAL_JUDGE_TPM              provider quota in tokens/min for that limit (required with the name)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

: "${PREFECT_API_URL:?set PREFECT_API_URL to the Prefect server API, e.g. http://prefect-server:4200/api}"
# prefect.yaml fills the deployments' source, warehouse and work dir from these; unset, `prefect deploy` would
# store empty strings and every run would be refused when it starts.
: "${RAGPULSE_SOURCE:?set RAGPULSE_SOURCE to the traces root, e.g. s3://my-rag-logs/traces}"
: "${RAGPULSE_WAREHOUSE:?set RAGPULSE_WAREHOUSE, e.g. postgresql://ragpulse@db:5432/ragpulse}"
: "${RAGPULSE_WORK_DIR:?set RAGPULSE_WORK_DIR, e.g. s3://my-rag-logs/ragpulse-work or an absolute path}"
pool="${RAGPULSE_WORK_POOL:-ragpulse}"
pool_type="${RAGPULSE_WORK_POOL_TYPE:-process}"

echo "bootstrap: waiting for ${PREFECT_API_URL}"
for attempt in $(seq 1 90); do
  if python -c 'import os, urllib.request; urllib.request.urlopen(os.environ["PREFECT_API_URL"] + "/health", timeout=5)' 2>/dev/null; then
    break
  fi
  if [[ "$attempt" == 90 ]]; then
    echo "bootstrap: ${PREFECT_API_URL} did not answer in 3 minutes" >&2
    exit 1
  fi
  sleep 2
done

# The pool is created once; a base job template given here is re-applied on every run so that the file in git,
# not edits in the UI, is what the workers use.
template_args=()
if [[ -n "${RAGPULSE_BASE_JOB_TEMPLATE:-}" ]]; then
  template_args=(--base-job-template "$RAGPULSE_BASE_JOB_TEMPLATE")
fi
if prefect --no-prompt work-pool inspect "$pool" >/dev/null 2>&1; then
  if [[ ${#template_args[@]} -gt 0 ]]; then
    prefect --no-prompt work-pool update "$pool" "${template_args[@]}"
  fi
else
  prefect --no-prompt work-pool create "$pool" --type "$pool_type" "${template_args[@]}"
fi

# A global concurrency limit with slot decay is a rate limit shared by every process and pod: burst = limit,
# rate = decay per second. The judge takes slots with strict=True, so a missing limit fails loudly.
upsert_rate_limit() {
  local name="$1" per_minute="$2" unit="$3" min_burst="$4"
  local per_second burst
  if [[ ! "$per_minute" =~ ^[0-9]+([.][0-9]+)?$ ]]; then
    echo "bootstrap: quota for ${name} must be a number per minute, got '${per_minute}'" >&2
    exit 2
  fi
  per_second="$(python -c "print(round(${per_minute} / 60 / ${unit}, 3))")"
  burst="$(python -c "import math; print(max(${min_burst}, math.ceil(${per_minute} / 60 / ${unit})))")"
  if prefect --no-prompt gcl inspect "$name" >/dev/null 2>&1; then
    prefect --no-prompt gcl update "$name" --limit "$burst" --slot-decay-per-second "$per_second"
  else
    prefect --no-prompt gcl create "$name" --limit "$burst" --slot-decay-per-second "$per_second"
  fi
  echo "bootstrap: global limit ${name}: burst ${burst}, ${per_second} slots/s"
}
if [[ -n "${RAGPULSE_JUDGE_RATE_LIMIT_NAME:-}" ]]; then
  upsert_rate_limit "$RAGPULSE_JUDGE_RATE_LIMIT_NAME" \
    "${RAGPULSE_GLOBAL_JUDGE_RPM:?set RAGPULSE_GLOBAL_JUDGE_RPM, the judge quota in requests per minute}" 1 1
fi
if [[ -n "${RAGPULSE_JUDGE_TOKEN_RATE_LIMIT_NAME:-}" ]]; then
  # One slot per started 1,000 tokens. Prefect refuses an acquisition larger than the limit, and one judge call
  # reserves up to ~3,000 prompt tokens plus n x 512 completion tokens, so the burst never goes below 8.
  upsert_rate_limit "$RAGPULSE_JUDGE_TOKEN_RATE_LIMIT_NAME" \
    "${RAGPULSE_GLOBAL_JUDGE_TPM:?set RAGPULSE_GLOBAL_JUDGE_TPM, the judge quota in tokens per minute}" 1000 8
fi

prefect --no-prompt deploy --all --prefect-file deployments/prefect.yaml
echo "bootstrap: deployments registered on work pool ${pool}"
