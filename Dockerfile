# An image for sandboxed CI agents: Node 20, cpfs installed, its patched FUSE binding built.
# Run with:  docker run --device /dev/fuse --cap-add SYS_ADMIN -v "$PWD:/workspace" cpfs <command>
FROM node:20-bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ git ca-certificates fuse3 \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/cpfs
COPY package.json package-lock.json tsconfig.json ./
COPY scripts ./scripts
COPY src ./src
RUN npm ci --no-audit --no-fund && npm link
ENV CPFS_HOME=/var/lib/cpfs
WORKDIR /workspace
ENTRYPOINT ["cpfs"]
CMD ["--help"]
