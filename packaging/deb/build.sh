#!/usr/bin/env bash
# Stages what contractd's Debian package holds and builds it with nfpm.
# `make deb` runs it from the top of the repository, with the binary
# already built in $BIN (its version, commit and date stamped in by the
# Makefile), and passes VERSION, COMMIT, DATE, BIN, DIST, GO and
# NFPM_VERSION. It writes $DIST/contractd_VERSION-1_ARCH.deb and prints its
# path. nfpm is taken from $NFPM, the PATH or Go's bin directory, else
# installed there through the Go module proxy.
set -euo pipefail
: "${VERSION:?}" "${COMMIT:?}" "${DATE:?}"
BIN=${BIN:-bin} DIST=${DIST:-dist} GO=${GO:-go} NFPM_VERSION=${NFPM_VERSION:-v2.48.0}
MAINTAINER=${DEB_MAINTAINER:-contractd maintainers <maintainers@contractd.example>}
ARCH=$("$GO" env GOARCH)
STAGE=$DIST/stage
# nfpm dates every file in the package SOURCE_DATE_EPOCH: the build date.
SOURCE_DATE_EPOCH=$(date -u -d "$DATE" +%s)
export SOURCE_DATE_EPOCH

rm -rf "$STAGE"
mkdir -p "$STAGE/systemd"
install -m 0755 "$BIN/contractd" "$STAGE/contractd"
# The units and the HA drop-in run the packaged binary.
for f in packaging/systemd/*; do
	sed 's#/usr/local/bin/contractd#/usr/bin/contractd#g' "$f" >"$STAGE/systemd/${f##*/}"
done
# The manual page and the completions come from the commands' own --help.
"$STAGE/contractd" man | gzip -9n >"$STAGE/contractd.1.gz"
"$STAGE/contractd" completion bash >"$STAGE/contractd.bash"
"$STAGE/contractd" completion zsh >"$STAGE/_contractd"
{
	printf 'contractd (%s-1) unstable; urgency=medium\n\n' "$VERSION"
	printf '  * Built from commit %s.\n\n' "$COMMIT"
	printf ' -- %s  %s\n' "$MAINTAINER" "$(date -u -R -d "$DATE")"
} | gzip -9n >"$STAGE/changelog.Debian.gz"

nfpm=${NFPM:-$(command -v nfpm || true)}
if [ -z "$nfpm" ]; then
	gobin=$("$GO" env GOBIN)
	[ -n "$gobin" ] || gobin=$("$GO" env GOPATH)/bin
	if [ ! -x "$gobin/nfpm" ]; then
		echo "deb: installing nfpm $NFPM_VERSION with go install" >&2
		"$GO" install "github.com/goreleaser/nfpm/v2/cmd/nfpm@$NFPM_VERSION"
	fi
	nfpm=$gobin/nfpm
fi
# nfpm.yaml names what build.sh knows as ${VAR}: fill them in.
sed -e "s|\${ARCH}|$ARCH|g" -e "s|\${VERSION}|$VERSION|g" -e "s|\${MAINTAINER}|$MAINTAINER|g" -e "s|\${STAGE}|$STAGE|g" \
	packaging/deb/nfpm.yaml >"$STAGE/nfpm.yaml"
deb=$DIST/contractd_${VERSION}-1_${ARCH}.deb
"$nfpm" package --config "$STAGE/nfpm.yaml" --packager deb --target "$deb" >&2
echo "$deb"
