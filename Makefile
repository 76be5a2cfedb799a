# valkey-ha: two Helm charts + valkey-sentinel-ctl. Every target installs what it needs (hack/install-deps.sh).
SHELL := /bin/bash
GO    ?= go
export GOTOOLCHAIN := local
export PATH := $(shell go env GOPATH)/bin:$(PATH)

.PHONY: deps build test unit e2e demo images lint bench clean

deps: ## apt packages (valkey 8.0, redis 7.0) and the helm CLI
	hack/install-deps.sh

build:
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/valkey-sentinel-ctl ./cmd/valkey-sentinel-ctl

unit: deps ## unit, real-process and chart render tests
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 20m ./...

test: unit e2e ## everything CI runs: unit, real-process and render tests, then the e2e suite on the local cluster

e2e: deps ## the e2e suite on the local cluster (or $$KUBECONFIG)
	hack/e2e.sh

demo: deps ## the main job: install both charts and show a healthy, failover-ready deployment
	hack/demo.sh

images: deps ## build the valkey, redis and controller images and load them into the local cluster
	hack/images.sh

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags e2e ./e2e/...

bench: deps ## the benchmark suite (issue 8, about 6 minutes): prints a table and rewrites BENCHMARKS.md
	$(GO) test -tags bench -count=1 -timeout 15m -run '^TestBenchmarks$$' -v ./bench/

clean:
	rm -rf bin
