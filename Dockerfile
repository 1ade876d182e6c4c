# One image for the three daemons: koordlet, koord-manager, koord-scheduler (and the koord CLI).
# No ENTRYPOINT: each manifest in deploy/ sets `command` to one of the console scripts of
# pyproject.toml [project.scripts] (tests/unit/deploy checks both lists).
#   docker build -t ghcr.io/koord-project/koord:0.1.0 .
FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
# gcc builds the koordlet's C cgroup parsers (agent/system/_cgparse.c); the runtime image needs no compiler.
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
RUN python -m venv /opt/koord
WORKDIR /src
COPY pyproject.toml README.md ./
COPY apis/ apis/
COPY proto/ proto/
COPY kube/ kube/
COPY agent/ agent/
COPY manager/ manager/
COPY scheduler/ scheduler/
COPY koord/ koord/
RUN /opt/koord/bin/pip install '.[gpu]' \
    && /opt/koord/bin/python -m compileall -q /opt/koord

FROM python:3.11-slim
LABEL org.opencontainers.image.title="koord" \
      org.opencontainers.image.description="koordlet, koord-manager and koord-scheduler" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PATH=/opt/koord/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
COPY --from=build /opt/koord /opt/koord
# Fails the build if an entry point is missing or does not start.
RUN koordlet --version && koord-manager --version && koord-scheduler --version && koord version \
    && python -c "import agent.system._cgparse"
# koord-manager and koord-scheduler run as this non-root user (the manifests set runAsUser 65532 too).
# The koordlet DaemonSet overrides it with runAsUser 0: it writes the cgroup and resctrl files of other
# pods on the host, which only root (with CAP_SYS_ADMIN) may do.
RUN groupadd --system --gid 65532 koord \
    && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin koord
USER 65532:65532
WORKDIR /
CMD ["koord", "version"]
