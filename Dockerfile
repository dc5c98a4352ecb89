# cluster-cron image: `docker build -t registry.example.com/cluster-cron:0.1.0 .`
# Not built in this project's CI (no container engine there); see the README's "Deploying".

# Build: all dependencies (TypeScript), compile to dist/, then drop the dev dependencies.
FROM node:20-bookworm-slim AS build
# better-sqlite3 compiles from source when no prebuilt binary is reachable.
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json ./
COPY src ./src
RUN npm run build \
 && npm prune --omit=dev --no-audit --no-fund

# Runtime: production dependencies and dist/ only, as a non-root user.
FROM node:20-bookworm-slim AS runtime
ENV NODE_ENV=production \
    SCHEDULER_JOBS_DIR=/etc/cluster-cron/jobs \
    SCHEDULER_STORE=sqlite:/var/lib/cluster-cron/scheduler.db \
    SCHEDULER_LOG_FORMAT=json
RUN groupadd --system --gid 10001 scheduler \
 && useradd --system --uid 10001 --gid 10001 --home-dir /nonexistent --no-create-home --shell /usr/sbin/nologin scheduler \
 && mkdir -p /etc/cluster-cron/jobs /var/lib/cluster-cron \
 && chown 10001:10001 /var/lib/cluster-cron
WORKDIR /app
COPY --from=build /app/package.json ./package.json
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY bin ./bin
# The jobs folder: mount your job files here (a ConfigMap, a bind mount). The image ships none.
# /var/lib/cluster-cron holds the SQLite file of the embedded default; a cluster uses SCHEDULER_STORE.
VOLUME ["/var/lib/cluster-cron"]
USER 10001:10001
# The HTTP server (probes, metrics, status page) when SCHEDULER_HTTP=0.0.0.0:9464.
EXPOSE 9464
# No HEALTHCHECK: the server listens on loopback unless SCHEDULER_HTTP says otherwise, and Kubernetes
# uses its own probes (deploy/kubernetes).
ENTRYPOINT ["node", "bin/scheduler"]
CMD ["run"]
