# shellcheck shell=bash disable=SC2034 # sets variables for the scripts that source it
# What the bench/* scripts share: sourced (after `cd` to the repository
# root) as `. bench/lib.sh NAME`, NAME prefixing their log lines.
#
# Sets CACHE_DIR, exports CARGO_TARGET_DIR (both outside the clone, as
# hack/test does) and RAW (WQS_BENCH_RAW or /dev/null, emptied), then defines
# the helpers below.

BENCH_NAME="$1"
CACHE_DIR="${WQS_CACHE_DIR:-$HOME/.cache/workqueue-sidecar}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$CACHE_DIR/target}"
RAW="${WQS_BENCH_RAW:-/dev/null}"
: >"$RAW"

log() { printf '%s: %s\n' "$BENCH_NAME" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# positive NAME VALUE: dies unless VALUE is a positive whole number.
positive() { [[ "$2" =~ ^[1-9][0-9]*$ ]] || die "$1 must be a positive whole number, not '$2'"; }

# bench_control_plane: the benchmark's own local control plane (never the
# tests'), left running for the next run; sets KC to its kubeconfig.
bench_control_plane() {
  export WQS_STATE_DIR="${WQS_BENCH_STATE_DIR:-$CACHE_DIR/bench-control-plane}"
  hack/control-plane up >&2
  eval "$(hack/control-plane env)"
  KC="$WQS_KUBECONFIG"
}

# sidecar_binary DIR: prints the sidecar to measure: WQS_BENCH_SIDECAR, or
# this tree's release build copied into DIR, because the target dir may be
# shared with other checkouts whose builds would replace it mid-run.
sidecar_binary() {
  if [[ -n "${WQS_BENCH_SIDECAR:-}" ]]; then
    printf '%s' "$WQS_BENCH_SIDECAR"
    return
  fi
  cargo build --release --bin workqueue-sidecar >&2
  cp "$CARGO_TARGET_DIR/release/workqueue-sidecar" "$1/workqueue-sidecar"
  printf '%s' "$1/workqueue-sidecar"
}

# machine: the machine in one line (CPUs, model, memory, kernel).
machine() {
  printf '%s vCPU, %s, %s, %s' "$(nproc)" "$(grep -m1 '^model name' /proc/cpuinfo | sed 's/.*: //')" \
    "$(awk '/MemTotal/ { printf "%.0f GiB RAM", $2 / 1048576 }' /proc/meminfo)" "$(uname -sr)"
}

# thousands N: 100000 -> 100,000, as the report's variants write counts.
thousands() { sed -E ':a;s/([0-9])([0-9]{3})($|,)/\1,\2\3/;ta' <<<"$1"; }

now_us() { printf '%s' "${EPOCHREALTIME/[.,]/}"; }
secs() { printf '%d.%03d' $(($1 / 1000000)) $(($1 % 1000000 / 1000)); } # microseconds -> seconds
mib() { echo "scale=1; $1 / 1024" | bc -l; }                             # KiB -> MiB

# proc_kib PID FIELD: a /proc/PID/status field in KiB (VmRSS, VmHWM).
proc_kib() { awk -v f="$2" '$1 == f ":" { print $2 }' "/proc/$1/status"; }

# proc_cpu_s PID: the process's CPU time so far (user + system), seconds.
proc_cpu_s() { awk -v tck="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / tck }' "/proc/$1/stat"; }

# synced_at_us LINE: the wall-clock time (microseconds) a "synced" line
# names: client-go programs print unix_us=, the sidecar's line starts with
# its tracing timestamp.
synced_at_us() {
  if [[ "$1" =~ unix_us=([0-9]+) ]]; then
    printf '%s' "${BASH_REMATCH[1]}"
  else
    date -d "${1%%Z*}Z" +%s%6N
  fi
}

# wait_for PID FILE PATTERN WHAT [SECONDS]: until FILE has a line matching
# PATTERN; status 1 (and a log line) if the process exits or time runs out.
wait_for() {
  local pid="$1" file="$2" pattern="$3" what="$4" deadline=$((SECONDS + ${5:-600}))
  until grep -q "$pattern" "$file"; do
    kill -0 "$pid" 2>/dev/null || { tail -20 "$file" >&2; log "$what: the process exited"; return 1; }
    ((SECONDS < deadline)) || { tail -5 "$file" >&2; log "$what: not within ${5:-600} s"; return 1; }
    sleep 0.005
  done
}

# start_sidecar BIN CONFIG LOG [ARGS...]: starts the sidecar on free loopback
# ports (text logs in LOG; --kubeconfig KC when KC is set, standalone
# otherwise; ARGS added to its command line) and waits until it logged both;
# sets SIDECAR_PID,
# SIDECAR_GRPC and SIDECAR_ADMIN (host:port each), read from its "listening"
# lines as tests/support/sidecar.rs reads them.
start_sidecar() {
  : >"$3" # exists before wait_for reads it (the background process opens it later)
  "$1" --config "$2" ${KC:+--kubeconfig "$KC"} --tcp 127.0.0.1:0 --admin 127.0.0.1:0 --log info --log-format text \
    "${@:4}" >"$3" 2>&1 &
  SIDECAR_PID=$!
  wait_for "$SIDECAR_PID" "$3" "admin http listening" "the sidecar's admin address" 30 || die "the sidecar did not start"
  wait_for "$SIDECAR_PID" "$3" 'transport="tcp"' "the sidecar's gRPC address" 30 || die "the sidecar did not start"
  SIDECAR_GRPC="$(sed -n 's/.*transport="tcp" address=\([^ ]*\).*/\1/p' "$3" | head -1)"
  SIDECAR_ADMIN="$(sed -n 's/.*admin http listening address=\([^ ]*\).*/\1/p' "$3" | head -1)"
}

# stop_sidecar: SIGTERM, then wait for it to exit.
stop_sidecar() {
  [[ -n "${SIDECAR_PID:-}" ]] || return 0
  kill "$SIDECAR_PID" 2>/dev/null || true
  wait "$SIDECAR_PID" 2>/dev/null || true
  SIDECAR_PID=""
}

# local_changes PATH...: " (with local changes)" when the working tree's
# PATHs differ from HEAD in content, nothing otherwise. The index is
# refreshed first: a file rewritten with the same bytes (go mod tidy, a
# checkout) would otherwise count as changed.
local_changes() {
  git update-index -q --refresh >/dev/null 2>&1 || true
  git diff --quiet HEAD -- "$@" 2>/dev/null || printf ' (with local changes)'
}

# stop_pid PID: SIGTERM, then SIGKILL if it has not exited within 20 s.
stop_pid() {
  local pid="$1" i
  kill "$pid" 2>/dev/null || return 0
  for ((i = 0; i < 400; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  kill -0 "$pid" 2>/dev/null && { log "process $pid did not exit within 20 s of SIGTERM; killing it"; kill -9 "$pid" 2>/dev/null; }
  wait "$pid" 2>/dev/null || true
}

# summary SECTION FILE: the figures of FILE as the report shows them (median
# (min-max) per figure and program, then the section's targets).
summary() { python3 bench/report/render.py --summary "$1" --raw "$2"; }
