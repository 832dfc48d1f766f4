#!/bin/sh
# Creates, or upgrades to the server's version, Temporal's two PostgreSQL databases. Idempotent: run it before every
# server start. docker-compose.yml's temporal-schema service runs it (admin-tools image); so does
# dev/temporal-cluster.ts, with the sql tool built from the same server version.
#   TEMPORAL_DB_HOST, TEMPORAL_DB_PORT, TEMPORAL_DB_USER, TEMPORAL_DB_PASSWORD, TEMPORAL_DB_NAME,
#   TEMPORAL_VISIBILITY_DB_NAME: as in config.yaml
#   SQL_TOOL: the temporal-sql-tool binary; TEMPORAL_SCHEMA_DIR: the server's schema/ directory
set -eu
SQL_TOOL="${SQL_TOOL:-temporal-sql-tool}"
SCHEMA_DIR="${TEMPORAL_SCHEMA_DIR:-/etc/temporal/schema}"
export SQL_PASSWORD="${TEMPORAL_DB_PASSWORD:-}"
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
