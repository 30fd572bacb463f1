# The Hive agent image. Three stages: the CO-RE BPF objects (compiled once per architecture,
# loaded unchanged on every kernel with BTF), the agent bundled to JavaScript holding only what it
# uses, and a slim Node 24 runtime with Debian's libbpf, which the loader
# drives through koffi. Build from the repository root:
#   docker build -t registry.example.com/hive:0.1.0 .
# The DaemonSet runs it as `hive agent …` (component/builders/daemonset.ts).
#
# The base images are build arguments so that a build without a registry can substitute
# local images of the same content (scripts/build-image.ts makes them); the defaults are
# the public images.
ARG DEBIAN_IMAGE=debian:bookworm-slim
ARG NODE_IMAGE=node:24-bookworm-slim

FROM ${DEBIAN_IMAGE} AS bpf
RUN apt-get update \
  && apt-get install -y --no-install-recommends clang llvm libbpf-dev linux-libc-dev \
  && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY bpf/ bpf/
RUN sh bpf/build.sh

FROM ${NODE_IMAGE} AS build
# Network settings for this stage's npm only, unset unless the build command passes them (a
# registry mirror; a CA bundle it mounts for a TLS-intercepting network). Build arguments of
# this stage never reach the final image: it copies files from here, not configuration.
ARG npm_config_registry
ARG NODE_EXTRA_CA_CERTS
WORKDIR /src
COPY package.json package-lock.json tsconfig.json tsconfig.build.json ./
COPY scripts/bundle-agent.ts scripts/
# `npm ci`: exactly the locked versions (the lock holds every platform's build of the tools
# that ship one, so a build on any platform finds its own).
# --ignore-scripts: nothing the agent loads needs one (koffi's only checks its prebuilt
# binary, protobufjs's prints a version hint; the others belong to dev tools).
RUN npm ci --no-audit --no-fund --ignore-scripts
COPY api/ api/
COPY component/ component/
COPY runtime/ runtime/
# The agent bundled (scripts/bundle-agent.ts): the CLI and its worker threads in dist/agent/,
# minified, holding only the code they use. Its one package left outside is koffi (a native
# binary); type declarations and docs of it are never read.
RUN npm run bundle \
  && mkdir -p /out/node_modules \
  && cp -R node_modules/koffi node_modules/@koromix /out/node_modules/ \
  && find /out/node_modules -type f \( -name '*.d.ts' -o -name '*.d.mts' -o -name '*.d.cts' -o -name '*.map' \) -delete

FROM ${NODE_IMAGE}
# apt's package caches go too (80 MB): a base image without Docker's apt clean hook keeps them.
RUN apt-get update \
  && apt-get install -y --no-install-recommends libbpf1 \
  && apt-get clean \
  && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin
WORKDIR /app
ENV NODE_ENV=production
# V8's young generation at 2 MiB a half instead of 16: the idle agent is about 23 MiB smaller, and
# its event path measured no slower (bench/kernel.ts; the idle figure: test/image).
ENV NODE_OPTIONS=--max-semi-space-size=2
# One malloc arena rather than one per thread (V8's compiler and GC threads, libuv's pool): what
# each thread freed stays in its own arena otherwise. The idle agent measured 7 MiB smaller with
# two arenas, and 5 MiB smaller again with one (test/image); the event path's cost, measured with
# it (bench/kernel.ts), stayed within 2%.
ENV MALLOC_ARENA_MAX=1
# The package root's layout, as the bundle finds things: dist/agent/ (two levels under the root,
# like the sources), the program's objects (one per architecture; the agent loads its own, so the
# same /app serves the arm64 image, which scripts/build-image.ts assembles from this one),
# package.json (the version), and koffi in node_modules.
COPY --from=build /src/package.json ./
COPY --from=build /out/node_modules/ node_modules/
COPY --from=build /src/dist/agent/ dist/agent/
COPY --from=bpf /src/bpf/hive.bpf.o /src/bpf/hive.arm64.bpf.o bpf/
# Root in the container, but with only the capabilities the DaemonSet adds (never privileged).
USER 0
ENTRYPOINT ["node", "dist/agent/hive.mjs"]
CMD ["agent"]
