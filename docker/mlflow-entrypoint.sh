#!/bin/sh
# Start MLflow's tracking server for context-cda from the environment (the keys of mlflow/server.env.example).
#   Backend store: PostgreSQL, MLFLOW_DB_USER@MLFLOW_DB_HOST:MLFLOW_DB_PORT/MLFLOW_DB_NAME. The password is never
#     put on the command line (ps and /proc/<pid>/cmdline show it to every process of the container): libpq
#     reads it from PGPASSWORD (or a PGPASSFILE); MLFLOW_DB_PASSWORD is taken as PGPASSWORD when that is unset.
#     PGSSLMODE and the other libpq variables work the same way.
#   MLFLOW_BACKEND_STORE_URI: a whole backend URI instead (e.g. sqlite:////data/mlflow.db), without a password.
#   MLFLOW_AUTH=basic (default): MLflow's basic-auth app. Users and permissions live in the same database
#     (MLFLOW_AUTH_DATABASE_URI to choose another); the first admin comes from MLFLOW_AUTH_ADMIN_USERNAME and
#     MLFLOW_AUTH_ADMIN_PASSWORD (required: the server does not start without it, nor with MLflow's old published
#     default), the CSRF key from MLFLOW_FLASK_SERVER_SECRET_KEY (Secrets, see docs/kubernetes.md);
#     MLFLOW_AUTH_DEFAULT_PERMISSION (READ) is what every other user may do with resources they did not create.
#   MLFLOW_AUTH=none: no authentication (a single-user machine, never a shared cluster).
# Any arguments are passed on to `mlflow server` (e.g. --host 0.0.0.0 --port 5000 --serve-artifacts ...).
set -eu

fail() {
  echo "ccda-mlflow-serve: $*" >&2
  exit 2
}

if [ -z "${PGPASSWORD:-}" ] && [ -n "${MLFLOW_DB_PASSWORD:-}" ]; then
  PGPASSWORD="$MLFLOW_DB_PASSWORD"
  export PGPASSWORD
fi
unset MLFLOW_DB_PASSWORD

if [ -n "${MLFLOW_BACKEND_STORE_URI:-}" ]; then
  uri="$MLFLOW_BACKEND_STORE_URI"
else
  : "${MLFLOW_DB_HOST:?set MLFLOW_DB_HOST (or MLFLOW_BACKEND_STORE_URI)}"
  : "${MLFLOW_DB_NAME:?set MLFLOW_DB_NAME (or MLFLOW_BACKEND_STORE_URI)}"
  : "${MLFLOW_DB_USER:?set MLFLOW_DB_USER (or MLFLOW_BACKEND_STORE_URI)}"
  uri="postgresql+psycopg2://${MLFLOW_DB_USER}@${MLFLOW_DB_HOST}:${MLFLOW_DB_PORT:-5432}/${MLFLOW_DB_NAME}"
fi
authority="${uri#*://}"
authority="${authority%%/*}"
case "$authority" in
  *:*@*) fail "the backend store URI carries a password; drop it from the URI and set PGPASSWORD instead" ;;
esac

case "${MLFLOW_AUTH:-basic}" in
  basic)
    [ -n "${MLFLOW_AUTH_ADMIN_PASSWORD:-}" ] \
      || fail "MLFLOW_AUTH=basic needs MLFLOW_AUTH_ADMIN_PASSWORD (the first admin's password), from a Secret"
    [ "$MLFLOW_AUTH_ADMIN_PASSWORD" != password1234 ] \
      || fail "MLFLOW_AUTH_ADMIN_PASSWORD is MLflow's published default (password1234): set a secret one"
    [ -n "${MLFLOW_FLASK_SERVER_SECRET_KEY:-}" ] \
      || fail "MLFLOW_AUTH=basic needs MLFLOW_FLASK_SERVER_SECRET_KEY (the same on every replica), from a Secret"
    auth_dir="${TMPDIR:-/tmp}/ccda-mlflow-auth"
    mkdir -p "$auth_dir"
    chmod 700 "$auth_dir"
    # configparser reads "%" as interpolation: double it in URL-encoded URIs
    auth_uri=$(printf '%s' "${MLFLOW_AUTH_DATABASE_URI:-$uri}" | sed 's/%/%%/g')
    cat > "$auth_dir/basic_auth.ini" <<EOF
[mlflow]
default_permission = ${MLFLOW_AUTH_DEFAULT_PERMISSION:-READ}
database_uri = ${auth_uri}
authorization_function = mlflow.server.auth:authenticate_request_basic_auth
EOF
    MLFLOW_AUTH_CONFIG_PATH="$auth_dir/basic_auth.ini"
    export MLFLOW_AUTH_CONFIG_PATH
    set -- --app-name basic-auth "$@"
    ;;
  none) ;;
  *) fail "MLFLOW_AUTH=${MLFLOW_AUTH}: use basic or none" ;;
esac

exec mlflow server --backend-store-uri "$uri" "$@"
