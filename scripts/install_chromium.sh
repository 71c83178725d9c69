#!/usr/bin/env bash
# Chromium and its WebDriver for the browser test of the report pages
# (tests/page/test_assets.py), from Debian's packages, when they are not there yet.
set -euo pipefail
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
    if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
    $sudo apt-get update -qq
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver
fi
