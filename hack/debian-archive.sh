# shellcheck shell=bash
# Sourced by install-deps.sh and engine-rootfs.sh. debian_archive_uri prints the archive URI of the machine's
# own bookworm sources (deb822 .sources first, then sources.list), read from apt's configuration so that no
# host name is written anywhere; the extra suites (bookworm-backports, trixie, sid) live on the same archive.
debian_archive_uri() {
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [[ -f $f ]] || continue
    awk 'BEGIN{RS=""} /Suites:[^\n]*bookworm([ \n]|$)/ && !/security/ {
           if (match($0, /URIs:[ \t]*[^ \t\n]+/)) { u=substr($0, RSTART, RLENGTH); sub(/URIs:[ \t]*/, "", u); print u; exit } }' "$f"
  done | head -n1 | grep . && return 0
  awk '$1=="deb" && $3=="bookworm" {print $2; exit}' /etc/apt/sources.list 2>/dev/null | grep .
}
