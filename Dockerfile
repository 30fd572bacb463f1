# The Hive agent image. Three stages: the CO-RE BPF object (compiled once, loaded unchanged
# on every kernel with BTF), the TypeScript compiled to JavaScript with production
# dependencies only, and a slim Node 24 runtime with Debian's libbpf, which the loader
# drives through koffi. Build from the repository root:
#   docker build -t registry.example.com/hive:0.1.0 .
# The DaemonSet runs it as `hive agent …` (component/builders/daemonset.ts).

FROM debian:bookworm-slim AS bpf
RUN apt-get update \
  && apt-get install -y --no-install-recommends clang llvm libbpf-dev linux-libc-dev \
  && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY bpf/ bpf/
RUN sh bpf/build.sh

FROM node:24-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json tsconfig.json tsconfig.build.json ./
# `npm install` honours the lock file; `npm ci` rejects one that records only the
# build platform's optional binaries (biome's), as npm 11 writes it.
RUN npm install --no-audit --no-fund
COPY api/ api/
COPY component/ component/
COPY runtime/ runtime/
RUN npm run build && npm prune --omit=dev --no-audit --no-fund

FROM node:24-bookworm-slim
RUN apt-get update \
  && apt-get install -y --no-install-recommends libbpf1 \
  && rm -rf /var/lib/apt/lists/*
WORKDIR /app
ENV NODE_ENV=production
# The package's own layout (as `npm install` lays it out): dist/, bpf/hive.bpf.o, package.json.
COPY --from=build /src/package.json ./
COPY --from=build /src/node_modules/ node_modules/
COPY --from=build /src/dist/ dist/
COPY --from=bpf /src/bpf/hive.bpf.o bpf/hive.bpf.o
# Root in the container, but with only the capabilities the DaemonSet adds (never privileged).
USER 0
ENTRYPOINT ["node", "dist/runtime/cli/main.js"]
CMD ["agent"]
