#!/usr/bin/env bash
# Make Debian's Chromium available for the end-to-end browser test: nothing to do when it is
# there; installed quietly when we are root with apt-get (a fresh CI machine; MELO_NO_APT=1
# forbids it); otherwise a one-line notice, and that test skips. Always exits 0.
set -uo pipefail
if command -v chromium >/dev/null 2>&1 || [ -n "${MELO_CHROMIUM:-}" ]; then
    exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && [ "${MELO_NO_APT:-}" != 1 ]; then
    echo "ensure_chromium: installing Chromium (Debian package chromium) for the browser test..." >&2
    log=$(mktemp)
    if (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium) \
        >"$log" 2>&1; then
        rm -f "$log"
        exit 0
    fi
    tail -n 5 "$log" >&2
    rm -f "$log"
fi
echo "ensure_chromium: no Chromium (Debian package chromium); the browser test will be skipped" >&2
exit 0
