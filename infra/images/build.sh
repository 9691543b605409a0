#!/usr/bin/env bash
# Build the local sandbox base images without any registry, tagged by content.
#   worldtrace/busybox:<hash>  from Debian's busybox-static (a second or two)
#   worldtrace/debian:<hash>   from mmdebstrap (about 20-60 s, needs Debian's mirror)
# Each is also tagged :latest. A tag that already exists is not rebuilt.
set -euo pipefail

PATH_ENV='PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
SUITE=bookworm
DEBIAN_PACKAGES="python3,git,procps,curl,iputils-ping,less,file,patch,faketime"
RECIPE_VERSION=1

have_tag() { docker image inspect "$1" >/dev/null 2>&1; }

build_busybox() {
  local bb hash tag work
  bb=$(command -v busybox)
  hash=$( (sha256sum "$bb" | cut -c1-64; echo "r$RECIPE_VERSION") | sha256sum | cut -c1-12)
  tag="worldtrace/busybox:$hash"
  if have_tag "$tag"; then echo "image $tag: up to date"; docker tag "$tag" worldtrace/busybox:latest; return; fi
  work=$(mktemp -d)
  mkdir -p "$work"/{bin,tmp,etc,root,home/user,proc,sys,dev,work}
  chmod 1777 "$work/tmp"
  cp "$bb" "$work/bin/busybox"
  for applet in $("$work/bin/busybox" --list); do
    [ "$applet" = busybox ] || ln -sf busybox "$work/bin/$applet"
  done
  printf 'root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000:user:/home/user:/bin/sh\n' > "$work/etc/passwd"
  printf 'root:x:0:\nuser:x:1000:\n' > "$work/etc/group"
  tar -C "$work" -cf "$work.tar" .
  docker import --change "ENV $PATH_ENV" --change 'CMD ["/bin/sh"]' "$work.tar" "$tag" >/dev/null
  docker tag "$tag" worldtrace/busybox:latest
  rm -rf "$work" "$work.tar"
  echo "image $tag: built"
}

build_debian() {
  local hash tag tarball
  hash=$(echo "$SUITE $DEBIAN_PACKAGES r$RECIPE_VERSION" | sha256sum | cut -c1-12)
  tag="worldtrace/debian:$hash"
  if have_tag "$tag"; then echo "image $tag: up to date"; docker tag "$tag" worldtrace/debian:latest; return; fi
  tarball=$(mktemp --suffix=.tar)
  mmdebstrap --quiet --variant=apt --include="$DEBIAN_PACKAGES" "$SUITE" "$tarball"
  docker import --change "ENV $PATH_ENV" --change 'ENV LANG=C.UTF-8' --change 'CMD ["/bin/bash"]' \
    "$tarball" "$tag" >/dev/null
  docker tag "$tag" worldtrace/debian:latest
  rm -f "$tarball"
  echo "image $tag: built"
}

case "${1:-all}" in
  busybox) build_busybox ;;
  debian) build_debian ;;
  all) build_busybox; build_debian ;;
  *) echo "usage: $0 [busybox|debian|all]" >&2; exit 2 ;;
esac
