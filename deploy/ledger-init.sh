#!/bin/sh
# The ledger's PostgreSQL, as docker-compose.yml's ledger-db runs it once on a new data volume (the postgres image runs
# /docker-entrypoint-initdb.d/*.sh as its superuser): one database per region, owned by the migrator, and one login
# role per service (docs/security.md#one-role-per-service). No service is a superuser or an owner: the migrator
# creates the tables and grants each role what it uses (src/db/rights.ts), in `npm run migrate` (compose's
# ledger-migrate). Each role's password is taken as the Node services take a secret: LEDGER_<ROLE>_PASSWORD, or the
# file LEDGER_<ROLE>_PASSWORD_FILE names (never both); unset, the file compose mounts as a secret (`npm run
# credentials` writes them). They reach SQL as psql variables, never spliced into it.
set -eu
# password <ROLE> <compose's file>: the role's password, from its variable, its _FILE variable or compose's file.
password() {
  eval "value=\${LEDGER_$1_PASSWORD:-}"
  eval "file=\${LEDGER_$1_PASSWORD_FILE:-}"
  if [ -n "$value" ] && [ -n "$file" ]; then
    echo "ledger-init.sh: set LEDGER_$1_PASSWORD or LEDGER_$1_PASSWORD_FILE, not both" >&2
    exit 1
  fi
  if [ -n "$value" ]; then printf '%s' "$value"; else cat "${file:-$2}"; fi
}
migrator="$(password MIGRATOR /run/secrets/ledger-migrator-password)"
worker="$(password WORKER /run/secrets/ledger-worker-password)"
receiver="$(password RECEIVER /run/secrets/ledger-receiver-password)"
ops="$(password OPS /run/secrets/ledger-ops-password)"
merchant_api="$(password MERCHANT_API /run/secrets/ledger-merchant-api-password)"
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres -v migrator="$migrator" -v worker="$worker" \
  -v receiver="$receiver" -v ops="$ops" -v merchant_api="$merchant_api" <<'SQL'
CREATE ROLE hold_sweeper_migrator LOGIN PASSWORD :'migrator';
CREATE ROLE hold_sweeper_worker LOGIN PASSWORD :'worker';
CREATE ROLE hold_sweeper_receiver LOGIN PASSWORD :'receiver';
CREATE ROLE hold_sweeper_ops LOGIN PASSWORD :'ops';
CREATE ROLE hold_sweeper_merchant_api LOGIN PASSWORD :'merchant_api';
SQL
for database in hold_sweeper_us hold_sweeper_eu; do
  psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres <<SQL
CREATE DATABASE $database OWNER hold_sweeper_migrator;
REVOKE ALL ON DATABASE $database FROM PUBLIC;
GRANT CONNECT ON DATABASE $database TO hold_sweeper_worker, hold_sweeper_receiver, hold_sweeper_ops, hold_sweeper_merchant_api;
SQL
done
