# syntax=docker/dockerfile:1
#
# tokenscope's container image: the CLI alone (`bench`, `merge`, `calibrate`, ...).
#
#   docker build -t tokenscope:dev .
#   docker run --rm tokenscope:dev bench --url http://host:8000/v1 --concurrency 1,8
#
# The binary links only libc, libm and libgcc_s: TLS is rustls (no OpenSSL), the
# tokenizer is pure Rust (fancy-regex, no Oniguruma), and wgpu loads Vulkan/Wayland
# with dlopen at run time (`tokenscope kernels` finds no GPU in this image unless
# the node's driver is mounted; the image is for the benchmark client).
#
# Not a fully static (musl) binary: wgpu loads the Vulkan driver with dlopen,
# which a static musl binary cannot do; glibc's three libraries are the whole
# runtime dependency.
#
# The runtime stage is debian:bookworm-slim rather than distroless: the merge Job
# expands `/results/shard-*.json` with `sh -c`, and `kubectl cp` needs `tar`.

ARG RUST_VERSION=1.95

FROM rust:${RUST_VERSION}-bookworm AS builder
WORKDIR /src
# The whole workspace: cargo reads every member's manifest (the wasm crates
# web, web-gpu, web-report, web-quality and web-run included), but `-p tokenscope --bin tokenscope`
# compiles, and downloads, only what the native binary needs.
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p tokenscope --bin tokenscope \
 && install -D -m 0755 target/release/tokenscope /out/tokenscope

FROM debian:bookworm-slim AS runtime
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 65532 tokenscope \
 && useradd --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin tokenscope \
 && install -d -o 65532 -g 65532 /results
COPY --from=builder /out/tokenscope /usr/local/bin/tokenscope
# Numeric, so Kubernetes' runAsNonRoot can verify it without reading /etc/passwd.
USER 65532:65532
WORKDIR /results
# `bench --metrics-listen 0.0.0.0:9464` serves Prometheus exposition here.
EXPOSE 9464
ENTRYPOINT ["tokenscope"]
CMD ["--help"]
