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
# keyfire links only glibc (time zones are compiled in, no TLS), so no extra packages.
RUN useradd --system --uid 10001 --no-create-home --shell /usr/sbin/nologin keyfire
COPY --from=builder /usr/local/bin/keyfire /usr/local/bin/keyfire
USER keyfire
# Exec form: keyfire is PID 1 and gets SIGTERM itself, so `docker stop` drains running jobs.
ENTRYPOINT ["keyfire"]
CMD ["serve"]
