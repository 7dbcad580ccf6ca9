# workqueue-sidecar container image.
#
#   docker build -t ghcr.io/workqueue-sidecar/workqueue-sidecar:dev .
#
# Two stages: a Rust builder on Debian 12 (bookworm, the same glibc as the
# runtime), and a distroless runtime with only the binary, no shell and no
# package manager, running as a non-root user. The builder compiles the
# dependencies in a layer of their own, keyed only on Cargo.toml and
# Cargo.lock, so a change to the sources rebuilds only this crate.
#
# Both base images are build arguments, defaulting to the public ones. With
# no registry reachable, hack/images builds local stand-ins from Debian 12
# packages and builds this file with buildah (`hack/images build`); CI does
# that and runs the image (`hack/images check`), and hadolint lints it.

ARG BUILDER_IMAGE=rust:1.95.0-slim-bookworm
ARG RUNTIME_IMAGE=gcr.io/distroless/cc-debian12:nonroot

FROM ${BUILDER_IMAGE} AS builder

# The release profile as Cargo.toml has it, as on a developer's machine; the
# binary is stripped after the build (install -s; about half the size).
ENV CARGO_TERM_COLOR=never

WORKDIR /src

# 1. Dependencies only. Cargo needs every target Cargo.toml declares to
#    exist: the lib, the bin, the build script and each [[bench]] (their names
#    read from Cargo.toml, so a new bench needs no change here) get an empty
#    stand-in; after the build this crate's own artifacts are removed so the
#    real sources cannot look up to date.
COPY Cargo.toml Cargo.lock ./
RUN mkdir -p src bench/rust \
    && printf 'fn main() {}\n' > src/main.rs \
    && printf '\n' > src/lib.rs \
    && printf 'fn main() {}\n' > build.rs \
    && sed -n '/^\[\[bench\]\]/,/^name/ s/^name = "\(.*\)"/\1/p' Cargo.toml > /tmp/benches \
    && while read -r bench; do printf 'fn main() {}\n' > "bench/rust/$bench.rs"; done < /tmp/benches \
    && cargo build --release --locked --bin workqueue-sidecar \
    && cargo clean --release --package workqueue-sidecar \
    && rm -rf src bench build.rs

# 2. The crate itself. build.rs compiles proto/ with protox (no protoc).
COPY build.rs ./
COPY proto ./proto
COPY bench/rust ./bench/rust
COPY src ./src
RUN cargo build --release --locked --bin workqueue-sidecar \
    && install -s -D -m 0755 target/release/workqueue-sidecar /out/workqueue-sidecar

# Runtime: glibc and libgcc only (ring and the Rust std need them), CA
# certificates, and the "nonroot" user (65532).
FROM ${RUNTIME_IMAGE}

LABEL org.opencontainers.image.title="workqueue-sidecar" \
      org.opencontainers.image.description="Shared Kubernetes informers and a priority workqueue with leases, served over gRPC to a reconciler in the same pod" \
      org.opencontainers.image.licenses="Apache-2.0"

COPY --from=builder /out/workqueue-sidecar /usr/local/bin/workqueue-sidecar

# Numeric, so the kubelet can check runAsNonRoot without a passwd lookup.
USER 65532:65532

# 50051: gRPC (--tcp); 8081: admin HTTP, /metrics /healthz /readyz (--admin).
# Both listen on 127.0.0.1 unless the flags say otherwise (deploy/README.md).
EXPOSE 50051 8081

ENTRYPOINT ["/usr/local/bin/workqueue-sidecar"]
