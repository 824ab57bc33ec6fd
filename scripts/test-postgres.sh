#!/usr/bin/env bash
# The PostgreSQL archive's tests (arc-store feature `postgres`) against a
# throwaway cluster: installs PostgreSQL from the distribution's packages when
# missing, creates a cluster in a temporary directory (password
# authentication on loopback TCP, TLS with a self-made CA), starts it on a
# free loopback port, runs the tests with LAM_REQUIRE_PG=1 (so a missing
# server fails them instead of skipping), and removes the cluster however the
# run ends.
#
#   bash scripts/test-postgres.sh            # tests
#   bash scripts/test-postgres.sh --bench    # tests, then the FileStore/PgStore benchmark
#   bash scripts/test-postgres.sh --bench-only
#   bash scripts/test-postgres.sh --with CMD ARGS...   # CMD on the throwaway server ($LAM_TEST_PG_URL), nothing else
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-test}

pg_bin() {
    ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1
}

bin=$(pg_bin)
if [[ -z "$bin" || ! -x "$bin/initdb" ]]; then
    if [[ "${CI:-}" != true && "${LAM_TEST_SYSTEM:-}" != 1 ]]; then
        echo "SKIPPED: the PostgreSQL tests (PostgreSQL is not installed). Run them with" >&2
        echo "         LAM_TEST_SYSTEM=1 bash scripts/test-postgres.sh   (installs postgresql with apt-get, as CI does)" >&2
        exit 0
    fi
    # (its own cluster is not started: this script makes one)
    bash scripts/apt-install.sh "the PostgreSQL tests" postgresql
    bin=$(pg_bin)
fi
psql_bin="$bin/psql"
[[ -x "$psql_bin" ]] || psql_bin=$(command -v psql)

# initdb refuses to run as root: the cluster belongs to an unprivileged user.
run_as=()
owner=$(id -un)
if [[ $(id -u) -eq 0 ]]; then
    owner=postgres
    if ! id -u "$owner" >/dev/null 2>&1; then
        if [[ "${CI:-}" != true && "${LAM_TEST_SYSTEM:-}" != 1 ]]; then
            echo "SKIPPED: the PostgreSQL tests (running as root, they need a system user \`postgres\`). Run them with" >&2
            echo "         LAM_TEST_SYSTEM=1 bash scripts/test-postgres.sh   (adds the user, as CI does)" >&2
            exit 0
        fi
        useradd --system --no-create-home --shell /usr/sbin/nologin "$owner"
    fi
    run_as=(runuser -u "$owner" --)
fi

tmp=$(mktemp -d /tmp/lam-pg.XXXXXX)
data="$tmp/data"
cleanup() {
    local rc=$?
    if [[ -f "$data/postmaster.pid" ]]; then
        "${run_as[@]}" "$bin/pg_ctl" -D "$data" stop -m immediate >/dev/null 2>&1 || true
    fi
    if [[ $rc -ne 0 && -f "$tmp/server.log" ]]; then
        echo "--- server log (last 40 lines) ---" >&2
        tail -n 40 "$tmp/server.log" >&2 || true
    fi
    rm -rf "$tmp"
    exit $rc
}
trap cleanup EXIT INT TERM

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
password=$(head -c 18 /dev/urandom | base64 | tr -d '/+=')
printf '%s\n' "$password" > "$tmp/pwfile"
mkdir -p "$tmp/sock"

# A CA and a server certificate for localhost / 127.0.0.1 (TLS tests).
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=lam test CA" \
    -keyout "$tmp/ca.key" -out "$tmp/ca.crt" >/dev/null 2>&1
openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" \
    -keyout "$tmp/server.key" -out "$tmp/server.csr" >/dev/null 2>&1
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' > "$tmp/san.ext"
openssl x509 -req -in "$tmp/server.csr" -CA "$tmp/ca.crt" -CAkey "$tmp/ca.key" -CAcreateserial \
    -days 2 -extfile "$tmp/san.ext" -out "$tmp/server.crt" >/dev/null 2>&1
chmod 600 "$tmp/server.key"
chown -R "$owner" "$tmp"

"${run_as[@]}" "$bin/initdb" -D "$data" -U lam --pwfile="$tmp/pwfile" -E UTF8 --locale=C \
    --auth-local=trust --auth-host=scram-sha-256 >"$tmp/initdb.log" 2>&1 || { cat "$tmp/initdb.log" >&2; exit 1; }
cat >> "$data/postgresql.conf" <<EOF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$tmp/sock'
max_connections = 200
ssl = on
ssl_cert_file = '$tmp/server.crt'
ssl_key_file = '$tmp/server.key'
logging_collector = off
EOF
# pg_ctl for the tests (the restart test stops and starts the server), as the cluster's owner.
cat > "$tmp/pg_ctl" <<EOF
#!/usr/bin/env bash
exec ${run_as[*]} "$bin/pg_ctl" -D "$data" -l "$tmp/server.log" -w "\$@"
EOF
chmod +x "$tmp/pg_ctl"
"$tmp/pg_ctl" start >/dev/null

export LAM_TEST_PG_URL="postgres://lam:$password@127.0.0.1:$port/postgres"
export LAM_TEST_PG_CTL="$tmp/pg_ctl"
export LAM_TEST_PG_CA="$tmp/ca.crt"
export LAM_TEST_PSQL="$psql_bin"
export LAM_REQUIRE_PG=1
echo "throwaway PostgreSQL $("$bin/postgres" --version | awk '{print $3}') on 127.0.0.1:$port (data in $data)"

if [[ "$mode" == "--with" ]]; then
    shift
    "$@"
    exit $?
fi
if [[ "$mode" != "--bench-only" ]]; then
    cargo test -p arc-store --features postgres --lib --test pg --test pg_restart
fi
if [[ "$mode" == "--bench" || "$mode" == "--bench-only" ]]; then
    cargo bench -p arc-store --features postgres --bench pg
fi
# The lam program on the server: compact --store postgres://..., recall byte-exact, --list
# (target/debug/lam as `cargo test --workspace` built it; built here when missing).
if [[ "$mode" != "--bench-only" ]]; then
    bash scripts/build-lam.sh
    # The Python package too, when scripts/test-python.sh has installed it (test.sh runs it first).
    [[ -x target/py-venv/bin/python ]] && export LAM_PYTHON="$PWD/target/py-venv/bin/python"
    python3 scripts/test-postgres-cli.py target/debug/lam "$LAM_TEST_PG_URL"
fi
