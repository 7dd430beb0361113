# syntax=docker/dockerfile:1
# The keyfire binary in a small image: `docker build -t keyfire .`, then
# `docker run --rm -e KEYFIRE__REDIS__URL=redis://HOST:6379/0 keyfire` (runs `keyfire serve`).

# Built on bookworm, like the runtime below: a binary linked against a newer glibc
# (plain rust:1 follows Debian's current release) would not start on bookworm-slim.
FROM rust:1-bookworm AS builder
WORKDIR /src
COPY . .
# The cache mounts keep the crate registry and target/ between builds; the binary is copied
# out of target/ because a cache mount is not part of the image layer.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/usr/local/cargo/git \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked \
    && cp target/release/keyfire /usr/local/bin/keyfire

FROM debian:bookworm-slim
# keyfire links only glibc and libgcc_s (both in bookworm-slim) and carries its own TLS
# (rustls) and time zones, so the one package it needs is ca-certificates: the `http`
# handler's HTTPS calls verify servers against the system store in /etc/ssl/certs, which
# bookworm-slim leaves empty (keyfire would fall back to its bundled roots, with a warning,
# and miss Debian's updates to the store and any CA added to it). A CA of your own: a PEM
# file mounted into the container and named by handlers.http.ca_file, or a derived image
# that copies it to /usr/local/share/ca-certificates/ and runs update-ca-certificates.
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/*
# A fixed, numeric uid and gid (10001), so Kubernetes can check runAsNonRoot against the image
# and the manifests in deploy/kubernetes can name the same ids.
RUN groupadd --system --gid 10001 keyfire \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --shell /usr/sbin/nologin keyfire
COPY --from=builder /usr/local/bin/keyfire /usr/local/bin/keyfire
USER 10001:10001
# No HEALTHCHECK: it would need an HTTP client (curl or wget) in the image for /healthz and
# /readyz. Docker Compose orders the nodes after Redis's own health check, and Kubernetes
# probes the two routes from the kubelet (deploy/kubernetes/deployment.yaml).
EXPOSE 8080
# Exec form: keyfire is PID 1 and gets SIGTERM itself, so `docker stop` drains running jobs.
ENTRYPOINT ["keyfire"]
CMD ["serve"]
