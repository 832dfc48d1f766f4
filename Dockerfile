# The regional worker image (the receivers and the codec endpoint run it with another command). Debian-based on
# purpose: the Temporal SDK's native core needs glibc (not musl). Node 24, the LTS line, the one the suite runs on
# (test/integration/compiled.test.ts runs the compiled entry points as this image does).

# Build: every dependency (TypeScript, tsx), src/ compiled to dist/ and the workflow bundle baked (npm run build).
FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY dev/bin/build.ts ./dev/bin/
COPY src ./src
RUN npm run build

# Runtime: production dependencies and compiled JavaScript only; no TypeScript, no tsx, no source.
FROM node:24-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production HOLD_SWEEPER_MODE=production
COPY package.json package-lock.json ./
# --omit=optional: the Node the npm scripts run on (node-linux-*: the image has its own) and the bundler's native
# compiler (the bundle is baked below) stay out.
RUN npm ci --omit=dev --omit=optional --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
# Bundled once at build time (dist/workflow-bundle.js); every replica then starts without webpack.
ENV WORKFLOW_BUNDLE_PATH=/app/dist/workflow-bundle.js
# The Worker Deployment build id (docs/deploys.md): docker build --build-arg BUILD_ID=$(git rev-parse --short HEAD).
# Empty = "wf-" + a hash of the bundle baked above.
ARG BUILD_ID=
ENV WORKER_BUILD_ID=${BUILD_ID}
USER node
# One region per container in production; HOLD_SWEEPER_REGIONS picks it (see docker-compose.yml). The operator CLI is
# `node dist/bin/ops.js` in here (`npm run ops` needs tsx and the source, which the image does not have).
# The semi-space cap: Node 24 lets an isolate's young generation grow to 128 MiB where memory is plentiful, and a
# worker has two isolates (its main thread, the SDK's workflow thread); two 8 MiB semi-spaces keep it under 400 MiB.
CMD ["node", "--max-semi-space-size=8", "dist/bin/worker.js"]
