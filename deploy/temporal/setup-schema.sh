#!/bin/sh
# Creates, or upgrades to the server's version, Temporal's two PostgreSQL databases. Idempotent: run it before every
# server start. docker-compose.yml's temporal-schema service runs it (admin-tools image); so does
# dev/temporal-cluster.ts, with the sql tool built from the same server version.
#   TEMPORAL_DB_HOST, TEMPORAL_DB_PORT, TEMPORAL_DB_USER, TEMPORAL_DB_PASSWORD, TEMPORAL_DB_NAME,
#   TEMPORAL_VISIBILITY_DB_NAME, TEMPORAL_DB_TLS_CA_FILE: as in config.yaml
#   TEMPORAL_DB_PASSWORD_FILE: a file holding the password instead (compose's secret)
#   SQL_TOOL: the temporal-sql-tool binary; TEMPORAL_SCHEMA_DIR: the server's schema/ directory
set -eu
SQL_TOOL="${SQL_TOOL:-temporal-sql-tool}"
SCHEMA_DIR="${TEMPORAL_SCHEMA_DIR:-/etc/temporal/schema}"
if [ -n "${TEMPORAL_DB_PASSWORD_FILE:-}" ]; then TEMPORAL_DB_PASSWORD="$(cat "$TEMPORAL_DB_PASSWORD_FILE")"; fi
export SQL_PASSWORD="${TEMPORAL_DB_PASSWORD:-}"
# TLS with the server's certificate checked against the CA and the host's name, as the server connects.
if [ -n "${TEMPORAL_DB_TLS_CA_FILE:-}" ]; then
  export SQL_TLS=true SQL_TLS_CA_FILE="$TEMPORAL_DB_TLS_CA_FILE"
fi
sql() {
  database="$1"
  shift
  "$SQL_TOOL" --plugin postgres12 --ep "${TEMPORAL_DB_HOST:-127.0.0.1}" -p "${TEMPORAL_DB_PORT:-5432}" \
    -u "${TEMPORAL_DB_USER:-temporal}" --db "$database" "$@"
}
for pair in "${TEMPORAL_DB_NAME:-temporal}:temporal" "${TEMPORAL_VISIBILITY_DB_NAME:-temporal_visibility}:visibility"; do
  database="${pair%%:*}"
  schema="${pair##*:}"
  # create-database fails when it exists: fine, the schema steps below are what must succeed.
  sql "$database" create-database >/dev/null 2>&1 || true
  sql "$database" setup-schema -v 0.0
  sql "$database" update-schema -d "$SCHEMA_DIR/postgresql/v12/$schema/versioned"
  echo "temporal schema: $database ($schema) is up to date"
done
