# An image for sandboxed CI agents: Node 20, cpfs installed with its native addon.
#   docker build -t cpfs .
#   docker run --device /dev/fuse --cap-add SYS_ADMIN \
#     -v "$PWD:/workspace" -v "$PWD/artifacts:/artifacts" cpfs "npm ci" "npm test"
# The entrypoint (scripts/ci-agent.sh, run directly by the tests) mounts /workspace, runs each
# argument as a command in a turn of its own (or CPFS_TURNS=signal: one command, a new turn on
# every SIGUSR1), writes log.json and turn-N.diff to /artifacts, and applies the result
# through a verified plan (CPFS_DISCARD=1 leaves /workspace untouched).
FROM node:20-bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ git ca-certificates fuse3 \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/cpfs
COPY package.json package-lock.json tsconfig.json binding.gyp ./
COPY scripts ./scripts
COPY src ./src
RUN npm ci --no-audit --no-fund && npm link
ENV CPFS_HOME=/var/lib/cpfs
VOLUME ["/workspace", "/artifacts"]
WORKDIR /workspace
ENTRYPOINT ["/opt/cpfs/scripts/ci-agent.sh"]
CMD ["echo no command given; exit 2"]
