# Building commands from the Go modules pinned under hack/ (sourced by
# hack/control-plane and hack/node). Binaries are cached in
# $CACHE_DIR/bin/<name>-<hash of go.mod, go.sum and $RECIPE>/ and rebuilt only
# when the pins or the recipe change. The caller defines CACHE_DIR, RECIPE,
# log and die.

now() { printf '%s' "${EPOCHREALTIME/[.,]/}"; } # microseconds
since() { # start-microseconds -> seconds with one decimal
  local us=$(($(now) - $1))
  printf '%d.%d' $((us / 1000000)) $((us % 1000000 / 100000))
}

module_version() { # go.mod module-path -> version from the require line
  awk -v m="$2" '($1 == m && $2 != "=>") || ($1 == "require" && $2 == m) { v = ($1 == m) ? $2 : $3 } END { print v }' "$1"
}

pins_hash() { # module dir -> short hash of its pins and the build recipe
  { cat "$1/go.mod" "$1/go.sum"; printf '%s\n' "$RECIPE"; } | sha256sum | cut -c1-16
}

check_go() {
  command -v go >/dev/null || die "'go' is not on PATH; hack/ builds the cluster's parts from Go modules (Go >= 1.26 needed)"
  local v
  v="$(GOTOOLCHAIN=local go env GOVERSION)"
  case "$v" in
    go1.2[6-9]* | go1.[3-9][0-9]* | go[2-9]*) ;;
    *) die "Go $v is too old: the pinned modules need Go >= 1.26" ;;
  esac
}

# build_module NAME MODULE_DIR VERSION_LABEL LDFLAGS "out=pkg"...
# (static binaries, CGO off; build tags from $GO_TAGS, part of the caller's RECIPE)
build_module() {
  local name="$1" mod="$2" label="$3" ldflags="$4"
  shift 4
  local dir
  dir="$CACHE_DIR/bin/$name-$(pins_hash "$mod")"
  local complete=1 spec
  for spec in "$@"; do [[ -x "$dir/${spec%%=*}" ]] || complete=0; done
  if [[ $complete == 1 && -f "$dir/.complete" ]]; then
    return 0
  fi
  mkdir -p "$CACHE_DIR/bin"
  # Serialise builds of the same module (two `up`s at once build once).
  exec 9>"$CACHE_DIR/bin/.$name.lock"
  flock 9
  if [[ -f "$dir/.complete" ]]; then
    exec 9>&-
    return 0
  fi
  local why="not cached"
  if compgen -G "$CACHE_DIR/bin/$name-*/.complete" >/dev/null; then
    why="pins changed"
  fi
  local names=()
  for spec in "$@"; do names+=("${spec%%=*}"); done
  log "building ${names[*]} $label ($why) into $dir"
  log "  (a cold build takes several minutes; later runs reuse the cache)"
  check_go
  local tmp="$dir.tmp.$$" start
  start=$(now)
  rm -rf "$tmp"
  mkdir -p "$tmp"
  for spec in "$@"; do
    local out="${spec%%=*}" pkg="${spec#*=}" t0
    t0=$(now)
    log "  go build -trimpath ${GO_TAGS:+-tags \"$GO_TAGS\" }-o $out $pkg"
    if ! (cd "$mod" && GOTOOLCHAIN=local GOFLAGS="-mod=readonly -buildvcs=false" CGO_ENABLED=0 \
      go build -trimpath -tags "${GO_TAGS:-}" -ldflags "$ldflags" -o "$tmp/$out" "$pkg"); then
      rm -rf "$tmp"
      exec 9>&-
      die "building $out failed (see the go output above)"
    fi
    log "  built $out in $(since "$t0")s"
  done
  printf '%s\nbuilt %s in %ss\n' "$label" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$(since "$start")" >"$tmp/.complete"
  rm -rf "$dir"
  mv "$tmp" "$dir"
  exec 9>&-
  log "built ${names[*]} in $(since "$start")s"
}

