#!/bin/sh
# Install Debian's Chromium and its WebDriver for the admin's browser test,
# unless both are there already. Idempotent: a second run does nothing.
set -eu

if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi

$SUDO apt-get update
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y chromium chromium-driver
