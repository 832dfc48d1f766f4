# The regional worker image. Debian-based on purpose: the Temporal SDK's native core needs glibc (not musl).
FROM node:20-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production HOLD_SWEEPER_MODE=production
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund
COPY tsconfig.json ./
COPY src ./src
# Bundle the workflows once at build time; every replica then starts without webpack.
RUN node --import tsx src/bin/build-bundle.ts /app/workflow-bundle.js
ENV WORKFLOW_BUNDLE_PATH=/app/workflow-bundle.js
# The Worker Deployment build id (docs/deploys.md): docker build --build-arg BUILD_ID=$(git rev-parse --short HEAD).
# Empty = "wf-" + a hash of the bundle baked above.
ARG BUILD_ID=
ENV WORKER_BUILD_ID=${BUILD_ID}
USER node
# One region per container in production; HOLD_SWEEPER_REGIONS picks it (see docker-compose.yml).
CMD ["node", "--import", "tsx", "src/bin/worker.ts"]
