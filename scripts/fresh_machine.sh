#!/usr/bin/env bash
# Run a command as it would run on a machine that never ran rpent: an empty /tmp and a new $HOME, so
# nothing an earlier run left (Ray's /tmp/ray, ~/.cache, ~/.config, session registries, /tmp files)
# can make it pass or fail.
#
#   scripts/fresh_machine.sh python -m pytest -q
#
# As root (and where `unshare` works): a private mount namespace in which an empty folder is mounted
# over /tmp; other users' and other runs' /tmp is untouched and unseen. Otherwise: a new $HOME and
# $TMPDIR only (said on stderr), since /tmp cannot be replaced without privileges.
# The folders live under ${FRESH_ROOT:-/var/tmp} and are removed afterwards (FRESH_KEEP=1 keeps them).
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: scripts/fresh_machine.sh COMMAND [ARG...]" >&2; exit 2; }
ROOT="${FRESH_ROOT:-/var/tmp}"
FRESH_TMP="$(mktemp -d "$ROOT/rpent-fresh-tmp.XXXXXX")"
FRESH_HOME="$(mktemp -d "$ROOT/rpent-fresh-home.XXXXXX")"
chmod 1777 "$FRESH_TMP"
cleanup() { [ "${FRESH_KEEP:-0}" = 1 ] || rm -rf "$FRESH_TMP" "$FRESH_HOME"; }
trap cleanup EXIT

if [ "$(id -u)" -eq 0 ] && unshare --mount --propagation private true 2>/dev/null; then
    echo "fresh machine: private mount namespace, empty /tmp ($FRESH_TMP), HOME=$FRESH_HOME" >&2
    set +e
    unshare --mount --propagation private -- env HOME="$FRESH_HOME" FRESH_TMP="$FRESH_TMP" \
        bash -c 'mount --bind "$FRESH_TMP" /tmp && unset TMPDIR RAY_TMPDIR XDG_CACHE_HOME XDG_CONFIG_HOME XDG_DATA_HOME && exec "$@"' \
        fresh-machine "$@"
    rc=$?
else
    echo "fresh machine: not root or no unshare: new HOME=$FRESH_HOME and TMPDIR=$FRESH_TMP only (/tmp is shared)" >&2
    set +e
    env -u RAY_TMPDIR -u XDG_CACHE_HOME -u XDG_CONFIG_HOME -u XDG_DATA_HOME HOME="$FRESH_HOME" TMPDIR="$FRESH_TMP" "$@"
    rc=$?
fi
exit $rc
