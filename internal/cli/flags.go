package cli

import (
	"github.com/spf13/pflag"

	"github.com/valkey-ha/valkey-ha/internal/contract"
)

// Whether a subcommand's --cluster-domain has a default (the controllers and `test` always check hosts) or is
// optional (the in-pod steps check only when the chart passes it).
const (
	clusterDomainDefaulted = false
	clusterDomainOptional  = true
)

// clusterDomainFlag declares --cluster-domain (the cluster's DNS domain, the <domain> of
// <pod>.<statefulset>.<namespace>.svc.<domain>) on f: the one declaration every subcommand uses. A defaulted flag
// starts at contract.DefaultClusterDomain; an optional one at "" (no host check: the chart always passes it, a
// hand-run step may leave the check out). checks says what the domain is checked against.
func clusterDomainFlag(f *pflag.FlagSet, p *string, optional bool, checks string) {
	def, usage := contract.DefaultClusterDomain, "cluster DNS domain: "+checks
	if optional {
		def, usage = "", usage+" (empty: no check)"
	}
	f.StringVar(p, "cluster-domain", def, usage)
}
