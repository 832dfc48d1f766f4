#!/bin/sh
# Registers the product's namespaces and search attributes on a Temporal cluster. Idempotent. docker-compose.yml's
# temporal-setup service runs it (admin-tools image); so does dev/temporal-cluster.ts, with the `temporal` CLI the
# local stack uses.
#   TEMPORAL_ADDRESS: the frontend; TEMPORAL_CLI: the `temporal` binary
#   TEMPORAL_API_KEY: the token the CLI sends; TEMPORAL_API_KEY_FILE: a file holding it instead (compose's secret)
#   TEMPORAL_TLS_*: the CLI's own TLS variables (the CA, the server's name, a client certificate and key)
#   NAMESPACES: space-separated (one per region); NAMESPACE_RETENTION: how long closed workflows stay visible
#   SEARCH_ATTRIBUTES: space-separated; src/contracts/search-attributes.ts defines them (a test keeps this list equal)
set -eu
CLI="${TEMPORAL_CLI:-temporal}"
# The CLI takes its token from TEMPORAL_API_KEY (or --api-key), never from a file.
if [ -n "${TEMPORAL_API_KEY_FILE:-}" ]; then
  TEMPORAL_API_KEY="$(cat "$TEMPORAL_API_KEY_FILE")"
  export TEMPORAL_API_KEY
fi
NAMESPACES="${NAMESPACES:-hold-sweeper-us hold-sweeper-eu}"
SEARCH_ATTRIBUTES="${SEARCH_ATTRIBUTES:-Region MerchantId HoldId DeliveryStatus}"
for namespace in $NAMESPACES; do
  if ! "$CLI" operator namespace describe -n "$namespace" >/dev/null 2>&1; then
    "$CLI" operator namespace create -n "$namespace" --retention "${NAMESPACE_RETENTION:-30d}"
  fi
  for attribute in $SEARCH_ATTRIBUTES; do
    # Already registered is fine. A namespace created a moment ago may not be visible to every service yet: retry
    # for a minute before giving up.
    tries=0
    until out=$("$CLI" operator search-attribute create --namespace "$namespace" --name "$attribute" --type Keyword 2>&1); do
      case "$out" in *"already exists"*) break ;; esac
      tries=$((tries + 1))
      if [ "$tries" -ge 60 ]; then
        echo "$out" >&2
        exit 1
      fi
      sleep 1
    done
  done
  echo "temporal namespace $namespace: search attributes $SEARCH_ATTRIBUTES"
done
