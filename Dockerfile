# syntax=docker/dockerfile:1
# The controller image (valkey-sentinel-ctl), for users with Docker/BuildKit:
#
#   docker build -t valkey-ha/valkey-sentinel-ctl:0.1.0 .
#   docker buildx build --platform linux/amd64,linux/arm64 -t <your-registry>/valkey-sentinel-ctl:0.1.0 --push .
#
# Releases are built by .github/workflows/release.yaml (linux/amd64 + linux/arm64, signed, with SBOMs) and
# published under the charts' default reference (controller.image.registry/repository:<appVersion>).
#
# The result matches what hack/images.sh builds without Docker: one static binary at
# /valkey-sentinel-ctl as the entrypoint, running as 65532:65532, nothing else but CA certificates,
# /etc/passwd and /tmp (distroless-style). Both charts use it for the controllers, the install-ctl
# init container of data pods and the helm test pods.

# The builder, pinned by the digest of its multi-platform index (golang:1.26.8-bookworm, Go 1.26.8 as go.mod
# requires with GOTOOLCHAIN=local): the digest docker-library/repo-info records for that tag
# (repos/golang/remote/1.26.8-bookworm.md, commit e243c7edb883107b26904e1bfd094b120b43b9a8); it was not pulled
# and checked on the machine that wrote it (no registry there). Override with --build-arg GO_IMAGE=...
ARG GO_IMAGE=golang:1.26.8-bookworm@sha256:9fdc884aacc3bec89b20ffc69f4bb369c78210e3e4f600387b5128b12c199f81

FROM --platform=$BUILDPLATFORM ${GO_IMAGE} AS build
ARG TARGETOS=linux
ARG TARGETARCH
ARG VERSION=0.1.0
WORKDIR /src
# dependencies first, so source edits reuse the module layer
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags "-s -w -X github.com/valkey-ha/valkey-ha/internal/cli.Version=${VERSION}" \
      -o /out/valkey-sentinel-ctl ./cmd/valkey-sentinel-ctl
# the minimal root filesystem of the final image
RUN mkdir -p /rootfs/etc/ssl/certs /rootfs/tmp && chmod 1777 /rootfs/tmp \
 && cp /etc/ssl/certs/ca-certificates.crt /rootfs/etc/ssl/certs/ \
 && printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >/rootfs/etc/passwd \
 && printf 'root:x:0:\nnonroot:x:65532:\n' >/rootfs/etc/group

FROM scratch
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="valkey-sentinel-ctl" \
      org.opencontainers.image.description="valkey-ha controller: bootstrap, instance and sentinel controllers, status, helm test" \
      org.opencontainers.image.source="https://github.com/valkey-ha/valkey-ha" \
      org.opencontainers.image.version="${VERSION}"
COPY --from=build /rootfs/ /
COPY --from=build /out/valkey-sentinel-ctl /valkey-sentinel-ctl
USER 65532:65532
ENTRYPOINT ["/valkey-sentinel-ctl"]
