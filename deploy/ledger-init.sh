#!/bin/sh
# The ledger's PostgreSQL, as docker-compose.yml's ledger-db runs it once on a new data volume (the postgres image runs
# /docker-entrypoint-initdb.d/*.sh as its superuser): one database per region, owned by the migrator, and one login
# role per service (docs/security.md#one-role-per-service). No service is a superuser or an owner: the migrator
# creates the tables and grants each role what it uses (src/db/rights.ts), in `npm run migrate` (compose's
# ledger-migrate). Passwords come from the files compose mounts as secrets (`npm run credentials` writes them), through
# psql variables (never spliced into SQL).
set -eu
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres \
  -v migrator="$(cat /run/secrets/ledger-migrator-password)" -v worker="$(cat /run/secrets/ledger-worker-password)" \
  -v receiver="$(cat /run/secrets/ledger-receiver-password)" -v ops="$(cat /run/secrets/ledger-ops-password)" \
  -v merchant_api="$(cat /run/secrets/ledger-merchant-api-password)" <<'SQL'
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
