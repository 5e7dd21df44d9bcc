#!/bin/sh
# A shell script's loop of `mcp-supervisor call`: N calls through a running gateway, then
# N calls that each start the server themselves (--no-gateway), and the wall time of each.
#
#   examples/call_loop.sh [N]        (default 100; needs the package installed)
#
# The config is made here: the example calc server over stdio (examples/servers/calc.py).
# The gateway is `mcp-supervisor serve --http 127.0.0.1:0` for that config, in the
# background; the CLI finds it by its config (a Unix socket), not by the HTTP address.
set -eu

N=${1:-100}
HERE=$(cd "$(dirname "$0")" && pwd)
PYTHON=${PYTHON:-python3}
WORK=$(mktemp -d /tmp/call-loop-XXXXXX)
CONFIG="$WORK/mcp.json"
export XDG_RUNTIME_DIR="$WORK/run"   # the gateway's socket, private to this run
SERVE_PID=

cleanup() {
    if [ -n "$SERVE_PID" ]; then
        kill -TERM "$SERVE_PID" 2>/dev/null || true
        wait "$SERVE_PID" 2>/dev/null || true
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT INT TERM HUP

# initTimeout: on a busy machine a Python server's start can outlast the 10 s default
cat > "$CONFIG" <<JSON
{"mcpServers": {"calc": {"command": "$PYTHON", "args": ["$HERE/servers/calc.py"],
                         "approve": false, "lazy": false, "initTimeout": 60}}}
JSON

now() { "$PYTHON" -c 'import time; print(time.time())'; }
elapsed() { "$PYTHON" -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$2"; }

"$PYTHON" -m supervisor serve --config "$CONFIG" --http 127.0.0.1:0 2> "$WORK/serve.log" &
SERVE_PID=$!
# ready once the gateway answers on its socket for this config
tries=0
until "$PYTHON" -m supervisor status --config "$CONFIG" > /dev/null 2>&1; do
    tries=$((tries + 1))
    if [ "$tries" -gt 600 ] || ! kill -0 "$SERVE_PID" 2>/dev/null; then
        echo "call_loop: the gateway did not start:" >&2
        cat "$WORK/serve.log" >&2
        exit 1
    fi
    sleep 0.1
done

start=$(now)
i=0
while [ "$i" -lt "$N" ]; do
    "$PYTHON" -m supervisor call --config "$CONFIG" calc_add "{\"a\": $i, \"b\": 1}" > "$WORK/out"
    i=$((i + 1))
done
warm=$(elapsed "$start" "$(now)")
echo "last answer through the gateway: $(cat "$WORK/out")"

start=$(now)
i=0
while [ "$i" -lt "$N" ]; do
    "$PYTHON" -m supervisor call --config "$CONFIG" --no-gateway calc_add "{\"a\": $i, \"b\": 1}" > "$WORK/out"
    i=$((i + 1))
done
cold=$(elapsed "$start" "$(now)")
echo "last answer without it: $(cat "$WORK/out")"

echo "$N calls through a running gateway: $warm s"
echo "$N calls, each starting the server: $cold s"
