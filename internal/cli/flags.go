package cli

import (
	"path"

	"github.com/spf13/pflag"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
)

// clusterDomainUsage is the help text of --cluster-domain, the same in every subcommand that has it.
const clusterDomainUsage = "cluster DNS domain, the <domain> of every node and Sentinel host <pod>.<service>.<namespace>.svc.<domain>: " +
	"a descriptor, quorum document or Sentinel info that names a host outside it (or, for the in-pod steps, not this pod's instance) " +
	"is refused before a password is sent; the charts pass clusterDomain (empty: no host check)"

// clusterDomainFlag declares --cluster-domain on f: the one declaration every subcommand uses (instance,
// sentinel, test, bootstrap, prestop), with one default, contract.DefaultClusterDomain (the charts' clusterDomain
// default), and one help text. An explicit empty value turns the host checks off (tests on loopback).
func clusterDomainFlag(f *pflag.FlagSet, p *string) {
	f.StringVar(p, "cluster-domain", contract.DefaultClusterDomain, clusterDomainUsage)
}

// The in-pod steps' file flags default to where charts/valkey mounts each object (contract.Mount*).
var (
	defaultInstanceFile   = path.Join(contract.MountInstance, contract.KeyInstance)
	defaultSentinelsFile  = path.Join(contract.MountSentinels, contract.KeySentinels)
	defaultConfigTemplate = path.Join(contract.MountConfig, contract.KeyServerConfig)
	defaultConfigOut      = path.Join(contract.MountRuntime, contract.KeyServerConfig)
)
