# An image for sandboxed CI agents: Node 20 (Debian 13's nodejs) and cpfs with its native addon.
#   docker build -t cpfs .
#   docker run --rm --network none --device /dev/fuse --cap-add SYS_ADMIN \
#     -v "$PWD:/workspace" -v "$PWD/artifacts:/artifacts" cpfs "node build.mjs" "node --test"
# The entrypoint (scripts/ci-agent.sh) mounts /workspace, runs each argument as a command in a
# turn of its own (or CPFS_TURNS=signal: one command, a new turn on every SIGUSR1), writes
# log.json and turn-N.diff to /artifacts, and applies the result through a verified plan
# (CPFS_DISCARD=1 leaves /workspace untouched). test/docker-image.test.ts builds and runs it.
#
# Build arguments:
#   BASE      a Debian 13 (trixie) image; the test uses one made by debootstrap, as no public
#             registry is reachable there
#   PACKAGES  Debian packages the agents' commands need besides Node (default: git), e.g.
#             --build-arg PACKAGES="git npm make g++"
#   CA_CERTS  PEM text of extra CA certificates npm must trust while it downloads the
#             dependencies (a TLS-intercepting proxy); only the build stage sees it
# npm_config_registry and the *_PROXY variables, passed with --build-arg, reach npm too.
ARG BASE=debian:trixie-slim

# The build stage: compilers for the addon, npm for the dependencies. Nothing of it but the
# built files reaches the final image.
FROM ${BASE} AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends nodejs libnode-dev npm python3 make g++ ca-certificates \
 && apt-get clean && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/cpfs
# The dependencies first, in a layer of their own: it is rebuilt only when the lockfile changes.
COPY package.json package-lock.json ./
ARG CA_CERTS=""
ARG npm_config_registry
RUN if [ -n "$CA_CERTS" ]; then printf '%s\n' "$CA_CERTS" > /tmp/extra-ca.pem; export NODE_EXTRA_CA_CERTS=/tmp/extra-ca.pem; fi \
 && npm ci --ignore-scripts --no-audit --no-fund \
 && rm -f /tmp/extra-ca.pem
COPY tsconfig.json binding.gyp ./
COPY scripts ./scripts
COPY src ./src
# What npm ci's scripts do (native-bindings.md); then what only building needs goes: the test
# framework, the TypeScript compiler, esbuild, node-gyp and the type definitions (package.json and the
# lockfile stay as they are).
RUN npm rebuild \
 && node scripts/build-native.mjs \
 && node node_modules/typescript/bin/tsc -p tsconfig.json \
 && node scripts/bundle-cli.mjs \
 && npm prune --omit=dev --no-audit --no-fund \
 && npm uninstall --no-save --omit=dev --ignore-scripts --no-audit --no-fund typescript esbuild node-gyp @types/node \
 && chmod +x dist/cli/cpfs.cjs scripts/ci-agent.sh

# The final image: Node, cpfs and PACKAGES, no compilers.
FROM ${BASE}
ARG PACKAGES=git
RUN apt-get update \
 && apt-get install -y --no-install-recommends nodejs ca-certificates ${PACKAGES} \
 && apt-get clean && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/cpfs
COPY --from=build /opt/cpfs/package.json ./
COPY --from=build /opt/cpfs/node_modules ./node_modules
COPY --from=build /opt/cpfs/dist ./dist
COPY --from=build /opt/cpfs/build/Release/cpfs_native.node ./build/Release/
COPY --from=build /opt/cpfs/scripts ./scripts
RUN ln -s /opt/cpfs/dist/cli/cpfs.cjs /usr/local/bin/cpfs && cpfs --version
ENV CPFS_HOME=/var/lib/cpfs
VOLUME ["/workspace", "/artifacts"]
WORKDIR /workspace
ENTRYPOINT ["/opt/cpfs/scripts/ci-agent.sh"]
