# syntax=docker/dockerfile:1
#
# One image for every Ambient Desk process: `desk up` by default (the whole system on one
# machine), `desk <service>` in Kubernetes (each Deployment passes its service as args).
#
#   docker build -t ambient-desk .
#   docker run --rm -it --name desk ambient-desk        # desk up (its listeners are on the
#   docker exec desk desk send-webhook --repeat 2       #   container's loopback: use exec)
#   docker run --rm -e DESK_NATS_URL=nats://nats:4222 -p 8080:8080 ambient-desk router
#
# The builder installs the project into a virtualenv; the final stage copies only that
# virtualenv onto a fresh python:3.11-slim (no pip cache, no build tools, no sources).

# pin by digest: no image registry is reachable from where this was written, so the tag is not
# pinned yet. Where one is, resolve the tag and append the digest (both stages use this ARG):
#   docker buildx imagetools inspect python:3.11-slim --format '{{json .Manifest.Digest}}'
#   (or: skopeo inspect --format '{{.Digest}}' docker://docker.io/library/python:3.11-slim)
#   ARG PYTHON_IMAGE=python:3.11-slim@sha256:<that digest>
# The lock files are for Python 3.11: keep the image on 3.11 or re-run `make lock` for another.
ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS builder
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONUNBUFFERED=1
RUN python -m venv /opt/desk
WORKDIR /src
# Dependencies first, exactly as pinned (and hashed) in the lock file, so this layer is cached
# until the lock changes; then the project itself without resolving anything again.
COPY requirements.lock ./
RUN /opt/desk/bin/pip install --upgrade pip \
 && /opt/desk/bin/pip install --require-hashes -r requirements.lock
# The opt-in embeddings retriever (DESK_KNOWLEDGE_RETRIEVER=embeddings) adds about 1 GB: only
# with `docker build --build-arg EMBEDDINGS=1 .` (torch's CPU build, from TORCH_WHEELS).
ARG EMBEDDINGS=
ARG TORCH_WHEELS=https://download.pytorch.org/whl/cpu/torch/
COPY requirements-embeddings.lock ./
RUN if [ -n "$EMBEDDINGS" ]; then /opt/desk/bin/pip install --require-hashes --no-deps \
      --find-links "$TORCH_WHEELS" -r requirements-embeddings.lock; fi
# Only what the wheel is built from (see .dockerignore for what never reaches the context).
COPY pyproject.toml README.md ./
COPY shared ./shared
COPY services ./services
COPY desk ./desk
RUN /opt/desk/bin/pip install --no-deps . \
 && /opt/desk/bin/pip check \
 && /opt/desk/bin/desk --help >/dev/null

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="ambient-desk" \
      org.opencontainers.image.description="Ambient Desk: events in, reviewed replies out."
# MALLOC_ARENA_MAX: two malloc arenas per process, not eight per core (README "Bounded state":
# fewer freed pieces held over a long run; `desk up` sets the same).
ENV PATH=/opt/desk/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    MALLOC_ARENA_MAX=2 \
    DESK_HTTP_HOST=0.0.0.0 \
    DESK_HTTP_PORT=8080 \
    DESK_OPS_PORT=9090
RUN groupadd --system --gid 10001 desk \
 && useradd --system --uid 10001 --gid 10001 --home-dir /home/desk --create-home \
      --shell /usr/sbin/nologin desk
COPY --from=builder /opt/desk /opt/desk
USER 10001:10001
WORKDIR /home/desk
# A single service (`desk <service>`) serves /healthz, /readyz and /metrics on DESK_OPS_PORT
# (9090) and, for ingress and inbox_api, its routes, and nothing else, on DESK_HTTP_PORT (8080).
# Publish 8080 only; 9090 is for probes and Prometheus. `desk up` starts its own listeners
# (DESK_INGRESS_PORT 8000, DESK_INBOX_API_PORT 8001, an ops port per service).
EXPOSE 8080 9090
ENTRYPOINT ["desk"]
CMD ["up"]
