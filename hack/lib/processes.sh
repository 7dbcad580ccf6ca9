# Daemons started detached, each in its own session, with a pid file and a
# log in $STATE_DIR (sourced by hack/control-plane and hack/node; the caller
# defines STATE_DIR and log).

pid_alive() { # name -> 0 if the process recorded in $STATE_DIR/NAME.pid is running that binary
  local f="$STATE_DIR/$1.pid" pid exe=""
  [[ -f $f ]] || return 1
  pid="$(<"$f")"
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  # Guard against pid reuse: the process must be the binary we started
  # (argv[0]; a zombie has an empty command line).
  IFS= read -r -d '' exe 2>/dev/null <"/proc/$pid/cmdline" || true
  [[ $exe == */"$1" ]]
}

stop_proc() { # name: SIGTERM its process group, wait, then SIGKILL
  local name="$1" f="$STATE_DIR/$1.pid" pid i
  if pid_alive "$name"; then
    pid="$(<"$f")"
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do
      pid_alive "$name" || break
      sleep 0.1
    done
    if pid_alive "$name"; then
      log "$name (pid $pid) did not stop within 10s; killing it"
      kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
      for ((i = 0; i < 50; i++)); do
        pid_alive "$name" || break
        sleep 0.1
      done
    fi
  fi
  rm -f "$f"
}

start_proc() { # name binary args...: start in its own session (process group), detached
  local name="$1"
  shift
  local logf="$STATE_DIR/$name.log"
  printf '\n=== %s starting %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$name" >>"$logf"
  # setsid: own session and process group, so `down` can kill the whole group
  # and a Ctrl-C in the caller's terminal does not reach it.
  # fds 8 and 9 are this script's locks: the daemon must not inherit them.
  setsid "$@" </dev/null >>"$logf" 2>&1 8>&- 9>&- &
  local pid=$! i
  echo "$pid" >"$STATE_DIR/$name.pid"
  # $! is a forked shell until it has exec'd setsid and then the binary, and
  # pid_alive takes it for dead until then: on a loaded machine a caller's
  # first check came first and reported a healthy start as an exit. Wait
  # (at most 10 s) until it runs the binary, or has died.
  for ((i = 0; i < 200; i++)); do
    pid_alive "$name" && return 0
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.05
  done
}
