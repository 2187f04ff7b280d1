#!/bin/sh
# Generates a CA and one certificate for the NATS servers (clients and
# routes), valid for the Kubernetes names of nats-values.yaml (Helm release
# "nats" in namespace "e2a") and the compose node names:
#
#   deploy/tls/gen-certs.sh DIR      # writes DIR/ca.crt, DIR/tls.crt, DIR/tls.key
#   deploy/tls/gen-certs.sh --if-missing DIR   # the same, unless DIR holds them
#                                    # already (deploy/compose runs it at every up)
#
# Kubernetes:  kubectl -n e2a create secret generic nats-server-tls \
#                --from-file=DIR/ca.crt --from-file=DIR/tls.crt --from-file=DIR/tls.key
# compose:     nothing to do: its service tls runs this script with
#              --if-missing into deploy/compose/tls before the servers start.
#
# The key never leaves DIR (0600). The CA is valid for 10 years, the
# servers' certificate for 825 days. To renew it, run the script again on
# the same DIR, with the CA's key back in DIR/ca.key if you kept it apart:
# it signs a new tls.crt/tls.key with that CA and leaves ca.crt as it is,
# so every server and e2a pod keeps trusting the others' certificates
# whichever sees the updated secret first (the kubelet updates each pod's
# copy on its own); then update the secret (the reloader picks the new
# files up):
#
#   kubectl -n e2a create secret generic nats-server-tls --dry-run=client -o yaml \
#     --from-file=DIR/ca.crt --from-file=DIR/tls.crt --from-file=DIR/tls.key | kubectl apply -f -
#
# With ca.crt in DIR but no ca.key it stops rather than make a new CA: until
# every pod had the new secret, a server or client holding one CA would
# refuse the connections (routes, reconnects) of those holding the other.
# An empty DIR makes a new CA. Use your own CA (cert-manager, …) when you
# have one: the servers need tls.crt/tls.key with these names, the e2a
# pods ca.crt.
set -eu
if_missing=false
if [ "${1:-}" = --if-missing ]; then
  if_missing=true
  shift
fi
dir=${1:?usage: gen-certs.sh [--if-missing] DIR}
if $if_missing && [ -s "$dir/ca.crt" ] && [ -s "$dir/tls.crt" ] && [ -s "$dir/tls.key" ]; then
  echo "$dir holds ca.crt, tls.crt and tls.key: kept"
  exit 0
fi
mkdir -p "$dir"
umask 077
ns=${NATS_NAMESPACE:-e2a}
san="DNS:localhost,IP:127.0.0.1,DNS:nats-1,DNS:nats-2,DNS:nats-3"
san="$san,DNS:nats,DNS:nats.$ns,DNS:nats.$ns.svc,DNS:nats.$ns.svc.cluster.local"
san="$san,DNS:*.nats-headless,DNS:*.nats-headless.$ns,DNS:*.nats-headless.$ns.svc,DNS:*.nats-headless.$ns.svc.cluster.local"
if [ -s "$dir/ca.crt" ] && [ -s "$dir/ca.key" ]; then
  # A renewal: the CA everyone trusts signs the new certificate.
  echo "renewing with the CA of $dir (ca.crt kept)"
elif [ -e "$dir/ca.crt" ]; then
  echo "$dir/ca.crt is there without its key $dir/ca.key: put the key back to renew with that CA," >&2
  echo "or use an empty directory for a new CA (every server and e2a pod must then get its ca.crt)" >&2
  exit 1
else
  openssl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:P-256 -days 3650 \
    -subj "/CN=e2a NATS CA" -keyout "$dir/ca.key" -out "$dir/ca.crt" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
fi
openssl req -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:P-256 \
  -subj "/CN=nats" -keyout "$dir/tls.key" -out "$dir/tls.csr" 2>/dev/null
printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\nkeyUsage=critical,digitalSignature\nbasicConstraints=critical,CA:FALSE\n' "$san" > "$dir/ext.cnf"
openssl x509 -req -in "$dir/tls.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial \
  -days 825 -extfile "$dir/ext.cnf" -out "$dir/tls.crt" 2>/dev/null
rm -f "$dir/tls.csr" "$dir/ext.cnf" "$dir/ca.srl"
chmod 0644 "$dir/ca.crt" "$dir/tls.crt"
echo "wrote $dir/ca.crt $dir/tls.crt $dir/tls.key (CA key: $dir/ca.key, keep it apart)"
