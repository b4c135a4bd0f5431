#!/usr/bin/env bash
# First start of the compose PostgreSQL only (docker-entrypoint-initdb.d): one server, two databases with their
# own roles, so the Prefect server and the score warehouse never share credentials. Passwords come from the
# environment and go to psql as variables, never spliced into SQL.
set -euo pipefail

psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres \
  -v prefect_password="${POSTGRES_PREFECT_PASSWORD:?}" \
  -v ragpulse_password="${POSTGRES_RAGPULSE_PASSWORD:?}" <<'SQL'
CREATE ROLE prefect LOGIN PASSWORD :'prefect_password';
CREATE DATABASE prefect OWNER prefect;
CREATE ROLE ragpulse LOGIN PASSWORD :'ragpulse_password';
CREATE DATABASE ragpulse OWNER ragpulse;
SQL
