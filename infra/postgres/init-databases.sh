#!/usr/bin/env bash
# First start of the compose PostgreSQL only (docker-entrypoint-initdb.d): one server, two databases with their
# own roles, so the Prefect server and the score warehouse never share credentials, and a read-only role for
# Grafana. Passwords come from the environment and go to psql as variables, never spliced into SQL.
set -euo pipefail

psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres \
  -v prefect_password="${POSTGRES_PREFECT_PASSWORD:?}" \
  -v ragpulse_password="${POSTGRES_RAGPULSE_PASSWORD:?}" \
  -v grafana_password="${POSTGRES_GRAFANA_PASSWORD:?}" <<'SQL'
CREATE ROLE prefect LOGIN PASSWORD :'prefect_password';
CREATE DATABASE prefect OWNER prefect;
CREATE ROLE ragpulse LOGIN PASSWORD :'ragpulse_password';
CREATE DATABASE ragpulse OWNER ragpulse;
CREATE ROLE grafana LOGIN PASSWORD :'grafana_password';
SQL

# The warehouse schema of RAGPULSE_WAREHOUSE (?schema=ragpulse), created here so that every table and view ragpulse
# creates in it later is readable by grafana, and nothing in it writable. Grafana runs whatever SQL a dashboard
# editor types, so its role must not be able to change anything.
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname ragpulse <<'SQL'
CREATE SCHEMA ragpulse AUTHORIZATION ragpulse;
GRANT USAGE ON SCHEMA ragpulse TO grafana;
ALTER DEFAULT PRIVILEGES FOR ROLE ragpulse IN SCHEMA ragpulse GRANT SELECT ON TABLES TO grafana;
ALTER ROLE grafana SET default_transaction_read_only = on;
ALTER ROLE grafana SET statement_timeout = '60s';
SQL
