#!/usr/bin/env bash
# One-time set-up of the VS Code end-to-end test (`make test-vscode`): code-server 4.100.3
# (VS Code 1.100.3, the last release whose engines accept Node 20), puppeteer-core and
# @vscode/vsce into $TILLER_E2E_HOME (default ~/.cache/tiller/code-server), and Debian's chromium.
# Idempotent: a finished install leaves a `.done` stamp and is skipped. Takes ~10 min the first time.
set -euo pipefail
home="${TILLER_E2E_HOME:-$HOME/.cache/tiller/code-server}"
stamp="$home/.done-4.100.3"
[ -f "$stamp" ] && { echo "e2e set-up: already done in $home"; exit 0; }

export DEBIAN_FRONTEND=noninteractive
pkgs=(chromium ripgrep libkrb5-dev libx11-dev libxkbfile-dev libsecret-1-dev pkg-config build-essential python3)
need=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || need+=("$p"); done
if [ ${#need[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq "${need[@]}"
fi

mkdir -p "$home"
cd "$home"
[ -f package.json ] || echo '{"private": true}' > package.json
npm install --no-audit --no-fund --loglevel=error --ignore-scripts \
  code-server@4.100.3 puppeteer-core@24.43.1 @vscode/vsce@3.9.2

# code-server's postinstall refuses root and downloads ripgrep: do its steps by hand, offline.
vs="$home/node_modules/code-server/lib/vscode"
(cd "$vs" && npm install --no-audit --no-fund --loglevel=error --omit=dev --ignore-scripts)
# node-pty's last (offline) step exits 1 after pty.node is built: check for the file instead.
(cd "$vs" && npm_config_nodedir=/usr npm rebuild --foreground-scripts \
  kerberos @parcel/watcher @vscode/deviceid @vscode/spdlog native-watchdog node-pty) || true
ls "$vs"/node_modules/node-pty/build/Release/pty.node >/dev/null
mkdir -p "$vs/node_modules/@vscode/ripgrep/bin"
cp "$(command -v rg)" "$vs/node_modules/@vscode/ripgrep/bin/rg"
(cd "$vs/extensions" && npm install --no-audit --no-fund --loglevel=error --omit=dev)
(cd "$vs" && ln -sfn node_modules node_modules.asar)
(cd "$vs/bin/remote-cli" && ln -sfn code-linux.sh code-server)
(cd "$vs/bin/helpers" && ln -sfn browser-linux.sh browser.sh)
# argon2 (code-server's password hashing) is hoisted next to code-server.
(cd "$home" && npm_config_nodedir=/usr npm rebuild argon2)
touch "$stamp"
echo "e2e set-up: done in $home"
